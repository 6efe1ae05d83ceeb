"""Credentials a user stores in a Secret (a kubeconfig, a talosconfig), read as data; pure.

Both formats can make their reader run a command, read a file or send requests elsewhere.
So a Secret's text is accepted only as one cluster, one user and one context with inline
credentials, every field on a whitelist, anything else refused (``Refused``) naming the
field. The YAML is bounded before it is built (size, events, nesting, no alias, tag,
merge key or repeated key, one document). No sentence quotes the text.

More in docs/design/notes.md, "ichor/kube/credentials.py".
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from ichor.settings import CredentialSettings

#: The largest kubeconfig or talosconfig read: one with embedded certificates is a few
#: KiB, and a Secret holds 1 MiB at most.
MAX_BYTES = 256 * 1024
#: YAML events (scalars, openers, closers) read at most: a kubeconfig has about 40, a
#: talosconfig a few per node.
MAX_EVENTS = 20_000
#: Nesting read at most: a kubeconfig nests five levels, a talosconfig four.
MAX_DEPTH = 12
#: The longest token, server address, name, node address read.
MAX_TOKEN = 64 * 1024
MAX_URL = 2048
MAX_NAME = 253
#: Endpoints and nodes a talosconfig may list.
MAX_ADDRESSES = 1000

SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

PROXY_SETTING = "ICHOR_CREDENTIALS_ALLOW_PROXY"
INSECURE_SETTING = "ICHOR_CREDENTIALS_ALLOW_INSECURE_TLS"

_INLINE = (
    "store inline credentials only (token, client-certificate-data and client-key-data, "
    "certificate-authority-data), for example the output of `talosctl kubeconfig` or "
    "`kubectl config view --minify --flatten`"
)
_TALOS_INLINE = (
    "store inline credentials only (ca, crt and key, base64), for example the output of "
    "`talosctl gen config` or `talosctl config new`"
)


class Refused(ValueError):
    """A stored credential is refused; the message is the project's own sentence."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Kubeconfig:
    """What the operator uses of a kubeconfig: one server and inline credentials."""

    server: str
    ca_pem: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    client_cert_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    tls_server_name: str | None = None
    insecure: bool = False
    proxy_url: str | None = None


@dataclass(frozen=True)
class Talosconfig:
    """What talosctl reads of a talosconfig: one context, its addresses and its keys."""

    context: str
    endpoints: tuple[str, ...]
    nodes: tuple[str, ...] = ()
    ca_pem: bytes = field(default=b"", repr=False)
    crt_pem: bytes = field(default=b"", repr=False)
    key_pem: bytes = field(default=b"", repr=False)
    proxy_url: str | None = None


# --- the vocabulary ---------------------------------------------------------------------------

#: Every field of the kubeconfig format (client-go's clientcmd/api/v1), for naming one
#: that is refused; a key outside it is never shown (it could be any text).
_KUBE_WORDS = frozenset(
    {
        *("apiVersion", "kind", "preferences", "clusters", "users", "contexts"),
        *("current-context", "extensions", "name", "cluster", "user", "context"),
        *("server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority"),
        *("certificate-authority-data", "proxy-url", "disable-compression", "namespace"),
        *("client-certificate", "client-certificate-data", "client-key", "client-key-data"),
        *("token", "tokenFile", "as", "as-uid", "as-groups", "as-user-extra", "username"),
        *("password", "auth-provider", "exec", "colors"),
    }
)
#: Every field of the talosconfig format (Talos's pkg/machinery/client/config).
_TALOS_WORDS = frozenset(
    {"context", "contexts", "target", "endpoints", "nodes", "ca", "crt", "key", "auth"}
    | {"cluster", "proxy-url", "basic", "siderov1", "username", "password", "identity"}
)

