"""kopf registration of the admission webhook, and nothing else.

``register_handlers`` puts the thin handlers of ``handlers`` into a registry, one under
each path ``intake`` claims (``intake.CLAIMS``: the mutating and validating halves of
each kind, the status subresources), a start that puts the API backend into kopf's memo
(as the controllers keep theirs) and asks once who the operator is, and a stop that
closes the backend's client. ``register``, the operator's, also points kopf at the HTTPS
endpoint (``server``) at start, and registers nothing without a certificate.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import kopf

from ichor.api import kinds, queue_limits
from ichor.settings import KubeSettings, Settings
from ichor.webhook import handlers, intake, kubeapi, server
from ichor.webhook.readiness import Readiness

_log = logging.getLogger(__name__)


async def stop(memo: kopf.Memo, **_: Any) -> None:
    """kopf cleanup: close the API client of the backend, if it has one."""
    close = getattr(memo.get(handlers.BACKEND), "close", None)
    if close is not None:
        await close()


async def identify(
    backend: kubeapi.Backend, logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
) -> None:
    """Ask once who the operator is and say so; a failure is asked again at the first
    review that needs it (that review is undecided meanwhile)."""
    try:
        own = await backend.own_identity()
    except kubeapi.ApiUnavailable as error:
        logger.warning("%s; asked again at the first status write", error)
        return
    logger.info(
        "the operator authenticates as %s: only it may write the status of ichor.dev kinds", own
    )


def register(
    registry: kopf.OperatorRegistry, *, settings: Settings, readiness: Readiness | None = None
) -> None:
    """Put the webhook into ``registry`` as the operator's ``settings`` say: nothing
    without ``ICHOR_WEBHOOK_CERT``/``_KEY`` (a local run of the controllers alone), else
    the endpoint configured from them at start and the handlers (``register_handlers``)
    over a backend that reaches the cluster as the operator does. ``readiness`` is told
    when the endpoint's listener opens and closes."""
    webhook = settings.webhook
    if webhook.cert is None or webhook.key is None:
        _log.warning("no ICHOR_WEBHOOK_CERT/ICHOR_WEBHOOK_KEY: the webhook is not served")
        return
    cert, key = webhook.cert, webhook.key

    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        endpoint = server.AdmissionServer(
            port=webhook.port,
            certfile=cert,
            pkeyfile=key,
            client_ca=webhook.client_ca,
            client_names=list(webhook.client_names),
            addr=webhook.addr,
            readiness=readiness,
        )
        server.configure(settings, endpoint)

    kopf.on.startup(id="webhook-configure", registry=registry)(configure)
    register_handlers(registry, kube=settings.kube, max_queued=settings.operations.max_queued)


def register_handlers(
    registry: kopf.OperatorRegistry,
    *,
    kube: KubeSettings,
    max_queued: int = queue_limits.MAX_QUEUED,
) -> None:
    """Put the webhook's handlers into ``registry``, and a start that puts a backend
    reaching the cluster as ``kube`` says into the memo, unless the memo holds one already
    (and ``max_queued``, the most operations one cluster queues). The endpoint is the
    caller's: the operator's ``register``, or a test that configures it itself with
    ``server.configure``."""

    async def start(
        memo: kopf.Memo,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger] = _log,
        **_: Any,
    ) -> None:
        if handlers.BACKEND not in memo:
            memo[handlers.BACKEND] = kubeapi.KubeBackend(kube=kube)
        memo.setdefault(handlers.MAX_QUEUED, max_queued)
        await identify(handlers.backend_of(memo), logger)

    for claim in intake.CLAIMS:
        on = kopf.on.mutate if claim.mutating else kopf.on.validate
        (subresource,) = claim.subresources  # kopf takes one: "" is the object itself
        on(
            kinds.GROUP,
            kinds.VERSION,
            claim.plural.value,
            id=claim.path,
            operations=cast(list[kopf.Operation], sorted(claim.operations)),
            subresource=subresource or None,
            registry=registry,
        )(handlers.HANDLERS[claim.path])
    # Explicit ids: kopf keys an activity's progress by id (the controllers register
    # functions named start/stop too).
    kopf.on.startup(id="webhook-start", registry=registry)(start)
    kopf.on.cleanup(id="webhook-stop", registry=registry)(stop)
