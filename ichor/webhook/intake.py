"""What the endpoint accepts before kopf sees a review: its claims and its limits, pure.

The HTTPS endpoint (``server``) hands a review to kopf only when this module says it may:
the path's claim covers the review's kind, operation and subresource (``CLAIMS``); the
body is within its memory budget, size, count of values and nesting (``cost_bound``,
``cost``, ``parse``); and an ``allowed`` answer carries the mark of the path's own handler
(``judging``, ``judged``). Every refusal is a denial with a sentence (``denial``). It
judges no object: the rules do, through ``judgement``.

More in docs/design/notes.md, "ichor/webhook/intake.py".
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ichor.api import kinds
from ichor.kube import untrusted
from ichor.webhook.decisions import Code

#: The paths of the endpoint, which are the kopf handler ids too (``wiring``).
#: The validating half of each kind: it answers.
CLUSTER_HANDLER = "taloscluster"
OPERATION_HANDLER = "talosoperation"
#: The mutating half (the MutatingWebhookConfiguration): it writes the admission records.
CLUSTER_STAMP = "taloscluster-records"
OPERATION_STAMP = "talosoperation-records"
#: The IchorInstallation's update (not its create, which the chart makes before the
#: webhook answers): the operator's marks, and the record of an unhalt request.
INSTALLATION_HANDLER = "ichorinstallation"
INSTALLATION_STAMP = "ichorinstallation-records"
#: The path judging the status subresource of each kind: only the operator writes status.
STATUS_HANDLERS: Mapping[kinds.Kind, str] = {
    kinds.Kind.TALOS_CLUSTER: "taloscluster-status",
    kinds.Kind.TALOS_OPERATION: "talosoperation-status",
    kinds.Kind.ICHOR_INSTALLATION: "ichorinstallation-status",
}

REVIEW_VERSION = "admission.k8s.io/v1"
PREFIX = "the ichor admission webhook"

#: An AdmissionReview holds the object and the old object (each up to etcd's 1.5 MiB).
MAX_REVIEW_BYTES = 8 * 1024 * 1024
#: JSON values in one review (estimated from its separators): a TalosCluster update with
#: its managed fields holds a few hundred.
MAX_VALUES = 50_000
#: Nesting of objects and lists: a TalosCluster's managed fields reach about ten.
MAX_DEPTH = 64
#: A Kubernetes UID is 36 characters; a longer request.uid is not echoed.
MAX_UID = 128
#: The longest denial message sent back (a quoted hostile value is cut).
MAX_MESSAGE = 2048
#: The most admission warnings sent back, and the longest one.
MAX_WARNINGS = 16
MAX_WARNING = 256
#: Memory one JSON value takes once parsed and handed to kopf, at most (measured: an
#: object with many distinct keys takes 150 bytes per value while parsing).
VALUE_COST = untrusted.VALUE_COST
#: Memory per body byte: the bytes read, the text json decodes them to (up to 4 bytes a
#: character when one character needs 4) and the strings parsed out of it (likewise).
ASCII_BYTE_COST = 3
BYTE_COST = 9


@dataclass(frozen=True)
class Claim:
    """What one path answers for: a kind of group ichor.dev, operations, subresources.

    ``subresources`` holds ``""`` for the object itself and ``"status"`` for its status.
    """

    path: str
    kind: kinds.Kind
    operations: frozenset[str]
    subresources: frozenset[str] = field(default=frozenset({""}))
    #: A path of the MutatingWebhookConfiguration: its answer may carry a JSONPatch
    #: (only the admission records, ``ichor.api.records``); every other answer never does.
    mutating: bool = False
    #: A CEL ``matchCondition``: the API server sends only the reviews it holds for.
    match: str | None = None

    @property
    def plural(self) -> kinds.Plural:
        return kinds.PLURALS[self.kind]

    @property
    def scope(self) -> str:
        """The configuration's ``scope``: the IchorInstallation is cluster-scoped."""
        return "Cluster" if self.kind is kinds.Kind.ICHOR_INSTALLATION else "Namespaced"

    def resources(self) -> list[str]:
        """The configuration's ``resources`` of this claim (``talosclusters/status``)."""
        return sorted(self.plural.value + (f"/{sub}" if sub else "") for sub in self.subresources)


def _reserved_in(field: str) -> str:
    return f'(has({field}) && {field}.exists(k, k.matches(r"^([-a-z0-9.]*\\.)?ichor\\.dev/")))'


