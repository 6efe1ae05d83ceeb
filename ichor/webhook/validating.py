"""kopf admission handlers of TalosCluster and TalosOperation, and ``register`` for them.

One judgement per write (``judge_cluster``, ``judge_operation``), made by two halves
that both call it: the mutating half writes the annotations the judgement says the
stored object must carry (the admission records, and an operation's ``override-by``
stamp, ``ichor.api.records``), the validating half answers and refuses an object that
does not carry exactly those. Each is thin: it reads the review (``reviews``), asks the
pure decision layers (``admission``, ``stamps``) and makes the reads the answer depends
on (``kubeapi``: who the operator is, the cluster an operation names, the operations of
a cluster, the SubjectAccessReview). Nothing here decides a rule, and nothing here
writes: the operator posts the Events of what was admitted once it sees the object
stored (``ichor.controller.recorder``).

A handler never lets an exception out: a review it cannot read, an API call that fails
or a bug all become a denial with a sentence, because kopf would otherwise answer with
the exception's text and code 500. A passed override is logged and returned as an
admission warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import kopf

from ichor.api import kinds, records
from ichor.kube import metrics
from ichor.settings import Settings
from ichor.webhook import admission, kubeapi, reviews, stamps

#: kopf handler ids; with a fixed configuration they are the webhook URL paths too.
CLUSTER_HANDLER = "taloscluster"
OPERATION_HANDLER = "talosoperation"
#: The mutating half (the MutatingWebhookConfiguration): it writes the admission records.
CLUSTER_STAMP = "taloscluster-records"
OPERATION_STAMP = "talosoperation-records"
#: The path (handler id) judging the status subresource of each kind: only the
#: operator writes status.
STATUS_HANDLERS: Mapping[kinds.Kind, str] = {
    kinds.Kind.TALOS_CLUSTER: "taloscluster-status",
    kinds.Kind.TALOS_OPERATION: "talosoperation-status",
    kinds.Kind.ICHOR_INSTALLATION: "ichorinstallation-status",
}

_log = logging.getLogger(__name__)
_backend: kubeapi.Backend = kubeapi.KubeBackend()


def use_backend(backend: kubeapi.Backend) -> kubeapi.Backend:
    """Replace the API backend (the operator's own client, or a fake); returns the old one."""
    global _backend
    previous, _backend = _backend, backend
    return previous


def _annotations(body: object) -> Mapping[str, Any]:
    return records.annotations_of(body)


def _what(kind: kinds.Kind, body: object) -> str:
    try:
        namespace, name = reviews.object_name(body)
    except reviews.MalformedReview:
        return kind.value
    return f"{kind.value} {namespace}/{name}"


async def _is_operator(backend: kubeapi.Backend, who: reviews.Requester) -> bool:
    return who.username == (await backend.own_identity()).username


@dataclass(frozen=True)
class Judged:
    """One judgement of a write, shared by the two halves: the answer, and when it
    allows the write, the annotations the stored object must carry."""

    answer: admission.Answer
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
            return Judged(admission.malformed(f"operation {operation!r} is not validated here"))
        who = reviews.requester(userinfo)
        cluster = reviews.cluster_versions(new, where="object")
        before = reviews.cluster_versions(old, where="oldObject") if operation == "UPDATE" else None
        if operation == "UPDATE" and old is None:
            return Judged(admission.malformed("an UPDATE review carries no oldObject"))
    except reviews.MalformedReview as error:
        return Judged(admission.malformed(str(error)))
    try:
        operator = await _is_operator(backend, who)
        verdict = admission.review_cluster(new=cluster, old=before)
        carried = None
        if before is not None and verdict.blocking is None and verdict.overridable and operator:
            carried = await _carried_operation(backend, new=cluster, old=before)
        holds = None
        if carried is None and admission.needs_access_review(
            verdict, override_requested=bool(verdict.overridable)
        ):
            holds = await backend.holds_override(who, cluster.ref)
        answer = admission.answer_cluster(
            verdict,
            requester=who,
            cluster=cluster.ref,
            holds_verb=holds,
            operation=str(operation),
            carried=carried,
            adoption=_annotations(new).get(records.ADOPTION) == "true",
        )
    except kubeapi.ApiUnavailable as error:
        return Judged(admission.undecided(str(error)))
    except Exception as error:
        logger.exception("TalosCluster admission failed")
        return Judged(admission.undecided(f"internal error {type(error).__name__}"))
    if not answer.allowed:
        return Judged(answer)
    stamp = stamps.cluster_stamp(
        old=_annotations(old) if operation == "UPDATE" else None,
        given=_annotations(new),
        operator=operator,
        admitted=answer.admitted,
    )
    return Judged(answer, stamp)


async def _carried_operation(
    backend: kubeapi.Backend, *, new: reviews.ClusterObject, old: reviews.ClusterObject
) -> reviews.StoredOperation | None:
    """The stored operation whose override the operator's spec write carries, if any."""
    stored = [
        reviews.stored_operation(body) for body in await backend.list_operations(new.ref.namespace)
    ]
    return admission.carried_override(
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
) -> Judged:
    """The judgement of a TalosOperation create (the plan) or update (its stamp only: the
    CRD keeps its spec as created); never raises."""
    try:
        if operation not in ("CREATE", "UPDATE"):
            return Judged(admission.malformed(f"operation {operation!r} is not validated here"))
        who = reviews.requester(userinfo)
        spec = reviews.operation_spec(new, where="object")
        if operation == "UPDATE" and old is None:
            return Judged(admission.malformed("an UPDATE review carries no oldObject"))
    except reviews.MalformedReview as error:
        return Judged(admission.malformed(str(error)))
    try:
        operator = await _is_operator(backend, who)
        marked = admission.started_by_label(
            new=new, old=old, operation=str(operation), requester=who, operator=operator
        )
        if marked is not None:
            return Judged(marked)
        if operation == "UPDATE":
            answer = admission.Answer(allowed=True, cluster=spec.cluster_ref)
        else:
            body = await backend.read_cluster(spec.cluster_ref)
            if body is None:
                return Judged(admission.missing_cluster(spec))
            try:
                cluster = reviews.cluster_versions(body, where=f"TalosCluster {spec.cluster_ref}")
            except reviews.MalformedReview as error:
                return Judged(admission.undecided(str(error)))
            verdict = admission.review_operation(spec=spec, cluster=cluster)
            holds = None
            if admission.needs_access_review(verdict, override_requested=spec.override):
                holds = await backend.holds_override(who, spec.cluster_ref)
            answer = admission.answer_operation(verdict, spec=spec, requester=who, holds_verb=holds)
    except kubeapi.ApiUnavailable as error:
        return Judged(admission.undecided(str(error)))
    except Exception as error:
        logger.exception("TalosOperation admission failed")
        return Judged(admission.undecided(f"internal error {type(error).__name__}"))
    if not answer.allowed:
        return Judged(answer)
    stamp = stamps.operation_stamp(
        old=_annotations(old) if operation == "UPDATE" else None,
        given=_annotations(new),
        operator=operator,
        admitted=answer.admitted,
        override_by=who.username if spec.override else None,
    )
    return Judged(answer, stamp)


def _checked(
    judged: Judged,
    *,
    kind: kinds.Kind,
    new: object,
    dryrun: bool,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
) -> admission.Answer:
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
        return admission.Answer(allowed=False, message=problem, code=admission.Code.FORBIDDEN)
    if answer.record is not None:
        # Recorded as an Event by the operator once it sees the object stored.
        logger.warning("%s%s", answer.record, " (dry run)" if dryrun else "")
    return answer


async def cluster_answer(
    *,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    dryrun: bool,
    backend: kubeapi.Backend,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
) -> admission.Answer:
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
) -> admission.Answer:
    """The validating answer to a TalosOperation create (the plan) or update; never raises."""
    judged = await judge_operation(
        new=new, old=old, userinfo=userinfo, operation=operation, backend=backend, logger=logger
    )
    return _checked(judged, kind=kinds.Kind.TALOS_OPERATION, new=new, dryrun=dryrun, logger=logger)


