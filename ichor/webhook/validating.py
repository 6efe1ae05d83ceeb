"""kopf validating handlers of TalosCluster and TalosOperation, and ``register`` for them.

One handler per kind, so one write meets one handler and the user sees the first refusal
that matters. Each handler is thin: it reads the review (``reviews``), asks the pure
decision layer (``admission``), makes the API calls the answer depends on (``kubeapi``:
the cluster an operation names, the SubjectAccessReview, the Override Event) and hands
the answer to kopf. Nothing here decides a rule.

A handler never lets an exception out: a review it cannot read, an API call that fails
or a bug all become a denial with a sentence, because kopf would otherwise answer with
the exception's text and code 500. A passed override is logged, returned as an admission
warning and, unless the request is a dry run, recorded as a Warning Event ``Override``
on the TalosCluster (the configuration declares ``sideEffects: NoneOnDryRun``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from ichor.api import kinds
from ichor.kube import metrics
from ichor.webhook import admission, kubeapi, reviews

#: kopf handler ids; with a fixed configuration they are the webhook URL paths too.
CLUSTER_HANDLER = "taloscluster"
OPERATION_HANDLER = "talosoperation"
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


def _uid(body: object) -> str | None:
    if isinstance(body, Mapping):
        meta = body.get("metadata")
        if isinstance(meta, Mapping):
            uid = meta.get("uid")
            if isinstance(uid, str) and uid:
                return uid
    return None


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
    """The answer to a TalosCluster create or update; never raises."""
    try:
        if operation not in ("CREATE", "UPDATE"):
            return admission.malformed(f"operation {operation!r} is not validated here")
        who = reviews.requester(userinfo)
        cluster = reviews.cluster_versions(new, where="object")
        before = reviews.cluster_versions(old, where="oldObject") if operation == "UPDATE" else None
        if operation == "UPDATE" and old is None:
            return admission.malformed("an UPDATE review carries no oldObject")
    except reviews.MalformedReview as error:
        return admission.malformed(str(error))
    try:
        verdict = admission.review_cluster(new=cluster, old=before)
        carried = None
        if (
            before is not None
            and verdict.blocking is None
            and verdict.overridable
            and who.username == (await backend.own_identity()).username
        ):
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
        )
        await _record(answer, dryrun=dryrun, uid=_uid(new), backend=backend, logger=logger)
    except kubeapi.ApiUnavailable as error:
        return admission.undecided(str(error))
    except Exception as error:
        logger.exception("TalosCluster admission failed")
        return admission.undecided(f"internal error {type(error).__name__}")
    return answer


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


async def operation_answer(
    *,
    new: object,
    userinfo: object,
    operation: object,
    dryrun: bool,
    backend: kubeapi.Backend,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
) -> admission.Answer:
    """The answer to a TalosOperation create (the plan); never raises."""
    try:
        if operation != "CREATE":
            return admission.malformed(f"operation {operation!r} is not validated here")
        who = reviews.requester(userinfo)
        spec = reviews.operation_spec(new, where="object")
    except reviews.MalformedReview as error:
        return admission.malformed(str(error))
    try:
        body = await backend.read_cluster(spec.cluster_ref)
        if body is None:
            return admission.missing_cluster(spec)
        try:
            cluster = reviews.cluster_versions(body, where=f"TalosCluster {spec.cluster_ref}")
        except reviews.MalformedReview as error:
            return admission.undecided(str(error))
        verdict = admission.review_operation(spec=spec, cluster=cluster)
        holds = None
        if admission.needs_access_review(verdict, override_requested=spec.override):
            holds = await backend.holds_override(who, spec.cluster_ref)
        answer = admission.answer_operation(verdict, spec=spec, requester=who, holds_verb=holds)
        await _record(answer, dryrun=dryrun, uid=_uid(body), backend=backend, logger=logger)
    except kubeapi.ApiUnavailable as error:
        return admission.undecided(str(error))
    except Exception as error:
        logger.exception("TalosOperation admission failed")
        return admission.undecided(f"internal error {type(error).__name__}")
    return answer


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


async def _record(
    answer: admission.Answer,
    *,
    dryrun: bool,
    uid: str | None,
    backend: kubeapi.Backend,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
) -> None:
    if answer.record is None or answer.cluster is None:
        return
    logger.warning("%s%s", answer.record, " (dry run, not recorded)" if dryrun else "")
    if not dryrun:
        await backend.record_override(answer.cluster, message=answer.record, uid=uid)


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
    userinfo: object = None,
    operation: object = None,
    dryrun: bool = False,
    warnings: list[str],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf handler: TalosOperation create, the plan."""
    answer = await operation_answer(
        new=new,
        userinfo=userinfo,
        operation=operation,
        dryrun=bool(dryrun),
        backend=_backend,
        logger=logger,
    )
    deliver(answer, warnings)


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


def register(registry: kopf.OperatorRegistry) -> None:
    """Register the handlers into ``registry`` (the default one on import)."""
    kopf.on.validate(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.TALOS_CLUSTERS.value,
        id=CLUSTER_HANDLER,
        operations=["CREATE", "UPDATE"],
        side_effects=True,
        registry=registry,
    )(validate_taloscluster)
    kopf.on.validate(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.TALOS_OPERATIONS.value,
        id=OPERATION_HANDLER,
        operations=["CREATE"],
        side_effects=True,
        registry=registry,
    )(validate_talosoperation)
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
