"""Kubernetes Events: what happened to an object, for a person reading ``kubectl describe``.

Events are best effort: ``post`` logs a failed Event and never fails the work that
produced it, and it catches one set of failures for every controller (``POST_FAILURES``,
which is ``errors.FAILED``: any answer of the API server that is not a success, and
``errors.TRANSIENT``). ``emit`` raises them instead, for the one caller whose work is the
Event (the recorder, which removes a record only once its Event is posted). The body is
pure (``ichor.kube.bodies.event_body``) so a synchronous caller (the CLI) can post the
same body with its own client.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.kube import errors
from ichor.kube.bodies import COMPONENT, EventType, PlannedEvent, event_body
from ichor.kube.clients import REQUEST_TIMEOUT
from ichor.kube.payloads import ObjectReference

logger = logging.getLogger(__name__)

#: What a best-effort post logs and swallows: any failed call (``errors.FAILED``).
POST_FAILURES = errors.FAILED


async def emit(
    api: ApiClient,
    involved: ObjectReference,
    *,
    type_: EventType,
    reason: str,
    message: str,
    component: str = COMPONENT,
) -> None:
    """Post an Event about ``involved``; raises the typed error for the caller."""
    body = event_body(involved, type_=type_, reason=reason, message=message, component=component)
    # the answer is not read into a V1Event (nothing uses it; building it cost more than
    # the request), so its status is checked here
    response: Any = await errors.mapped(
        client.CoreV1Api(api).create_namespaced_event_without_preload_content(
            body["metadata"]["namespace"],
            cast(Any, body),
            _request_timeout=REQUEST_TIMEOUT,
        )
    )
    try:
        raw = await response.read()
    finally:
        response.release()
    if not 200 <= response.status <= 299:
        raise errors.answered(response.status, response.reason, raw)


async def post(api: ApiClient, involved: ObjectReference, event: PlannedEvent) -> bool:
    """Post ``event`` about ``involved``, best effort: False (and a warning in the log)
    when it could not be posted."""
    try:
        await emit(api, involved, type_=event.type, reason=event.reason, message=event.message)
    except POST_FAILURES as error:
        where = "/".join(filter(None, (involved.get("namespace"), involved.get("name"))))
        kind = involved.get("kind")
        logger.warning("event %s on %s %s not posted: %s", event.reason, kind, where, error)
        return False
    return True
