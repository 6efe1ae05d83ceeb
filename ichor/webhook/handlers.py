"""The webhook's kopf handlers, thin: each takes the backend from kopf's memo, asks
``judgement`` and hands the answer to kopf.

Two halves per kind: the mutating handlers (``stamp_*``) write the judgement's stamp
into kopf's patch of the object, the validating handlers (``validate_*``) answer and
raise ``kopf.AdmissionError`` for a denial. A status handler answers a write of a status
subresource. ``wiring`` registers them (``HANDLERS``, under ``intake``'s paths); they
decide nothing themselves. A passed override is logged and returned as an admission
warning. Each marks its path once its judgement is given (``intake.judged``): the
endpoint refuses an allowed answer no handler of the path gave.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, MutableMapping
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

Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]
#: A kopf admission handler, as ``wiring`` registers it.
Handler = Callable[..., Coroutine[Any, Any, None]]


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


def _named(handler: Handler, verb: str, path: str) -> Handler:
    """``handler`` named for its path (``validate_taloscluster``) in logs and tracebacks."""
    handler.__name__ = handler.__qualname__ = f"{verb}_{path.replace('-', '_')}"
    return handler


def validating(
    answer_of: Callable[..., Awaitable[decisions.Answer]], *, path: str, queued: bool = False
) -> Handler:
    """The validating handler of ``path``: the review and the memo's backend handed to
    ``answer_of`` (a ``judgement.*_answer``), its answer delivered (``deliver``).
    ``queued``: ``answer_of`` is told the most operations one cluster queues."""

    async def validate(
        *,
        memo: kopf.Memo,
        new: object = None,
        old: object = None,
        userinfo: object = None,
        operation: object = None,
        dryrun: bool = False,
        warnings: list[str],
        logger: Logger = _log,
        **_: Any,
    ) -> None:
        limits = {"max_queued": max_queued_of(memo)} if queued else {}
        answer = await answer_of(
            new=new,
            old=old,
            userinfo=userinfo,
            operation=operation,
            dryrun=bool(dryrun),
            backend=backend_of(memo),
            logger=logger,
            **limits,
        )
        deliver(answer, warnings, path=path)

    return _named(validate, "validate", path)


def stamping(judge: Callable[..., Awaitable[judgement.Judged]], *, path: str) -> Handler:
    """The mutating handler of ``path``: the review and the memo's backend handed to
    ``judge`` (a ``judgement.judge_*``), its stamp written into kopf's patch
    (``stamp_patch``)."""

    async def stamp(
        *,
        memo: kopf.Memo,
        new: object = None,
        old: object = None,
        userinfo: object = None,
        operation: object = None,
        patch: MutableMapping[str, Any],
        logger: Logger = _log,
        **_: Any,
    ) -> None:
        judged = await judge(
            new=new,
            old=old,
            userinfo=userinfo,
            operation=operation,
            backend=backend_of(memo),
            logger=logger,
        )
        stamp_patch(judged, patch, path=path)

    return _named(stamp, "stamp", path)


def status_handler(kind: kinds.Kind) -> Handler:
    """The kopf handler of a write of ``kind``'s status subresource."""

    async def answer_of(*, dryrun: bool, logger: Logger, **review: Any) -> decisions.Answer:
        del dryrun, logger  # a status write is judged alike in a dry run, and logs nothing
        return await judgement.status_answer(kind=kind, **review)

    return validating(answer_of, path=intake.STATUS_HANDLERS[kind])


#: TalosCluster create/update.
validate_taloscluster = validating(judgement.cluster_answer, path=intake.CLUSTER_HANDLER)
#: TalosOperation create (the plan, within the queue's limit) and update (its stamp).
validate_talosoperation = validating(
    judgement.operation_answer, path=intake.OPERATION_HANDLER, queued=True
)
#: IchorInstallation update (the operator's marks, an unhalt request).
validate_ichorinstallation = validating(
    judgement.installation_answer, path=intake.INSTALLATION_HANDLER
)
#: The admission records of a TalosCluster write.
stamp_taloscluster = stamping(judgement.judge_cluster, path=intake.CLUSTER_STAMP)
#: The admission records and stamp of a TalosOperation write.
stamp_talosoperation = stamping(judgement.judge_operation, path=intake.OPERATION_STAMP)
#: The admission record of an unhalt request.
stamp_ichorinstallation = stamping(judgement.judge_installation, path=intake.INSTALLATION_STAMP)

#: The handler of each path of ``intake.CLAIMS``: what ``wiring`` registers there.
HANDLERS: Mapping[str, Handler] = {
    intake.CLUSTER_HANDLER: validate_taloscluster,
    intake.OPERATION_HANDLER: validate_talosoperation,
    intake.INSTALLATION_HANDLER: validate_ichorinstallation,
    intake.CLUSTER_STAMP: stamp_taloscluster,
    intake.OPERATION_STAMP: stamp_talosoperation,
    intake.INSTALLATION_STAMP: stamp_ichorinstallation,
    **{path: status_handler(kind) for kind, path in intake.STATUS_HANDLERS.items()},
}
