"""Repository references the release check lists, and how each picks its scheme.

A reference is ``[scheme://]host[:port]/name``. HTTPS unless it says ``http://``, which is
accepted for a loopback host only; no guessing from the port, no fallback to HTTP. It
refuses a reference without a registry host, with a tag or digest, or with a name the
distribution spec does not allow, before any I/O.

More in docs/design/notes.md, "ichor/registry/references.py".
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from ichor.registry.errors import InvalidReference

# distribution/reference: path components of lower-case alphanumerics joined by separators.
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*")
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
)
MAX_NAME_LENGTH = 255


@dataclass(frozen=True)
class Repository:
    """One repository on one registry: where its tags are listed."""

    scheme: str
    host: str
    name: str

    @property
    def origin(self) -> str:
        """``scheme://host``: the base of every URL of this registry."""
        return f"{self.scheme}://{self.host}"

    @property
    def tags_url(self) -> str:
        return f"{self.origin}/v2/{self.name}/tags/list"

    @property
    def pull_scope(self) -> str:
        return f"repository:{self.name}:pull"

    def __str__(self) -> str:
        prefix = "http://" if self.scheme == "http" else ""
        return f"{prefix}{self.host}/{self.name}"


def is_loopback(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1, with or without a port."""
    bare = host
    if bare.startswith("["):
        bare = bare[1 : bare.find("]")] if "]" in bare else bare
    elif bare.count(":") == 1:
        bare = bare.split(":", 1)[0]
    if bare.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def is_internal(host: str) -> bool:
    """True for loopback hosts and private or link-local IP literals (no DNS lookup)."""
    if is_loopback(host):
        return True
    bare = host[1 : host.find("]")] if host.startswith("[") and "]" in host else host
    if bare.count(":") == 1:
        bare = bare.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return False
    return address.is_private or address.is_link_local


def parse(reference: str) -> Repository:
    """Parse ``[http(s)://]host[:port]/name``; raise InvalidReference naming the problem."""
    scheme, text = _scheme(reference, reference.strip())
    host, slash, name = text.partition("/")
    name = name.rstrip("/")
    if not slash or not name:
        raise InvalidReference(reference, f"the reference names no repository: {_EXPECTED}")
    if not _HOST.fullmatch(host) or not ("." in host or ":" in host or host.lower() == "localhost"):
        raise InvalidReference(
            reference, f"the reference does not start with a registry host ({host!r}): {_EXPECTED}"
        )
    _check_name(reference, name)
    if scheme == "http" and not is_loopback(host):
        raise InvalidReference(
            reference,
            "plain http:// is allowed only on a loopback host; "
            "a registry or mirror on the network is listed over https://",
        )
    return Repository(scheme=scheme, host=host.lower(), name=name)


_EXPECTED = "expected host/name such as ghcr.io/siderolabs/installer-base"


def _scheme(reference: str, text: str) -> tuple[str, str]:
    """The scheme ``text`` names (https unless it says http://) and the text after it;
    any other scheme is refused."""
    lowered = text.lower()
    if lowered.startswith("https://"):
        return "https", text[len("https://") :]
    if lowered.startswith("http://"):
        return "http", text[len("http://") :]
    if "://" in text:
        raise InvalidReference(
            reference, "the reference is not a repository (only https://, or http:// on loopback)"
        )
    return "https", text


def _check_name(reference: str, name: str) -> None:
    """A repository name alone: no tag or digest, within the length, each part of the
    distribution spec's form."""
    if "@" in name or ":" in name:
        raise InvalidReference(
            reference,
            f"the reference holds a tag or digest: name the repository only ({_EXPECTED})",
        )
    if len(name) > MAX_NAME_LENGTH or not all(
        _COMPONENT.fullmatch(part) for part in name.split("/")
    ):
        raise InvalidReference(
            reference,
            f"{name!r} is not a repository name (lower-case letters and digits, "
            "with . _ - between them, in /-separated parts)",
        )