#: The write's object or old object carries an ``ichor.dev`` label or annotation (the
#: domain ``ichor.api.marks`` reserves, subdomains included).
RESERVED_KEYS = " || ".join(
    _reserved_in(f"{o}.metadata.{f}")
    for o in ("object", "oldObject")
    for f in ("labels", "annotations")
)


def _policy_of(side: str) -> str:
    return f"(has({side}.spec) && has({side}.spec.policy))"


#: The write adds, changes or removes ``spec.policy`` (the site's policy, which the
#: webhook refuses when it cannot be read, or when an entry claims to allow something).
#: Only a change of it: the chart's own updates of the spec (its release check settings)
#: and its labels leave it as it is and never wait for the webhook.
POLICY_CHANGES = (
    f"{_policy_of('object')} != {_policy_of('oldObject')} || "
    f"({_policy_of('object')} && {_policy_of('oldObject')} && "
    f"object.spec.policy != oldObject.spec.policy)"
)

#: The installation's updates the webhook judges: one that carries an ``ichor.dev`` key
#: before or after (``RESERVED_KEYS``), or that writes the site's policy.
INSTALLATION_WRITES = f"{RESERVED_KEYS} || {POLICY_CHANGES}"

#: Every path of the endpoint and what it answers for. A review that matches none is
#: denied; ``configuration.render_configuration`` (and the chart) send exactly these.
CLAIMS: tuple[Claim, ...] = (
    Claim(
        path=CLUSTER_HANDLER,
        kind=kinds.Kind.TALOS_CLUSTER,
        operations=frozenset({"CREATE", "UPDATE"}),
    ),
    # UPDATE too: an operation's spec never changes (the CRD says so), but its admission
    # records and the user it was admitted for must not change either
    Claim(
        path=OPERATION_HANDLER,
        kind=kinds.Kind.TALOS_OPERATION,
        operations=frozenset({"CREATE", "UPDATE"}),
    ),
    # the mutating half: it writes the admission records the validating half checks
    Claim(
        path=CLUSTER_STAMP,
        kind=kinds.Kind.TALOS_CLUSTER,
        operations=frozenset({"CREATE", "UPDATE"}),
        mutating=True,
    ),
    Claim(
        path=OPERATION_STAMP,
        kind=kinds.Kind.TALOS_OPERATION,
        operations=frozenset({"CREATE", "UPDATE"}),
        mutating=True,
    ),
    # status is the operator's alone: a write of it by anyone else is refused
    *(
        Claim(
            path=path,
            kind=kind,
            operations=frozenset({"UPDATE"}),
            subresources=frozenset({"status"}),
        )
        for kind, path in STATUS_HANDLERS.items()
    ),
    # the installation's update, only one that carries an ichor.dev key before or after,
    # or that writes spec.policy (``match``): the operator's marks, the unhalt request's
    # record, the site's policy. Not its create, which the chart makes in the same release
    # as this configuration (before the webhook answers) and which holds no halt to lift;
    # not the chart's own updates of it (its labels and release check settings, never the
    # policy), so an upgrade from an Ichor without this path never meets it
    Claim(
        path=INSTALLATION_HANDLER,
        kind=kinds.Kind.ICHOR_INSTALLATION,
        operations=frozenset({"UPDATE"}),
        match=INSTALLATION_WRITES,
    ),
    Claim(
        path=INSTALLATION_STAMP,
        kind=kinds.Kind.ICHOR_INSTALLATION,
        operations=frozenset({"UPDATE"}),
        mutating=True,
        match=INSTALLATION_WRITES,
    ),
)


def claim_at(path: str, claims: tuple[Claim, ...] = CLAIMS) -> Claim | None:
    return next((claim for claim in claims if claim.path == path), None)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    note = f"... (cut: {len(text):,} characters in all)"
    return text[: max(limit - len(note), 0)] + note


def denial(uid: str, message: str, *, code: int = Code.BAD_REQUEST) -> dict[str, Any]:
    """An AdmissionReview response that refuses the write with ``message``."""
    return {
        "apiVersion": REVIEW_VERSION,
        "kind": "AdmissionReview",
        "response": {
            "uid": uid,
            "allowed": False,
            "status": {"code": int(code), "message": clip(message, MAX_MESSAGE)},
        },
    }