async def status_answer(
    *,
    kind: kinds.Kind,
    new: object,
    old: object,
    userinfo: object,
    operation: object,
    backend: kubeapi.Backend,
) -> admission.Answer:
    """The answer to a write of a status subresource; never raises."""
    try:
        if operation != "UPDATE":
            return admission.malformed(
                f"operation {operation!r} on the status of a {kind} is not validated here"
            )
        who = reviews.requester(userinfo)
        namespace, name = reviews.object_name(new if new is not None else old)
    except reviews.MalformedReview as error:
        return admission.malformed(str(error))
    try:
        own = await backend.own_identity()
    except kubeapi.ApiUnavailable as error:
        return admission.undecided(str(error))
    except Exception as error:
        _log.exception("status admission failed")
        return admission.undecided(f"internal error {type(error).__name__}")
    return admission.answer_status(
        kind=kind.value, namespace=namespace, name=name, requester=who, operator=own.username
    )


def deliver(answer: admission.Answer, warnings: list[str]) -> None:
    """Hand an answer to kopf: warnings appended, a denial raised as an AdmissionError."""
    warnings.extend(answer.warnings)
    metrics.webhook_decided(allowed=answer.allowed, overridden=answer.record is not None)
    if not answer.allowed:
        raise kopf.AdmissionError(answer.message, code=int(answer.code))


