"""One judgement per TalosCluster or TalosOperation write, shared by the webhook's two halves.

The mutating half writes the annotations the judgement says the stored object must carry;
the validating half refuses an object that does not carry exactly those (``handlers``).
A judgement reads the review (``reviews``), asks the pure decision layers (``decisions``,
``stamps``) and makes its reads through the backend it is given (``kubeapi``). Each is an
ordered chain of small named steps. It never lets an exception out: a failure becomes a
denial with a sentence. More in docs/design/notes.md, "ichor/webhook/judgement.py".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypedDict, TypeVar, Unpack

from ichor.api import kinds, queue_limits, records, talosoperation
from ichor.api.autopatch import UNHALT_ANNOTATION, parse_unhalt
from ichor.api.ichorinstallation import Installation
from ichor.api.talosoperation import STARTED_BY_LABEL, OperationType
from ichor.kube import identity
from ichor.release import policy as site_policy
from ichor.release.policy import NO_POLICY, SitePolicy
from ichor.release.refusals import Verdict
from ichor.webhook import decisions, kubeapi, marks, reviews, stamps

_log = logging.getLogger(__name__)
_Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]
_Read = TypeVar("_Read")


def _annotations(body: object) -> Mapping[str, Any]:
    return records.annotations_of(body)


def _what(kind: kinds.Kind, body: object) -> str:
    try:
        namespace, name = reviews.object_name(body)
    except reviews.MalformedReview:
        return kind.value
    return f"{kind.value} {namespace}/{name}" if namespace else f"{kind.value} {name}"


def is_operator(who: reviews.Requester, own: identity.Identity) -> bool:
    """Whether the request was made with the operator's own credentials: its username,
    every group the operator authenticates with, and its uid when it has one (a
    ServiceAccount token's). A name like the operator's without them (an impersonation
    of that name, another authenticator mapping to it) is not the operator."""
    return (
        who.username == own.username
        and (not own.uid or who.uid == own.uid)
        and set(own.groups) <= set(who.groups)
    )


async def _is_operator(backend: kubeapi.Backend, who: reviews.Requester) -> bool:
    return is_operator(who, await backend.own_identity())


def _marked(
    kind: kinds.Kind,
    *,
    new: object,
    old: object,
    operation: object,
    who: reviews.Requester,
    operator: bool,
) -> Judged | None:
    """The refusal of a write that touches the operator's marks (``marks``), if any."""
    said = marks.refusal(
        kind, new=new, old=old, operation=str(operation), requester=who, operator=operator
    )
    if said is None:
        return None
    return Judged(
        decisions.Answer(
            allowed=False, message=said, code=decisions.Code.FORBIDDEN, reason="OperatorMark"
        )
    )


@dataclass(frozen=True)
class Judged:
    """One judgement of a write, shared by the two halves: the answer, and when it
    allows the write, the annotations the stored object must carry."""

    answer: decisions.Answer
    stamp: stamps.Stamp | None = None


@dataclass(frozen=True)
class _ClusterWrite:
    """A TalosCluster review as read: who writes, the object, and the one it replaces
    (None on a create)."""

    who: reviews.Requester
    cluster: reviews.ClusterObject
    before: reviews.ClusterObject | None


@dataclass(frozen=True)
class _ClusterDecision:
    """What the reads of a cluster write decided: the answer, whether the operator wrote
    it, and the site's policy it was judged under."""

    answer: decisions.Answer
    operator: bool
    site: SitePolicy


def _unvalidated(operation: object, validated: tuple[str, ...]) -> Judged | None:
    """The refusal of a review whose operation is not validated here, or None."""
    if operation in validated:
        return None
    return Judged(decisions.malformed(f"operation {operation!r} is not validated here"))


def _without_old(operation: object, old: object) -> Judged | None:
    """The refusal of an UPDATE review that carries no ``oldObject``, or None."""
    if operation == "UPDATE" and old is None:
        return Judged(decisions.malformed("an UPDATE review carries no oldObject"))
    return None


def _failed(
    error: Exception,
    *,
    what: str,
    logger: _Logger,
) -> decisions.Answer:
    """The denial of a judgement that failed: the API did not answer, or a bug (logged
    with its trace, so that kopf never answers with the exception's text)."""
    if isinstance(error, kubeapi.ApiUnavailable):
        return decisions.undecided(str(error))
    logger.exception("%s admission failed", what)
    return decisions.undecided(f"internal error {type(error).__name__}")


async def judge_cluster(
    *,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    backend: kubeapi.Backend,
    logger: _Logger = _log,
) -> Judged:
    """The judgement of a TalosCluster create or update; never raises. Its steps, in
    order: read the review, decide through the backend's reads, then add the warnings,
    the Cilium trace and the stamp of an allowed write."""
    write = _read_cluster_write(new=new, old=old, userinfo=userinfo, operation=operation)
    if isinstance(write, Judged):
        return write
    try:
        decided = await _decide_cluster(
            write, new=new, old=old, operation=operation, backend=backend
        )
    except Exception as error:
        return Judged(_failed(error, what="TalosCluster", logger=logger))
    if isinstance(decided, Judged):
        return decided
    if not decided.answer.allowed:
        return Judged(decided.answer)
    answer = _with_cluster_warnings(decided.answer, write, site=decided.site)
    answer = _with_write_trace(answer, write, operator=decided.operator, operation=operation)
    stamp = stamps.cluster_stamp(
        old=_annotations(old) if operation == "UPDATE" else None,
        given=_annotations(new),
        operator=decided.operator,
        admitted=answer.admitted,
        traced=answer.traced,
    )
    return Judged(answer, stamp)


def _read_cluster_write(
    *, new: object, old: object, userinfo: object, operation: object
) -> _ClusterWrite | Judged:
    """The TalosCluster review as read, or the refusal of one that cannot be read."""

    def read(who: reviews.Requester) -> _ClusterWrite:
        cluster = reviews.cluster_versions(new, where="object")
        before = reviews.cluster_versions(old, where="oldObject") if operation == "UPDATE" else None
        return _ClusterWrite(who, cluster, before)

    return _read_review(read, old=old, userinfo=userinfo, operation=operation)


def _read_review(
    read: Callable[[reviews.Requester], _Read],
    *,
    old: object,
    userinfo: object,
    operation: object,
    validated: tuple[str, ...] = ("CREATE", "UPDATE"),
) -> _Read | Judged:
    """A review read in order: an operation validated here, the requester, the object
    (``read``), then the old object an UPDATE carries; or the refusal of the first that
    cannot be read."""
    try:
        refused = _unvalidated(operation, validated)
        if refused is not None:
            return refused
        written = read(reviews.requester(userinfo))
        refused = _without_old(operation, old)
        return written if refused is None else refused
    except reviews.MalformedReview as error:
        return Judged(decisions.malformed(str(error)))


async def _decide_cluster(
    write: _ClusterWrite,
    *,
    new: object,
    old: object,
    operation: object,
    backend: kubeapi.Backend,
) -> _ClusterDecision | Judged:
    """The answer to a readable TalosCluster write, in order: its health checks, the
    operator's marks, the Secrets it names anew, then the rules under the site's policy
    with the override an operation carries or the verb the writer holds."""
    costly = await _health_check_refusal(write)
    if costly is not None:
        return Judged(costly)
    operator = await _is_operator(backend, write.who)
    marked = _marked(
        kinds.Kind.TALOS_CLUSTER, new=new, old=old, operation=operation, who=write.who,
        operator=operator,
    )  # fmt: skip
    if marked is not None:
        return marked
    unreadable = await _unreadable_secret(backend, write.who, new=write.cluster, old=write.before)
    if unreadable is not None:
        return Judged(unreadable)
    site = await _cluster_site_policy(backend, write)
    verdict = decisions.review_cluster(new=write.cluster, old=write.before, policy=site)
    carried = await _carried(backend, write, verdict, operator=operator)
    holds = await _cluster_holds(backend, write, verdict, carried=carried)
    answer = decisions.answer_cluster(
        verdict,
        requester=write.who,
        cluster=write.cluster.ref,
        holds_verb=holds,
        operation=str(operation),
        carried=carried,
        adoption=_annotations(new).get(records.ADOPTION) == "true",
        declarative=write.cluster.declarative,
    )
    return _ClusterDecision(answer, operator, site)


async def _health_check_refusal(write: _ClusterWrite) -> decisions.Answer | None:
    """The refusal of the cluster's health checks, or None; a cluster without any costs
    nothing (parsing the expressions takes milliseconds each: off the event loop)."""
    if not write.cluster.health_checks:
        return None
    return await asyncio.to_thread(decisions.health_check_refusal, write.cluster, write.before)


async def _cluster_site_policy(backend: kubeapi.Backend, write: _ClusterWrite) -> SitePolicy:
    """The site's policy when the write creates the cluster (to warn) or moves a version
    (to judge it); no policy, and no read, for any other update."""
    before = write.before
    if (
        before is None
        or write.cluster.talos != before.talos
        or write.cluster.kubernetes != before.kubernetes
    ):
        return await _site_policy(backend)
    return NO_POLICY


async def _carried(
    backend: kubeapi.Backend,
    write: _ClusterWrite,
    verdict: Verdict,
    *,
    operator: bool,
) -> reviews.StoredOperation | None:
    """The stored operation whose override the operator's own update carries, looked up
    only for an update by the operator that nothing blocks and only an override passes."""
    if write.before is None or verdict.blocking is not None or not verdict.overridable:
        return None
    if not operator:
        return None
    return await _carried_operation(backend, new=write.cluster, old=write.before)


async def _cluster_holds(
    backend: kubeapi.Backend,
    write: _ClusterWrite,
    verdict: Verdict,
    *,
    carried: reviews.StoredOperation | None,
) -> bool | None:
    """Whether the writer holds the override verb, asked only when no operation carries
    the override and the verdict needs it (None: not asked)."""
    if carried is not None:
        return None
    if not decisions.needs_access_review(verdict, override_requested=bool(verdict.overridable)):
        return None
    return await backend.holds_override(write.who, write.cluster.ref)


def _with_cluster_warnings(
    answer: decisions.Answer, write: _ClusterWrite, *, site: SitePolicy
) -> decisions.Answer:
    """The allowed answer with the cluster's warnings, and on a create the site's."""
    noted = decisions.cluster_warnings(write.cluster)
    if write.before is None:
        noted += decisions.site_warnings(write.cluster, policy=site)
    if not noted:
        return answer
    return replace(answer, warnings=(*answer.warnings, *noted))


def _with_write_trace(
    answer: decisions.Answer, write: _ClusterWrite, *, operator: bool, operation: object
) -> decisions.Answer:
    """The allowed answer with the Cilium trace of a person's write, if any. The
    operator's own spec write follows an operation, whose create was traced."""
    if operator:
        return answer
    traced = decisions.cilium_trace_of_write(
        new=write.cluster, old=write.before, requester=write.who, operation=str(operation)
    )
    return answer if traced is None else replace(answer, traced=traced)


async def _unreadable_secret(
    backend: kubeapi.Backend,
    who: reviews.Requester,
    *,
    new: reviews.ClusterObject,
    old: reviews.ClusterObject | None,
) -> decisions.Answer | None:
    """The refusal of a write that names anew a Secret its writer may not ``get`` (a
    SubjectAccessReview each, as the override verb is asked), or None."""
    namespace = new.ref.namespace
    for ref in decisions.secret_refs_to_review(new=new, old=old):
        if not await backend.may_read_secret(who, reviews.NamespacedName(namespace, ref.name)):
            return decisions.unreadable_secret(ref, cluster=new.ref, requester=who)
    return None


def _spec_policy(body: object) -> object:
    """``spec.policy`` of a raw object (None: none)."""
    if isinstance(body, Mapping):
        spec = body.get("spec")
        if isinstance(spec, Mapping):
            return spec.get("policy")
    return None


async def _site_policy(backend: kubeapi.Backend) -> SitePolicy:
    """The site's policy, read afresh for each review it judges (a change of it is in
    force for the next write), the way the controller reads it."""
    return Installation.from_body(await backend.read_installation()).policy


async def _carried_operation(
    backend: kubeapi.Backend, *, new: reviews.ClusterObject, old: reviews.ClusterObject
) -> reviews.StoredOperation | None:
    """The stored operation whose override the operator's spec write carries, if any."""
    stored = [
        reviews.stored_operation(body) for body in await backend.list_operations(new.ref.namespace)
    ]
    return decisions.carried_override(
        new=new, old=old, operations=[op for op in stored if op is not None]
    )


@dataclass(frozen=True)
class _OperationWrite:
    """A TalosOperation review as read: who writes and the operation's spec."""

    who: reviews.Requester
    spec: reviews.OperationSpec


async def judge_operation(
    *,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    backend: kubeapi.Backend,
    logger: _Logger = _log,
    max_queued: int | None = None,
) -> Judged:
    """The judgement of a TalosOperation create (the plan) or update (its stamp only: the
    CRD keeps its spec as created); never raises. ``max_queued``: a create is refused
    while the cluster has that many operations not finished (None: not counted, as in
    the mutating half, which the validating half follows)."""
    write = _read_operation_write(new=new, old=old, userinfo=userinfo, operation=operation)
    if isinstance(write, Judged):
        return write
    try:
        operator = await _is_operator(backend, write.who)
        marked = _marked(
            kinds.Kind.TALOS_OPERATION, new=new, old=old, operation=operation, who=write.who,
            operator=operator,
        )  # fmt: skip
        if marked is not None:
            return marked
        if operation == "UPDATE":
            answer = decisions.Answer(allowed=True, cluster=write.spec.cluster_ref)
        else:
            planned = await _plan_answer(write, new=new, backend=backend, max_queued=max_queued)
            if isinstance(planned, Judged):
                return planned
            answer = planned
    except Exception as error:
        return Judged(_failed(error, what="TalosOperation", logger=logger))
    if not answer.allowed:
        return Judged(answer)
    stamp = stamps.operation_stamp(
        old=_annotations(old) if operation == "UPDATE" else None,
        given=_annotations(new),
        operator=operator,
        admitted=answer.admitted,
        override_by=write.who.username if write.spec.override else None,
        traced=answer.traced,
    )
    return Judged(answer, stamp)


def _read_operation_write(
    *, new: object, old: object, userinfo: object, operation: object
) -> _OperationWrite | Judged:
    """The TalosOperation review as read, or the refusal of one that cannot be read."""

    def read(who: reviews.Requester) -> _OperationWrite:
        return _OperationWrite(who, reviews.operation_spec(new, where="object"))

    return _read_review(read, old=old, userinfo=userinfo, operation=operation)


async def _plan_answer(
    write: _OperationWrite,
    *,
    new: object,
    backend: kubeapi.Backend,
    max_queued: int | None,
) -> decisions.Answer | Judged:
    """The answer to an operation's create, in order: the cluster it names, the rules
    under the site's policy with the verb the writer holds, then on an allowed plan the
    image warnings, the queue's cap and the Cilium trace."""
    spec = write.spec
    body = await backend.read_cluster(spec.cluster_ref)
    if body is None:
        return Judged(decisions.missing_cluster(spec))
    try:
        cluster = reviews.cluster_versions(body, where=f"TalosCluster {spec.cluster_ref}")
    except reviews.MalformedReview as error:
        return Judged(decisions.undecided(str(error)))
    verdict = decisions.review_operation(
        spec=spec, cluster=cluster, policy=await _site_policy(backend)
    )
    holds = None
    if decisions.needs_access_review(verdict, override_requested=spec.override):
        holds = await backend.holds_override(write.who, spec.cluster_ref)
    answer = decisions.answer_operation(verdict, spec=spec, requester=write.who, holds_verb=holds)
    answer = _with_image_warnings(answer, spec, cluster=body)
    if answer.allowed and max_queued is not None:
        answer = await _within_queue(backend, spec, answer, most=max_queued)
    traced = decisions.cilium_trace_of_operation(
        spec=spec, cluster=cluster, requester=write.who, started_by=_started_by(new)
    )
    return answer if traced is None or not answer.allowed else replace(answer, traced=traced)


def _with_image_warnings(
    answer: decisions.Answer, spec: reviews.OperationSpec, *, cluster: Mapping[str, Any]
) -> decisions.Answer:
    """The answer with what the node images plan warns, on an allowed Talos upgrade."""
    if not answer.allowed or spec.type is not OperationType.TALOS or not spec.version:
        return answer
    shown = decisions.image_plan_warnings(cluster, version=spec.version)
    return replace(answer, warnings=answer.warnings + shown)


async def _within_queue(
    backend: kubeapi.Backend,
    spec: reviews.OperationSpec,
    answer: decisions.Answer,
    *,
    most: int,
) -> decisions.Answer:
    """``answer``, or the refusal of a create past the most one cluster queues: every
    operation of the cluster not finished counts, whoever created it."""
    stored = await backend.list_operations(spec.namespace)
    queued = sum(1 for body in stored if talosoperation.queued_on(body, spec.cluster))
    return answer if queued < most else decisions.queue_full(spec, most=most)


async def judge_installation(
    *,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    backend: kubeapi.Backend,
    logger: _Logger = _log,
) -> Judged:
    """The judgement of an IchorInstallation update: the operator's marks, a write of the
    site's policy (``spec.policy``, refused when it cannot be read: it can only refuse,
    and an entry that claims to allow what the table refuses is refused), and a request
    to lift auto-patch halts (``ichor.dev/unhalt``), whose requester the admission record
    names for the operator's Event; never raises. Its spec is the installer's (RBAC)."""

    def read(who: reviews.Requester) -> reviews.Requester:
        reviews.object_name(new)
        return who

    who = _read_review(read, old=old, userinfo=userinfo, operation=operation, validated=("UPDATE",))
    if isinstance(who, Judged):
        return who
    try:
        operator = await _is_operator(backend, who)
    except Exception as error:
        return Judged(_failed(error, what="IchorInstallation", logger=logger))
    kind = kinds.Kind.ICHOR_INSTALLATION
    marked = _marked(kind, new=new, old=old, operation=operation, who=who, operator=operator)
    if marked is not None:
        return marked
    written = _spec_policy(new)
    if written != _spec_policy(old):
        found = site_policy.problems(written)
        if found:
            return Judged(decisions.policy_refused(_what(kind, new), found))
    asked = _annotations(new).get(UNHALT_ANNOTATION)
    admitted = None
    if asked is not None and asked != _annotations(old).get(UNHALT_ANNOTATION):
        try:
            request = parse_unhalt(asked)
        except ValueError as error:
            return Judged(
                decisions.Answer(
                    allowed=False,
                    message=f"{_what(kind, new)} is refused: {error}; ichor autopatch unhalt "
                    "COMPONENT VERSION (or --all) writes it",
                    code=decisions.Code.FORBIDDEN,
                    reason="UnhaltRequest",
                )
            )
        admitted = records.Record(
            kind=records.RecordKind.UNHALT, user=who.username, detail=str(request)
        )
    stamp = stamps.cluster_stamp(
        old=_annotations(old), given=_annotations(new), operator=operator, admitted=admitted
    )
    return Judged(decisions.Answer(allowed=True, admitted=admitted), stamp)


def _started_by(body: object) -> str | None:
    """The operator's own mark of an operation it started (auto-patch, declarative), for
    the record's words only: the webhook refuses it from anyone else (``marks``)."""
    labels = records.labels_of(body)
    found = labels.get(STARTED_BY_LABEL)
    return found if isinstance(found, str) and found else None


def _checked(
    judged: Judged,
    *,
    kind: kinds.Kind,
    new: object,
    dryrun: bool,
    logger: _Logger,
) -> decisions.Answer:
    """The validating half: the judgement's answer, refused when the object does not carry
    the stamp exactly (or would carry more records than may wait)."""
    answer, stamp = judged.answer, judged.stamp
    if not answer.allowed or stamp is None:
        return answer
    what = _what(kind, new)
    problem = stamps.too_many(stamp, what=what) or stamps.problem(
        stamp, _annotations(new), what=what
    )
    if problem is not None:
        return decisions.Answer(
            allowed=False, message=problem, code=decisions.Code.FORBIDDEN, reason="Stamp"
        )
    for admitted in (answer.admitted, answer.traced):
        if admitted is not None:
            logger.warning("%s", _admitted_log(admitted, what=what, dryrun=dryrun))
    return answer


def _admitted_log(admitted: records.Record, *, what: str, dryrun: bool) -> str:
    """What the webhook logs when it admits a write that passes a refusal.

    Never "User X overrode ...": a review proves nothing by itself (its caller may not be
    the API server, and an admitted write may never be stored), so the log says what was
    admitted, and the Event saying who overrode what is posted by the operator only once
    it sees the object stored (``ichor.controller.recorder``)."""
    passed = "; ".join(f"{p.rule}: {p.message}" for p in admitted.passed) or "none at creation"
    carrying = _CARRYING[admitted.kind]
    stored = (
        "dry run: nothing is stored, and an Event follows only once the object is stored"
        if dryrun
        else "its Event follows only once the object is stored; the review alone proves "
        "no write happened"
    )
    return (
        f"admitted a review of {what} for user {admitted.user} carrying {carrying} "
        f"({admitted.detail}); {stored}; refusals passed: {passed}"
    )


_CARRYING = {
    records.RecordKind.OVERRIDE: "an override (the verb `override`)",
    records.RecordKind.ADOPTION: "an adoption (no override needed)",
    records.RecordKind.CARRIED: "the override an operation was admitted with",
    records.RecordKind.UNHALT: "a request to lift auto-patch halts",
    records.RecordKind.CILIUM_RULE_SKIPPED: "a Kubernetes step past a Cilium the rule skips",
}


class Review(TypedDict):
    """The review a judgement reads, as the kopf handlers pass it."""

    new: object
    old: object
    userinfo: object
    operation: object
    backend: kubeapi.Backend


async def operation_answer(
    *,
    new: object,
    userinfo: object,
    operation: object,
    dryrun: bool,
    backend: kubeapi.Backend,
    old: object = None,
    logger: _Logger = _log,
    max_queued: int = queue_limits.MAX_QUEUED,
) -> decisions.Answer:
    """The validating answer to a TalosOperation create (the plan) or update; never raises."""
    judged = await judge_operation(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        backend=backend,
        logger=logger,
        max_queued=max_queued,
    )
    return _checked(judged, kind=kinds.Kind.TALOS_OPERATION, new=new, dryrun=dryrun, logger=logger)


class _Judge(Protocol):
    def __call__(self, *, logger: _Logger = ..., **review: Unpack[Review]) -> Awaitable[Judged]: ...


class _Answering(Protocol):
    def __call__(
        self, *, dryrun: bool, logger: _Logger = ..., **review: Unpack[Review]
    ) -> Coroutine[Any, Any, decisions.Answer]: ...


def _validating(judge: _Judge, kind: kinds.Kind) -> _Answering:
    """The validating answer of ``judge``: its judgement, checked against the stamp the
    object carries (``_checked``); never raises."""

    async def answer(
        *, dryrun: bool, logger: _Logger = _log, **review: Unpack[Review]
    ) -> decisions.Answer:
        judged = await judge(logger=logger, **review)
        return _checked(judged, kind=kind, new=review["new"], dryrun=dryrun, logger=logger)

    return answer


#: The validating answer to a TalosCluster create or update; never raises.
cluster_answer = _validating(judge_cluster, kinds.Kind.TALOS_CLUSTER)
#: The validating answer to an IchorInstallation update; never raises.
installation_answer = _validating(judge_installation, kinds.Kind.ICHOR_INSTALLATION)


async def status_answer(
    *,
    kind: kinds.Kind,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    backend: kubeapi.Backend,
) -> decisions.Answer:
    """The answer to a write of a status subresource; never raises."""
    try:
        if operation != "UPDATE":
            return decisions.malformed(
                f"operation {operation!r} on the status of a {kind} is not validated here"
            )
        who = reviews.requester(userinfo)
        namespace, name = reviews.object_name(new if new is not None else old)
    except reviews.MalformedReview as error:
        return decisions.malformed(str(error))
    try:
        own = await backend.own_identity()
    except Exception as error:
        return _failed(error, what="status", logger=_log)
    return decisions.answer_status(
        kind=kind.value, namespace=namespace, name=name, requester=who, operator=own.username,
        matches=is_operator(who, own),
    )  # fmt: skip