def unreadable(uid: str, problem: str) -> dict[str, Any]:
    return denial(uid, f"{PREFIX} cannot read this request: {problem}; nothing was changed")


_UID = re.compile(rb'"uid"\s*:\s*"([0-9A-Za-z-]{1,128})"')
#: How much of a body ``peek_uid`` reads: the API server writes request.uid first.
PEEK_BYTES = 4096


def peek_uid(head: bytes) -> str:
    """The first ``"uid"`` in the start of a body, for a denial of a body not read.

    The API server serialises ``request.uid`` as the first field of the request, so a
    denial of a body too large to read still names the review it answers.
    """
    found = _UID.search(head[:PEEK_BYTES])
    return found[1].decode("ascii") if found is not None else ""


#: An upper bound on the JSON values in a body (shared with what the controller reads
#: from workload clusters: ``ichor.kube.untrusted``).
values_in = untrusted.values_in


def cost(payload: bytes) -> int:
    """Bytes of memory reading, parsing and judging ``payload`` may take, at most."""
    per_byte = ASCII_BYTE_COST if payload.isascii() else BYTE_COST
    return len(payload) * per_byte + min(values_in(payload), MAX_VALUES + 1) * VALUE_COST


def cost_bound(length: int) -> int:
    """``cost`` of any body of ``length`` bytes, known before reading it."""
    return length * BYTE_COST + min(length + 1, MAX_VALUES + 1) * VALUE_COST


def parse(payload: bytes) -> tuple[object, str | None]:
    """The JSON of ``payload``, or what keeps it from being read as a review.

    Refused before parsing: a body over ``MAX_REVIEW_BYTES`` or with more than
    ``MAX_VALUES`` values. Refused while or after parsing: not JSON, not UTF-8, nested
    deeper than ``MAX_DEPTH`` (deep enough to exhaust Python's recursion is caught too).
    """
    if len(payload) > MAX_REVIEW_BYTES:
        return None, too_large_problem(len(payload))
    if values_in(payload) > MAX_VALUES:
        return None, (
            f"the body holds more than {MAX_VALUES:,} JSON values; no TalosCluster or "
            "TalosOperation review is that large"
        )
    return untrusted.loads(
        payload,
        max_bytes=MAX_REVIEW_BYTES,
        max_values=MAX_VALUES,
        max_depth=MAX_DEPTH,
        what="the body",
    )


def too_large_problem(length: int) -> str:
    return (
        f"the body has {length:,} bytes, more than the {MAX_REVIEW_BYTES:,} an "
        "AdmissionReview of a TalosCluster or TalosOperation can hold"
    )


def uid_of(data: object) -> str:
    """``request.uid`` when it is a string short enough to echo, else ``""``."""
    if isinstance(data, Mapping):
        request = data.get("request")
        if isinstance(request, Mapping):
            uid = request.get("uid")
            if isinstance(uid, str) and len(uid) <= MAX_UID:
                return uid
    return ""


def shape_problem(data: object) -> str | None:
    """What makes ``data`` not an AdmissionReview v1 request kopf can dispatch, if anything:
    the envelope, then each of ``REQUEST_CHECKS`` in order, the first problem found."""
    if not isinstance(data, Mapping):
        return "the body is not a JSON object"
    if data.get("apiVersion") != REVIEW_VERSION or data.get("kind") != "AdmissionReview":
        return f"expected apiVersion {REVIEW_VERSION} and kind AdmissionReview"
    request = data.get("request")
    if not isinstance(request, Mapping):
        return "request is missing or not an object"
    for check in REQUEST_CHECKS:
        problem = check(request)
        if problem is not None:
            return problem
    return None


def _names_strings(value: object, keys: tuple[str, ...]) -> bool:
    return isinstance(value, Mapping) and all(isinstance(value.get(key), str) for key in keys)


def _uid_problem(request: Mapping[str, Any]) -> str | None:
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        return "request.uid is missing"
    if len(uid) > MAX_UID:
        return f"request.uid has {len(uid):,} characters, more than the {MAX_UID} of a UID"
    return None


def _resource_problem(request: Mapping[str, Any]) -> str | None:
    if not _names_strings(request.get("resource"), ("group", "version", "resource")):
        return "request.resource must name group, version and resource"
    return None