async def validate_taloscluster(
    *,
    new: object = None,
    old: object = None,
    userinfo: object = None,
    operation: object = None,
    dryrun: bool = False,
    warnings: list[str],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf handler: TalosCluster create/update."""
    answer = await cluster_answer(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        dryrun=bool(dryrun),
        backend=_backend,
        logger=logger,
    )
    deliver(answer, warnings)


async def validate_talosoperation(
    *,
    new: object = None,
    old: object = None,
    userinfo: object = None,
    operation: object = None,
    dryrun: bool = False,
    warnings: list[str],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf handler: TalosOperation create (the plan) and update (its stamp)."""
    answer = await operation_answer(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        dryrun=bool(dryrun),
        backend=_backend,
        logger=logger,
    )
    deliver(answer, warnings)


def stamp_patch(judged: Judged, patch: MutableMapping[str, Any]) -> None:
    """The mutating half: write the judgement's stamp into kopf's patch of the object.

    It refuses nothing a rule refuses: the API server checks the CRD's schema after the
    mutating webhooks and before the validating ones, so a refusal here would hide the
    schema's own message; the validating half refuses the write with the same judgement.
    Only a judgement it could not make (an API call failed) is refused here, to be retried.
    An allowed write gets the annotations, so it is stored with exactly what the
    validating half checks.
    """
    answer = judged.answer
    if not answer.allowed:
        if answer.code == admission.Code.UNAVAILABLE:
            raise kopf.AdmissionError(answer.message, code=int(answer.code))
        return
    if judged.stamp is None:
        return
    metadata = patch.setdefault("metadata", {})
    annotations = metadata.setdefault("annotations", {})
    for key, value in judged.stamp.annotations().items():
        annotations[key] = value


async def stamp_taloscluster(
    *,
    new: object = None,
    old: object = None,
    userinfo: object = None,
    operation: object = None,
    patch: MutableMapping[str, Any],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf mutating handler: the admission records of a TalosCluster write."""
    judged = await judge_cluster(
        new=new, old=old, userinfo=userinfo, operation=operation, backend=_backend, logger=logger
    )
    stamp_patch(judged, patch)


async def stamp_talosoperation(
    *,
    new: object = None,
    old: object = None,
    userinfo: object = None,
    operation: object = None,
    patch: MutableMapping[str, Any],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf mutating handler: the admission records and stamp of a TalosOperation write."""
    judged = await judge_operation(
        new=new, old=old, userinfo=userinfo, operation=operation, backend=_backend, logger=logger
    )
    stamp_patch(judged, patch)


def _status_handler(kind: kinds.Kind) -> Any:
    async def validate_status(
        *,
        new: object = None,
        old: object = None,
        userinfo: object = None,
        operation: object = None,
        warnings: list[str],
        **_: Any,
    ) -> None:
        """kopf handler: a write of the status subresource."""
        answer = await status_answer(
            kind=kind,
            new=new,
            old=old,
            userinfo=userinfo,
            operation=operation,
            backend=_backend,
        )
        deliver(answer, warnings)

    validate_status.__qualname__ = f"validate_{kind.value.lower()}_status"
    return validate_status


async def identify(
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log, **_: Any
) -> None:
    """kopf startup: ask once who the operator is and say so; a failure is asked again at
    the first review that needs it (that review is undecided meanwhile)."""
    try:
        own = await _backend.own_identity()
    except kubeapi.ApiUnavailable as error:
        logger.warning("%s; asked again at the first status write", error)
        return
    logger.info(
        "the operator authenticates as %s: only it may write the status of ichor.dev kinds", own
    )


async def close_backend(**_: Any) -> None:
    """kopf cleanup: close the API client of the backend, if it has one."""
    close = getattr(_backend, "close", None)
    if close is not None:
        await close()


def register(registry: kopf.OperatorRegistry, *, settings: Settings | None = None) -> None:
    """Register the handlers into ``registry``; with ``settings``, the backend reaches the
    cluster as they say (else as the environment says, when it first connects)."""
    if settings is not None:
        use_backend(kubeapi.KubeBackend(kube=settings.kube))
    kopf.on.validate(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.TALOS_CLUSTERS.value,
        id=CLUSTER_HANDLER,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )(validate_taloscluster)
    kopf.on.validate(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.TALOS_OPERATIONS.value,
        id=OPERATION_HANDLER,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )(validate_talosoperation)
    kopf.on.mutate(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.TALOS_CLUSTERS.value,
        id=CLUSTER_STAMP,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )(stamp_taloscluster)
    kopf.on.mutate(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.TALOS_OPERATIONS.value,
        id=OPERATION_STAMP,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )(stamp_talosoperation)
    for kind, handler in STATUS_HANDLERS.items():
        kopf.on.validate(
            kinds.GROUP,
            kinds.VERSION,
            kinds.PLURALS[kind].value,
            id=handler,
            operations=["UPDATE"],
            subresource="status",
            registry=registry,
        )(_status_handler(kind))
    kopf.on.startup(id="webhook-identity", registry=registry)(identify)
    kopf.on.cleanup(id="webhook-backend", registry=registry)(close_backend)
