"""Kubernetes Events: what happened to an object, for a person reading ``kubectl describe``.

Events are best effort: a failed Event is logged by the caller and never fails the work
that produced it. The body is pure (``ichor.kube.bodies.event_body``) so a synchronous
caller (the CLI) can post the same body with its own client; ``emit`` posts it with the
async client.
"""

from __future__ import annotations

from typing import Any, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from ichor.kube.bodies import COMPONENT, EventType, event_body
from ichor.kube.clients import REQUEST_TIMEOUT
from ichor.kube.payloads import ObjectReference


async def emit(
    api: ApiClient,
    involved: ObjectReference,
    *,
    type_: EventType,
    reason: str,
    message: str,
    component: str = COMPONENT,
) -> None:
    """Post an Event about ``involved``; raises the client's error for the caller to log."""
    body = event_body(involved, type_=type_, reason=reason, message=message, component=component)
    # the answer is not read into a V1Event (nothing uses it; building it cost more than
    # the request), so its status is checked here
    response: Any = await client.CoreV1Api(api).create_namespaced_event(
        body["metadata"]["namespace"],
        cast(Any, body),
        _request_timeout=REQUEST_TIMEOUT,
        _preload_content=False,
    )
    try:
        raw = await response.read()
    finally:
        response.release()
    if not 200 <= response.status <= 299:
        error = ApiException(status=response.status, reason=response.reason)
        error.body = raw.decode(errors="replace")[:1024]
        raise error