def _kind_problem(request: Mapping[str, Any]) -> str | None:
    if not _names_strings(request.get("kind"), ("group", "version", "kind")):
        return "request.kind must name group, version and kind"
    return None


def _operation_problem(request: Mapping[str, Any]) -> str | None:
    if not isinstance(request.get("operation"), str):
        return "request.operation is missing"
    return None


def _user_problem(request: Mapping[str, Any]) -> str | None:
    if not isinstance(request.get("userInfo"), Mapping):
        return "request.userInfo is missing"
    return None


def _bodies_problem(request: Mapping[str, Any]) -> str | None:
    bodies = {key: request.get(key) for key in ("object", "oldObject")}
    if all(body is None for body in bodies.values()):
        return "request.object and request.oldObject are both missing"
    for key, body in bodies.items():
        problem = _body_problem(body, where=f"request.{key}")
        if problem is not None:
            return problem
    return None


def _subresource_problem(request: Mapping[str, Any]) -> str | None:
    sub = request.get("subResource")
    if sub is not None and not isinstance(sub, str):
        return "request.subResource must be a string"
    if sub == "":
        # The API server leaves it out for the object itself; kopf reads "" as a
        # subresource no handler names, finds none and would allow the review.
        return "request.subResource is empty (the API server leaves it out for the object itself)"
    return None


#: The checks of a review's ``request``, in the order ``shape_problem`` asks them.
REQUEST_CHECKS: tuple[Callable[[Mapping[str, Any]], str | None], ...] = (
    _uid_problem,
    _resource_problem,
    _kind_problem,
    _operation_problem,
    _user_problem,
    _bodies_problem,
    _subresource_problem,
)


def _body_problem(body: object, *, where: str) -> str | None:
    """What kopf reads of an object before any handler (its metadata's uid, name and
    namespace, to key its memory and name its logs) must be of the right type."""
    if body is None:
        return None
    if not isinstance(body, Mapping):
        return f"{where} must be an object"
    if "metadata" not in body:
        return None
    metadata = body["metadata"]
    # present but null: kopf's ``get("metadata", {})`` would read None
    if not isinstance(metadata, Mapping):
        return f"{where}.metadata must be an object"
    for key in ("uid", "name", "namespace"):
        if metadata.get(key) is not None and not isinstance(metadata.get(key), str):
            return f"{where}.metadata.{key} must be a string"
    return None


def _short(value: object) -> str:
    return clip(str(value), 80)


def claim_problem(data: Mapping[str, Any], claim: Claim) -> str | None:
    """Why ``claim`` does not cover the review ``data`` (already of a good shape), if so."""
    request: Mapping[str, Any] = data["request"]
    resource: Mapping[str, str] = request["resource"]
    gvk: Mapping[str, str] = request["kind"]
    judged = f"/{claim.path} judges {claim.plural.value}.{kinds.GROUP}/{kinds.VERSION}"
    named = f"{resource['resource']}.{resource['group']}/{resource['version']}"
    if (resource["group"], resource["version"], resource["resource"]) != (
        kinds.GROUP,
        kinds.VERSION,
        claim.plural.value,
    ):
        return f"{judged}, not {_short(named)}"
    if (gvk["group"], gvk["version"], gvk["kind"]) != (kinds.GROUP, kinds.VERSION, claim.kind):
        return f"{judged} of kind {claim.kind}, not kind {_short(gvk['kind'])}"
    for key in ("object", "oldObject"):
        body = request.get(key)
        if isinstance(body, Mapping) and (
            body.get("apiVersion") != kinds.API_VERSION or body.get("kind") != claim.kind
        ):
            return f"{judged}, but request.{key} is not a {kinds.API_VERSION} {claim.kind}"
    operation = request["operation"]
    if operation not in claim.operations:
        ops = " and ".join(sorted(claim.operations))
        return f"{judged} on {ops}, not {_short(operation)}"
    sub = request.get("subResource")
    sub = "" if sub is None else sub
    if sub not in claim.subresources:
        return f"{judged} without the {_short(sub)} subresource"
    return None


#: The ``metadata.uid`` kopf is handed for every object under review (``for_kopf``).
KOPF_UID = "ichor-admission-review"