#: Why a field that does something the operator never lets a Secret do is refused.
_RUNS = "runs a command to get a credential, and the operator runs nothing a Secret names"
_PLUGIN = (
    "asks an auth-provider plugin for a credential (it may run a command or fetch a token "
    "from another server), and the operator runs nothing a Secret names"
)
_LOCAL_FILE = "reads a file of the reader's own disk, and the operator reads no path a Secret names"
_KUBE_REFUSED = {
    "exec": (_RUNS, _INLINE),
    "auth-provider": (_PLUGIN, _INLINE),
    "tokenFile": (_LOCAL_FILE, "put the token itself in `token`"),
    "certificate-authority": (_LOCAL_FILE, "use certificate-authority-data"),
    "client-certificate": (_LOCAL_FILE, "use client-certificate-data"),
    "client-key": (_LOCAL_FILE, "use client-key-data"),
    "username": ("is basic authentication, which the operator does not send", _INLINE),
    "password": ("is basic authentication, which the operator does not send", _INLINE),
    "as": ("impersonates another user, which the operator does not do", "remove it"),
    "as-uid": ("impersonates another user, which the operator does not do", "remove it"),
    "as-groups": ("impersonates another user, which the operator does not do", "remove it"),
    "as-user-extra": ("impersonates another user, which the operator does not do", "remove it"),
}
_TALOS_REFUSED = {
    "auth": (
        "authenticates with a password or with SideroV1 keys read from the reader's own "
        "disk, and the operator sends only the inline client certificate",
        _TALOS_INLINE,
    ),
    "target": ("is the deprecated form of endpoints", "list the address under `endpoints`"),
}


# --- the bounded YAML -------------------------------------------------------------------------


