"""One judgement per TalosCluster or TalosOperation write, shared by the webhook's two halves.

The mutating half writes the annotations the judgement says the stored object must carry
(the admission records, and an operation's ``override-by`` stamp, ``ichor.api.records``);
the validating half answers and refuses an object that does not carry exactly those
(``handlers``). A judgement reads the review (``reviews``), asks the pure decision layers
(``decisions``, ``stamps``) and makes the reads the answer depends on through the backend
it is given (``kubeapi``: who the operator is, the cluster an operation names, the
operations of a cluster, the SubjectAccessReviews: the override verb, and ``get`` on each
Secret a TalosCluster write names anew). Nothing here decides a rule, nothing
here writes, and nothing here knows kopf: the operator posts the Events of what was
admitted once it sees the object stored (``ichor.controller.recorder``).

A judgement never lets an exception out: a review it cannot read, an API call that fails
or a bug all become a denial with a sentence, because kopf would otherwise answer with
the exception's text and code 500.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ichor.api import kinds, queue_limits, records, talosoperation
from ichor.api.autopatch import UNHALT_ANNOTATION, parse_unhalt
from ichor.api.ichorinstallation import Installation
from ichor.api.talosoperation import STARTED_BY_LABEL, OperationType
from ichor.kube import identity
from ichor.release import policy as site_policy
from ichor.release.policy import NO_POLICY, SitePolicy
from ichor.webhook import decisions, kubeapi, marks, reviews, stamps

_log = logging.getLogger(__name__)


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


async def judge_cluster(
    *,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    backend: kubeapi.Backend,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
) -> Judged:
    """The judgement of a TalosCluster create or update; never raises."""
    try:
        if operation not in ("CREATE", "UPDATE"):
            return Judged(decisions.malformed(f"operation {operation!r} is not validated here"))
        who = reviews.requester(userinfo)
        cluster = reviews.cluster_versions(new, where="object")
        before = reviews.cluster_versions(old, where="oldObject") if operation == "UPDATE" else None
        if operation == "UPDATE" and old is None:
            return Judged(decisions.malformed("an UPDATE review carries no oldObject"))
    except reviews.MalformedReview as error:
        return Judged(decisions.malformed(str(error)))
    try:
        # parsing the expressions takes milliseconds each: off the event loop
        costly = (
            await asyncio.to_thread(decisions.health_check_refusal, cluster, before)
            if cluster.health_checks
            else None
        )
        if costly is not None:
            return Judged(costly)
        operator = await _is_operator(backend, who)
        marked = _marked(
            kinds.Kind.TALOS_CLUSTER, new=new, old=old, operation=operation, who=who,
            operator=operator,
        )  # fmt: skip
        if marked is not None:
            return marked
        unreadable = await _unreadable_secret(backend, who, new=cluster, old=before)
        if unreadable is not None:
            return Judged(unreadable)
        site = NO_POLICY
        if (
            before is None
            or cluster.talos != before.talos
            or cluster.kubernetes != before.kubernetes
        ):
            site = await _site_policy(backend)  # it judges a moved version, warns a create
        verdict = decisions.review_cluster(new=cluster, old=before, policy=site)
        carried = None
        if before is not None and verdict.blocking is None and verdict.overridable and operator:
            carried = await _carried_operation(backend, new=cluster, old=before)
        holds = None
        if carried is None and decisions.needs_access_review(
            verdict, override_requested=bool(verdict.overridable)
        ):
            holds = await backend.holds_override(who, cluster.ref)
        answer = decisions.answer_cluster(
            verdict,
            requester=who,
            cluster=cluster.ref,
            holds_verb=holds,
            operation=str(operation),
            carried=carried,
            adoption=_annotations(new).get(records.ADOPTION) == "true",
            declarative=cluster.declarative,
        )
    except kubeapi.ApiUnavailable as error:
        return Judged(decisions.undecided(str(error)))
    except Exception as error:
        logger.exception("TalosCluster admission failed")
        return Judged(decisions.undecided(f"internal error {type(error).__name__}"))
    if not answer.allowed:
        return Judged(answer)
    noted = decisions.cluster_warnings(cluster)
    if before is None:
        noted += decisions.site_warnings(cluster, policy=site)
    if noted:
        answer = replace(answer, warnings=(*answer.warnings, *noted))
    # The operator's own spec write follows an operation, whose create was traced.
    traced = (
        None
        if operator
        else decisions.cilium_trace_of_write(
            new=cluster, old=before, requester=who, operation=str(operation)
        )
    )
    if traced is not None:
        answer = replace(answer, traced=traced)
    stamp = stamps.cluster_stamp(
        old=_annotations(old) if operation == "UPDATE" else None,
        given=_annotations(new),
        operator=operator,
        admitted=answer.admitted,
        traced=answer.traced,
    )
    return Judged(answer, stamp)


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


async def judge_operation(
    *,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    backend: kubeapi.Backend,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    max_queued: int | None = None,
) -> Judged:
    """The judgement of a TalosOperation create (the plan) or update (its stamp only: the
    CRD keeps its spec as created); never raises. ``max_queued``: a create is refused
    while the cluster has that many operations not finished (None: not counted, as in
    the mutating half, which the validating half follows)."""
    try:
        if operation not in ("CREATE", "UPDATE"):
            return Judged(decisions.malformed(f"operation {operation!r} is not validated here"))
        who = reviews.requester(userinfo)
        spec = reviews.operation_spec(new, where="object")
        if operation == "UPDATE" and old is None:
            return Judged(decisions.malformed("an UPDATE review carries no oldObject"))
    except reviews.MalformedReview as error:
        return Judged(decisions.malformed(str(error)))
    try:
        operator = await _is_operator(backend, who)
        marked = _marked(
            kinds.Kind.TALOS_OPERATION, new=new, old=old, operation=operation, who=who,
            operator=operator,
        )  # fmt: skip
        if marked is not None:
            return marked
        if operation == "UPDATE":
            answer = decisions.Answer(allowed=True, cluster=spec.cluster_ref)
        else:
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
                holds = await backend.holds_override(who, spec.cluster_ref)
            answer = decisions.answer_operation(verdict, spec=spec, requester=who, holds_verb=holds)
            if answer.allowed and spec.type is OperationType.TALOS and spec.version:
                shown = decisions.image_plan_warnings(body, version=spec.version)
                answer = replace(answer, warnings=answer.warnings + shown)
            if answer.allowed and max_queued is not None:
                answer = await _within_queue(backend, spec, answer, most=max_queued)
            traced = decisions.cilium_trace_of_operation(
                spec=spec, cluster=cluster, requester=who, started_by=_started_by(new)
            )
            if answer.allowed and traced is not None:
                answer = replace(answer, traced=traced)
    except kubeapi.ApiUnavailable as error:
        return Judged(decisions.undecided(str(error)))
    except Exception as error:
        logger.exception("TalosOperation admission failed")
        return Judged(decisions.undecided(f"internal error {type(error).__name__}"))
    if not answer.allowed:
        return Judged(answer)
    stamp = stamps.operation_stamp(
        old=_annotations(old) if operation == "UPDATE" else None,
        given=_annotations(new),
        operator=operator,
        admitted=answer.admitted,
        override_by=who.username if spec.override else None,
        traced=answer.traced,
    )
    return Judged(answer, stamp)


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
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
) -> Judged:
    """The judgement of an IchorInstallation update: the operator's marks, a write of the
    site's policy (``spec.policy``, refused when it cannot be read: it can only refuse,
    and an entry that claims to allow what the table refuses is refused), and a request
    to lift auto-patch halts (``ichor.dev/unhalt``), whose requester the admission record
    names for the operator's Event; never raises. Its spec is the installer's (RBAC)."""
    try:
        if operation != "UPDATE":
            return Judged(decisions.malformed(f"operation {operation!r} is not validated here"))
        who = reviews.requester(userinfo)
        reviews.object_name(new)
        if old is None:
            return Judged(decisions.malformed("an UPDATE review carries no oldObject"))
    except reviews.MalformedReview as error:
        return Judged(decisions.malformed(str(error)))
    try:
        operator = await _is_operator(backend, who)
    except kubeapi.ApiUnavailable as error:
        return Judged(decisions.undecided(str(error)))
    except Exception as error:
        logger.exception("IchorInstallation admission failed")
        return Judged(decisions.undecided(f"internal error {type(error).__name__}"))
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
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
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


async def cluster_answer(
    *,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    dryrun: bool,
    backend: kubeapi.Backend,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
) -> decisions.Answer:
    """The validating answer to a TalosCluster create or update; never raises."""
    judged = await judge_cluster(
        new=new, old=old, userinfo=userinfo, operation=operation, backend=backend, logger=logger
    )
    return _checked(judged, kind=kinds.Kind.TALOS_CLUSTER, new=new, dryrun=dryrun, logger=logger)


async def operation_answer(
    *,
    new: object,
    userinfo: object,
    operation: object,
    dryrun: bool,
    backend: kubeapi.Backend,
    old: object = None,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
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


async def installation_answer(
    *,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    dryrun: bool,
    backend: kubeapi.Backend,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
) -> decisions.Answer:
    """The validating answer to an IchorInstallation update; never raises."""
    judged = await judge_installation(
        new=new, old=old, userinfo=userinfo, operation=operation, backend=backend, logger=logger
    )
    return _checked(
        judged, kind=kinds.Kind.ICHOR_INSTALLATION, new=new, dryrun=dryrun, logger=logger
    )


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
    except kubeapi.ApiUnavailable as error:
        return decisions.undecided(str(error))
    except Exception as error:
        _log.exception("status admission failed")
        return decisions.undecided(f"internal error {type(error).__name__}")
    return decisions.answer_status(
        kind=kind.value, namespace=namespace, name=name, requester=who, operator=own.username,
        matches=is_operator(who, own),
    )  # fmt: skip