def for_kopf(data: Mapping[str, Any]) -> dict[str, Any]:
    """The review as kopf gets it: the same, but the objects' ``metadata.uid`` is
    ``KOPF_UID``.

    kopf keeps a memory per uid of the object of every UPDATE review it dispatches, and
    forgets one only when its watch sees that object deleted, which never happens for a
    uid a forged review made up: twenty thousand forged UPDATEs kept twenty thousand
    memories. With one constant uid kopf keeps one. No handler reads the object's uid
    (they read spec, status, annotations, labels, name and namespace), and the review
    itself is not changed: copies are made down to the metadata.
    """
    request = dict(data["request"])
    for key in ("object", "oldObject"):
        body = request.get(key)
        if isinstance(body, Mapping) and isinstance(body.get("metadata"), Mapping):
            request[key] = {**body, "metadata": {**body["metadata"], "uid": KOPF_UID}}
    return {**data, "request": request}


def release(*reviews: object) -> None:
    """Empty every dict and list of ``reviews``, once the answer is made of copies.

    kopf's ``Body`` and its ``Meta`` view refer to each other, so the review kopf judged
    is freed only when a garbage collection finds that cycle, which in an operator of
    many objects is seldom: the memory the budget counts as given back stayed taken, and
    repeated storms of the largest reviews grew the process past its limit. Emptied, the
    containers kopf still refers to hold nothing. No handler keeps a review past its
    answer (the webhook starts no task).
    """
    stack: list[object] = list(reviews)
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            stack.extend(item.values())
            item.clear()
        elif isinstance(item, list):
            stack.extend(item)
            item.clear()


def admissible(data: object, *, path: str, claims: tuple[Claim, ...] = CLAIMS) -> str | None:
    """Why the review ``data`` at ``path`` is not handed to kopf, as a full sentence; None
    when a claim covers it."""
    problem = shape_problem(data)
    if problem is not None:
        return f"{PREFIX} cannot read this request: {problem}; nothing was changed"
    claim = claim_at(path, claims)
    if claim is None:
        paths = ", ".join(f"/{c.path}" for c in claims)
        return f"{PREFIX} has no handler at /{_short(path)} ({paths}); nothing was changed"
    assert isinstance(data, Mapping)
    problem = claim_problem(data, claim)
    if problem is not None:
        return (
            f"{PREFIX} refuses a review it does not judge: {problem}; nothing was changed "
            "(the ValidatingWebhookConfiguration must be the one the chart renders)"
        )
    return None


class _Marks:
    """Paths the handlers mark while the review answered inside ``collect`` is judged:
    the endpoint hands a review to kopf inside it, and kopf runs the handlers in the
    same context. Nothing is marked outside it."""

    def __init__(self, name: str) -> None:
        self._paths: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar(
            name, default=None
        )

    @contextlib.contextmanager
    def collect(self) -> Iterator[set[str]]:
        seen: set[str] = set()
        token = self._paths.set(seen)
        try:
            yield seen
        finally:
            self._paths.reset(token)

    def mark(self, path: str) -> None:
        seen = self._paths.get()
        if seen is not None:
            seen.add(path)


#: The paths whose handler judged the review being answered.
_JUDGED = _Marks("ichor_webhook_judged")
#: The paths whose denial ``override: true`` would pass for a holder of the verb.
_PASSABLE = _Marks("ichor_webhook_passable")


def judging() -> contextlib.AbstractContextManager[set[str]]:
    """The paths whose handler judged the review answered inside the block."""
    return _JUDGED.collect()


_DENIED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "ichor_webhook_denied", default=None
)


@contextlib.contextmanager
def denials() -> Iterator[list[str]]:
    """The reasons of the denials given inside the block (the endpoint counts them in its
    metrics, with the answer's HTTP code when no handler named one)."""
    given: list[str] = []
    token = _DENIED.set(given)
    try:
        yield given
    finally:
        _DENIED.reset(token)


def denied_for(reason: str) -> None:
    """Name the reason of the denial being given (nothing outside ``denials``)."""
    given = _DENIED.get()
    if given is not None and reason:
        given.append(reason)


def judged(path: str) -> None:
    """Mark that the handler of ``path`` judged the review being answered."""
    _JUDGED.mark(path)


def overridable() -> contextlib.AbstractContextManager[set[str]]:
    """The paths whose denial, answered inside the block, ``override: true`` would pass
    for a holder of the override verb."""
    return _PASSABLE.collect()


def override_passes(path: str) -> None:
    """Mark that ``override: true`` would pass the denial the handler of ``path`` gave."""
    _PASSABLE.mark(path)