def _text(raw: bytes | str, *, what: str) -> str:
    data = raw.encode() if isinstance(raw, str) else raw
    if len(data) > MAX_BYTES:
        raise Refused(
            f"{what} is refused: it is {len(data):,} bytes, over the {MAX_BYTES:,} a "
            "credential file may be; store only the one cluster's entry"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{what} is refused: it is not UTF-8 text") from None


def _scan(text: str, *, what: str) -> None:
    """Refuse, before anything is built, a document larger, deeper or stranger than a
    credential file is: aliases, anchors, tags, merge keys, repeated keys, two documents.
    Go's readers (helm, talosctl) and this one would not read those alike. Every YAML
    event passes each of ``_SCAN_STEPS`` in order; the first reason found refuses."""
    state = _ScanState()
    try:
        for event in yaml.parse(text, Loader=SAFE_LOADER):
            for step in _SCAN_STEPS:
                why = step(state, event)
                if why is not None:
                    raise Refused(f"{what} is refused: {why}; {_KIND_STEP}")
    except yaml.YAMLError as error:
        raise Refused(f"{what} is refused: it is not YAML{_where(error)}") from None


@dataclass
class _ScanState:
    """What ``_scan`` has seen so far of one text."""

    events: int = 0
    documents: int = 0
    #: per open collection: for a mapping, the keys seen and whether the next scalar is
    #: a key; None for a sequence
    frames: list[tuple[set[str], list[bool]] | None] = field(default_factory=list)


def _scan_count(state: _ScanState, event: Any) -> str | None:
    state.events += 1
    if state.events > MAX_EVENTS:
        return f"it holds over {MAX_EVENTS:,} YAML values"
    return None


def _scan_alias(state: _ScanState, event: Any) -> str | None:
    if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
        return "it uses a YAML anchor or alias"
    return None


def _scan_documents(state: _ScanState, event: Any) -> str | None:
    if isinstance(event, yaml.DocumentStartEvent):
        state.documents += 1
        if state.documents > 1:
            return "it holds more than one YAML document"
    return None


def _scan_tag(state: _ScanState, event: Any) -> str | None:
    if isinstance(event, yaml.NodeEvent) and _explicit_tag(event):
        return "it uses a YAML tag"
    return None


def _scan_key(state: _ScanState, event: Any) -> str | None:
    """Inside a mapping, every other event is a key: a plain scalar, no merge key, and
    none twice."""
    top = state.frames[-1] if state.frames else None
    if top is None or isinstance(event, yaml.MappingEndEvent):
        return None
    keyed = top[1][0]
    top[1][0] = not keyed  # a key, then its value
    if not keyed:
        return None
    if not isinstance(event, yaml.ScalarEvent):
        return "a key of a mapping is not a plain value"
    if event.value == "<<":
        return "it uses a YAML merge key"
    if event.value in top[0]:
        return "a mapping repeats a key"
    top[0].add(event.value)
    return None


def _scan_depth(state: _ScanState, event: Any) -> str | None:
    if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
        state.frames.append((set(), [True]) if isinstance(event, yaml.MappingStartEvent) else None)
        if len(state.frames) > MAX_DEPTH:
            return f"it nests deeper than {MAX_DEPTH} levels"
    elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
        state.frames.pop()
    return None


#: The checks of each YAML event, in the order ``_scan`` asks them.
_SCAN_STEPS: tuple[Callable[[_ScanState, Any], str | None], ...] = (
    _scan_count,
    _scan_alias,
    _scan_documents,
    _scan_tag,
    _scan_key,
    _scan_depth,
)


_KIND_STEP = "a credential file is one plain mapping of names and values"


def _explicit_tag(event: Any) -> bool:
    """The parser gives a tag only where the text wrote one (``!!str``, ``!foo``, ``!``)."""
    return getattr(event, "tag", None) is not None


def _where(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    line, column = getattr(mark, "line", None), getattr(mark, "column", None)
    if isinstance(line, int) and isinstance(column, int):
        return f" (line {line + 1}, column {column + 1})"
    return ""


def _load(raw: bytes | str, *, what: str) -> Mapping[str, Any]:
    text = _text(raw, what=what)
    _scan(text, what=what)
    try:
        loaded: Any = yaml.load(text, Loader=SAFE_LOADER)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as error:
        detail = _where(error) if isinstance(error, yaml.YAMLError) else ""
        raise Refused(f"{what} is refused: it is not YAML{detail}") from None
    if not isinstance(loaded, Mapping):
        raise Refused(f"{what} is refused: it is {_kind(loaded)}, not a mapping; {_KIND_STEP}")
    return loaded


def _kind(value: object) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return "a value of another kind"


# --- checks shared by both formats ---------------------------------------------------------


@dataclass(frozen=True)
class _Reader:
    what: str
    words: frozenset[str]
    refused: Mapping[str, tuple[str, str]]
    step: str

    def refuse(self, path: str, why: str, step: str | None = None) -> Refused:
        return Refused(f"{self.what} is refused: {path} {why}; {step or self.step}", field=path)

    def name(self, path: str, key: object) -> str:
        """``path.key`` when the key is a word of the format, else a placeholder: a key
        outside the vocabulary may be any text of the Secret."""
        shown = key if isinstance(key, str) and key in self.words else "<a field>"
        return f"{path}.{shown}" if path else str(shown)

    def only(self, node: Mapping[Any, Any], path: str, allowed: Iterable[str]) -> None:
        allowed = set(allowed)
        for key in node:
            if key in allowed:
                continue
            where = self.name(path, key)
            if isinstance(key, str) and key in self.refused:
                why, step = self.refused[key]
                raise self.refuse(where, why, step)
            if isinstance(key, str) and key in self.words:
                raise self.refuse(where, "is a field the operator does not read", "remove it")
            raise self.refuse(
                where, "is not a field of this format (its name is not shown)", "remove it"
            )

    def mapping(self, value: object, path: str) -> Mapping[Any, Any]:
        if not isinstance(value, Mapping):
            raise self.refuse(path, f"is {_kind(value)}, not a mapping")
        return value

    def string(self, value: object, path: str, *, limit: int = MAX_NAME) -> str:
        if not isinstance(value, str) or not value:
            raise self.refuse(path, f"is {_kind(value)}, not a non-empty string")
        if len(value) > limit or not value.isprintable():
            raise self.refuse(
                path, f"is not printable text of at most {limit:,} characters", "fix it"
            )
        return value

    def pem(self, value: object, path: str, *, kind: str) -> bytes:
        """Base64 of a PEM block of ``kind`` (``CERTIFICATE``, ``PRIVATE KEY``)."""
        if not isinstance(value, str) or not value:
            raise self.refuse(path, f"is {_kind(value)}, not base64 text")
        try:
            decoded = base64.b64decode("".join(value.split()), validate=True)
        except (binascii.Error, ValueError):
            raise self.refuse(path, "is not base64", "store the PEM file base64-encoded") from None
        marker = b"CERTIFICATE-----" if kind == "CERTIFICATE" else b"PRIVATE KEY-----"
        if b"-----BEGIN " not in decoded or marker not in decoded:
            raise self.refuse(
                path, f"is not a PEM {kind.lower()}", "store the PEM file base64-encoded"
            )
        return decoded

    def proxy(self, value: object, path: str, policy: CredentialSettings) -> str:
        if not policy.allow_proxy:
            raise self.refuse(
                path,
                "sends the operator's requests through another address, which this "
                f"operator does not allow ({PROXY_SETTING} is off)",
                f"remove it, or ask the operator's administrator to set {PROXY_SETTING}=true",
            )
        proxy = self.string(value, path, limit=MAX_URL)
        parts = urlsplit(proxy)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise self.refuse(path, "is not an http:// or https:// address", "fix it")
        return proxy


def _one(reader: _Reader, value: object, path: str) -> Mapping[Any, Any]:
    if not isinstance(value, list):
        raise reader.refuse(path, f"is {_kind(value)}, not a list of one entry")
    if len(value) != 1:
        raise reader.refuse(
            path,
            f"holds {len(value)} entries; the operator reads one cluster, one user and one context",
            "store only the entry of this cluster (`kubectl config view --minify --flatten`)",
        )
    return reader.mapping(value[0], f"{path}[0]")


# --- kubeconfig -----------------------------------------------------------------------------


def read_kubeconfig(
    raw: bytes | str, *, what: str, policy: CredentialSettings | None = None
) -> Kubeconfig:
    """The kubeconfig ``raw`` as the operator uses it, or ``Refused``; ``what`` names it
    in the sentence (``the kubeconfig in key 'kubeconfig' of Secret team-a/prod``).
    The steps, in order: the top level, the one entry of each list, the names that tie
    them, the server, the TLS settings, the user's credentials, then the values."""
    policy = policy or CredentialSettings()
    reader = _Reader(what=what, words=_KUBE_WORDS, refused=_KUBE_REFUSED, step=_INLINE)
    top = _load(raw, what=what)
    _kube_top(reader, top)
    parts = _kube_parts(reader, top)
    _kube_names(reader, top, parts)
    server = _server(reader, parts.cluster.get("server"))
    insecure = _kube_insecure(reader, parts.cluster, policy)
    token = _kube_token(reader, parts.user)
    _kube_client_pair(reader, parts.user)
    return _kube_values(reader, parts, server=server, insecure=insecure, token=token, policy=policy)


@dataclass(frozen=True)
class _KubeParts:
    """The one cluster, user and context of a kubeconfig: each named entry and its body."""

    named_cluster: Mapping[Any, Any]
    named_user: Mapping[Any, Any]
    named_context: Mapping[Any, Any]
    cluster: Mapping[Any, Any]
    user: Mapping[Any, Any]
    context: Mapping[Any, Any]


def _kube_top(reader: _Reader, top: Mapping[str, Any]) -> None:
    """Only the top-level fields the operator reads, at the values it reads them with."""
    reader.only(
        top,
        "",
        ("apiVersion", "kind", "clusters", "users", "contexts", "current-context", "preferences"),
    )
    if top.get("apiVersion", "v1") != "v1":
        raise reader.refuse("apiVersion", "is not v1", "fix it")
    if top.get("kind", "Config") != "Config":
        raise reader.refuse("kind", "is not Config", "fix it")
    preferences = top.get("preferences")
    if preferences not in (None, {}):
        raise reader.refuse("preferences", "is not empty", "remove it")


def _kube_parts(reader: _Reader, top: Mapping[str, Any]) -> _KubeParts:
    """One entry in each list, each holding only the fields the operator reads."""
    named_cluster = _one(reader, top.get("clusters"), "clusters")
    named_user = _one(reader, top.get("users"), "users")
    named_context = _one(reader, top.get("contexts"), "contexts")
    reader.only(named_cluster, "clusters[0]", ("name", "cluster"))
    reader.only(named_user, "users[0]", ("name", "user"))
    reader.only(named_context, "contexts[0]", ("name", "context"))

    cluster = reader.mapping(named_cluster.get("cluster"), "clusters[0].cluster")
    # a user with no credential at all (``user: {}`` or none) is anonymous
    given_user = named_user.get("user")
    user = reader.mapping({} if given_user is None else given_user, "users[0].user")
    context = reader.mapping(named_context.get("context"), "contexts[0].context")
    reader.only(
        cluster,
        "clusters[0].cluster",
        (
            "server",
            "certificate-authority-data",
            "tls-server-name",
            "insecure-skip-tls-verify",
            "proxy-url",
        ),
    )
    reader.only(user, "users[0].user", ("token", "client-certificate-data", "client-key-data"))
    reader.only(context, "contexts[0].context", ("cluster", "user", "namespace"))
    return _KubeParts(named_cluster, named_user, named_context, cluster, user, context)


def _kube_names(reader: _Reader, top: Mapping[str, Any], parts: _KubeParts) -> None:
    """The context and current-context name the one cluster, user and context."""
    names = {
        "clusters[0].name": reader.string(parts.named_cluster.get("name"), "clusters[0].name"),
        "users[0].name": reader.string(parts.named_user.get("name"), "users[0].name"),
        "contexts[0].name": reader.string(parts.named_context.get("name"), "contexts[0].name"),
    }
    for path, ref, named in (
        ("contexts[0].context.cluster", parts.context.get("cluster"), "clusters[0].name"),
        ("contexts[0].context.user", parts.context.get("user"), "users[0].name"),
        ("current-context", top.get("current-context"), "contexts[0].name"),
    ):
        if reader.string(ref, path) != names[named]:
            raise reader.refuse(path, f"does not name {named}", "name the one entry there")
    if "namespace" in parts.context:
        reader.string(parts.context["namespace"], "contexts[0].context.namespace")


def _kube_insecure(reader: _Reader, cluster: Mapping[Any, Any], policy: CredentialSettings) -> bool:
    """``insecure-skip-tls-verify``: a boolean, only where the policy allows it, and
    never together with a CA."""
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise reader.refuse("clusters[0].cluster.insecure-skip-tls-verify", "is not a boolean")
    if insecure and not policy.allow_insecure_tls:
        raise reader.refuse(
            "clusters[0].cluster.insecure-skip-tls-verify",
            "turns off the check of the server's certificate, which this operator does not "
            f"allow ({INSECURE_SETTING} is off)",
            "store the cluster's CA in certificate-authority-data, or ask the operator's "
            f"administrator to set {INSECURE_SETTING}=true",
        )
    if insecure and cluster.get("certificate-authority-data") is not None:
        raise reader.refuse(
            "clusters[0].cluster.insecure-skip-tls-verify",
            "is set together with certificate-authority-data",
            "keep one of them",
        )
    return insecure


def _kube_token(reader: _Reader, user: Mapping[Any, Any]) -> str | None:
    """The user's bearer token, if any: printable ASCII without spaces, bounded."""
    token = user.get("token")
    if token is None:
        return None
    token = reader.string(token, "users[0].user.token", limit=MAX_TOKEN)
    if not all("\x21" <= c <= "\x7e" for c in token):
        raise reader.refuse("users[0].user.token", "holds a character a token may not", "fix it")
    return token


def _kube_client_pair(reader: _Reader, user: Mapping[Any, Any]) -> None:
    """A client certificate and its key come together or not at all."""
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    if (cert is None) != (key is None):
        missing = "client-key-data" if key is None else "client-certificate-data"
        raise reader.refuse(f"users[0].user.{missing}", "is missing", "store both or neither")


def _kube_values(
    reader: _Reader,
    parts: _KubeParts,
    *,
    server: str,
    insecure: bool,
    token: str | None,
    policy: CredentialSettings,
) -> Kubeconfig:
    """The values read in the order of ``Kubeconfig``'s fields: the PEM blocks, the TLS
    server name, the proxy (each only when given)."""
    cluster, user = parts.cluster, parts.user
    ca = cluster.get("certificate-authority-data")
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    proxy = cluster.get("proxy-url")
    return Kubeconfig(
        server=server,
        ca_pem=(
            reader.pem(ca, "clusters[0].cluster.certificate-authority-data", kind="CERTIFICATE")
            if ca is not None
            else None
        ),
        token=token,
        client_cert_pem=(
            reader.pem(cert, "users[0].user.client-certificate-data", kind="CERTIFICATE")
            if cert is not None
            else None
        ),
        client_key_pem=(
            reader.pem(key, "users[0].user.client-key-data", kind="PRIVATE KEY")
            if key is not None
            else None
        ),
        tls_server_name=(
            reader.string(cluster["tls-server-name"], "clusters[0].cluster.tls-server-name")
            if "tls-server-name" in cluster
            else None
        ),
        insecure=insecure,
        proxy_url=(
            reader.proxy(proxy, "clusters[0].cluster.proxy-url", policy)
            if proxy is not None
            else None
        ),
    )


def _server(reader: _Reader, value: object) -> str:
    path = "clusters[0].cluster.server"
    server = reader.string(value, path, limit=MAX_URL)
    try:
        parts = urlsplit(server)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise reader.refuse(path, "is not an address", "fix it") from None
    if parts.scheme != "https" or not parts.hostname:
        raise reader.refuse(path, "is not an https:// address", "fix it")
    if parts.username is not None or parts.password is not None:
        raise reader.refuse(path, "holds a user name or password", "remove them")
    if parts.query or parts.fragment:
        raise reader.refuse(path, "holds a query or a fragment", "remove it")
    return server


# --- talosconfig ------------------------------------------------------------------------------

#: An endpoint or node: a host name or address, with an optional port.
_ADDRESS = re.compile(
    r"^(https://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+|[0-9A-Fa-f:.]+)(:[0-9]{1,5})?$"
)
_CONTEXT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,62}$")


def read_talosconfig(
    raw: bytes | str, *, what: str, policy: CredentialSettings | None = None
) -> Talosconfig:
    """The talosconfig ``raw`` as talosctl in a Job reads it, or ``Refused``."""
    policy = policy or CredentialSettings()
    reader = _Reader(what=what, words=_TALOS_WORDS, refused=_TALOS_REFUSED, step=_TALOS_INLINE)
    top = _load(raw, what=what)
    reader.only(top, "", ("context", "contexts"))
    contexts = reader.mapping(top.get("contexts"), "contexts")
    if len(contexts) != 1:
        raise reader.refuse(
            "contexts",
            f"holds {len(contexts)} contexts; the operator reads one",
            "store only this cluster's context",
        )
    ((name, context),) = contexts.items()
    if not isinstance(name, str) or not _CONTEXT_NAME.match(name):
        raise reader.refuse(
            "contexts", "names its context with other than a short plain name", "rename it"
        )
    if reader.string(top.get("context"), "context") != name:
        raise reader.refuse("context", "does not name the one context", "name it there")
    path = f"contexts.{name}"
    # the context name is checked above: shown as it is
    reader = _Reader(
        what=what, words=_TALOS_WORDS | {name}, refused=_TALOS_REFUSED, step=_TALOS_INLINE
    )
    context = reader.mapping(context, path)
    reader.only(context, path, ("endpoints", "nodes", "ca", "crt", "key", "cluster", "proxy-url"))
    endpoints = _addresses(reader, context.get("endpoints"), f"{path}.endpoints", required=True)
    nodes = _addresses(reader, context.get("nodes", []), f"{path}.nodes", required=False)
    if "cluster" in context:
        reader.string(context["cluster"], f"{path}.cluster")
    for part in ("ca", "crt", "key"):
        if part not in context:
            raise reader.refuse(f"{path}.{part}", "is missing")
    proxy = context.get("proxy-url")
    return Talosconfig(
        context=name,
        endpoints=endpoints,
        nodes=nodes,
        ca_pem=reader.pem(context["ca"], f"{path}.ca", kind="CERTIFICATE"),
        crt_pem=reader.pem(context["crt"], f"{path}.crt", kind="CERTIFICATE"),
        key_pem=reader.pem(context["key"], f"{path}.key", kind="PRIVATE KEY"),
        proxy_url=reader.proxy(proxy, f"{path}.proxy-url", policy) if proxy is not None else None,
    )


def _addresses(reader: _Reader, value: object, path: str, *, required: bool) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise reader.refuse(path, f"is {_kind(value)}, not a list of addresses")
    if required and not value:
        raise reader.refuse(path, "is empty", "list the Talos API address of the cluster")
    if len(value) > MAX_ADDRESSES:
        raise reader.refuse(path, f"lists over {MAX_ADDRESSES:,} addresses", "list fewer")
    found = []
    for index, item in enumerate(value):
        where = f"{path}[{index}]"
        address = reader.string(item, where)
        if not _ADDRESS.match(address):
            raise reader.refuse(
                where, "is not a host name or address with an optional port", "fix it"
            )
        found.append(address)
    return tuple(found)
