"""The webhook's kopf handlers, thin: each takes the backend from kopf's memo, asks
``judgement`` and hands the answer to kopf.

Two halves per kind: the mutating handlers (``stamp_*``) write the judgement's stamp
into kopf's patch of the object, the validating handlers (``validate_*``) answer and
raise ``kopf.AdmissionError`` for a denial. A status handler answers a write of a status
subresource. They are registered by ``wiring`` (the paths are ``intake``'s) and decide
nothing themselves. A passed override is logged and returned as an admission warning.
Each marks its path once its judgement is given (``intake.judged``): the endpoint refuses
an allowed answer no handler of the path gave.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, MutableMapping
from typing import Any

import kopf

from ichor.api import kinds, queue_limits
from ichor.kube import metrics
from ichor.webhook import decisions, intake, judgement, kubeapi

#: The memo key of the webhook's API backend (``kubeapi.Backend``): ``wiring`` puts the
#: operator's there at start unless a caller (a test, with a fake) put one there first.
BACKEND = "ichor_webhook_backend"
#: The memo key of the most operations one cluster queues (``ICHOR_MAX_QUEUED_OPERATIONS``),
#: put there by ``wiring`` at start (absent: the default).
MAX_QUEUED = "ichor_webhook_max_queued"

_log = logging.getLogger(__name__)


def backend_of(memo: kopf.Memo) -> kubeapi.Backend:
    """The backend the webhook's start put into kopf's memo."""
    backend: kubeapi.Backend = memo[BACKEND]
    return backend


def max_queued_of(memo: kopf.Memo) -> int:
    """The most operations one cluster queues, as the webhook's start put it in the memo."""
    found = memo.get(MAX_QUEUED, queue_limits.MAX_QUEUED)
    return int(found)


def deliver(answer: decisions.Answer, warnings: list[str], *, path: str) -> None:
    """Hand the answer of the handler of ``path`` to kopf: the path marked as judged,
    warnings appended, a denial raised as an AdmissionError."""
    intake.judged(path)
    warnings.extend(answer.warnings)
    metrics.webhook_decided(allowed=answer.allowed, overridden=answer.record is not None)
    if not answer.allowed:
        intake.denied_for(answer.reason)
        if answer.overridable:
            intake.override_passes(path)
        raise kopf.AdmissionError(answer.message, code=int(answer.code))


async def validate_taloscluster(
    *,
    memo: kopf.Memo,
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
    answer = await judgement.cluster_answer(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        dryrun=bool(dryrun),
        backend=backend_of(memo),
        logger=logger,
    )
    deliver(answer, warnings, path=intake.CLUSTER_HANDLER)


async def validate_talosoperation(
    *,
    memo: kopf.Memo,
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
    answer = await judgement.operation_answer(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        dryrun=bool(dryrun),
        backend=backend_of(memo),
        logger=logger,
        max_queued=max_queued_of(memo),
    )
    deliver(answer, warnings, path=intake.OPERATION_HANDLER)


def stamp_patch(judged: judgement.Judged, patch: MutableMapping[str, Any], *, path: str) -> None:
    """The mutating half: write the judgement's stamp into kopf's patch of the object.

    It refuses nothing a rule refuses: the API server checks the CRD's schema after the
    mutating webhooks and before the validating ones, so a refusal here would hide the
    schema's own message; the validating half refuses the write with the same judgement.
    Only a judgement it could not make (an API call failed) is refused here, to be retried.
    An allowed write gets the annotations, so it is stored with exactly what the
    validating half checks.
    """
    intake.judged(path)
    answer = judged.answer
    if not answer.allowed:
        if answer.code == decisions.Code.UNAVAILABLE:
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
    memo: kopf.Memo,
    new: object = None,
    old: object = None,
    userinfo: object = None,
    operation: object = None,
    patch: MutableMapping[str, Any],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf mutating handler: the admission records of a TalosCluster write."""
    judged = await judgement.judge_cluster(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        backend=backend_of(memo),
        logger=logger,
    )
    stamp_patch(judged, patch, path=intake.CLUSTER_STAMP)


async def stamp_talosoperation(
    *,
    memo: kopf.Memo,
    new: object = None,
    old: object = None,
    userinfo: object = None,
    operation: object = None,
    patch: MutableMapping[str, Any],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf mutating handler: the admission records and stamp of a TalosOperation write."""
    judged = await judgement.judge_operation(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        backend=backend_of(memo),
        logger=logger,
    )
    stamp_patch(judged, patch, path=intake.OPERATION_STAMP)


async def validate_ichorinstallation(
    *,
    memo: kopf.Memo,
    new: object = None,
    old: object = None,
    userinfo: object = None,
    operation: object = None,
    dryrun: bool = False,
    warnings: list[str],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf handler: IchorInstallation update (the operator's marks, an unhalt request)."""
    answer = await judgement.installation_answer(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        dryrun=bool(dryrun),
        backend=backend_of(memo),
        logger=logger,
    )
    deliver(answer, warnings, path=intake.INSTALLATION_HANDLER)


async def stamp_ichorinstallation(
    *,
    memo: kopf.Memo,
    new: object = None,
    old: object = None,
    userinfo: object = None,
    operation: object = None,
    patch: MutableMapping[str, Any],
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
    **_: Any,
) -> None:
    """kopf mutating handler: the admission record of an unhalt request."""
    judged = await judgement.judge_installation(
        new=new,
        old=old,
        userinfo=userinfo,
        operation=operation,
        backend=backend_of(memo),
        logger=logger,
    )
    stamp_patch(judged, patch, path=intake.INSTALLATION_STAMP)


def status_handler(kind: kinds.Kind) -> Callable[..., Coroutine[Any, Any, None]]:
    """The kopf handler of a write of ``kind``'s status subresource."""

    async def validate_status(
        *,
        memo: kopf.Memo,
        new: object = None,
        old: object = None,
        userinfo: object = None,
        operation: object = None,
        warnings: list[str],
        **_: Any,
    ) -> None:
        """kopf handler: a write of the status subresource."""
        answer = await judgement.status_answer(
            kind=kind,
            new=new,
            old=old,
            userinfo=userinfo,
            operation=operation,
            backend=backend_of(memo),
        )
        deliver(answer, warnings, path=intake.STATUS_HANDLERS[kind])

    validate_status.__qualname__ = f"validate_{kind.value.lower()}_status"
    return validate_status
