"""Kubernetes Events: what happened to an object, for a person reading ``kubectl describe``.

Events are best effort: a failed Event is logged by the caller and never fails the work
that produced it. ``event_body`` is pure so a synchronous caller (the CLI) can post the
same body with its own client; ``emit`` posts it with the async client.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from ichor.kube.clients import REQUEST_TIMEOUT
from ichor.kube.payloads import ObjectReference

#: Where Events about cluster-scoped objects (IchorInstallation) are written.
CLUSTER_SCOPED_EVENT_NAMESPACE = "default"
COMPONENT = "ichor-operator"


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


def reference(body: Mapping[str, Any]) -> ObjectReference:
    """The reference to an object, taken from its body (a dict or kopf's Body)."""
    meta: Mapping[str, Any] = body.get("metadata", {})
    ref = ObjectReference(
        apiVersion=str(body.get("apiVersion", "")),
        kind=str(body.get("kind", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
    )
    if meta.get("namespace"):
        ref["namespace"] = str(meta["namespace"])
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = str(meta["resourceVersion"])
    return ref


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    involved: ObjectReference,
    *,
    type_: EventType,
    reason: str,
    message: str,
    component: str = COMPONENT,
    now: datetime | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about ``involved``; ``message`` is cut to the API's 1 KiB limit."""
    moment = _rfc3339(now or datetime.now(UTC))
    namespace = involved.get("namespace") or CLUSTER_SCOPED_EVENT_NAMESPACE
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{involved.get('name', 'object')}.{uuid.uuid4().hex[:16]}",
            "namespace": namespace,
        },
        "involvedObject": dict(involved),
        "type": str(type_),
        "reason": reason,
        "message": message if len(message) <= 1024 else message[:1021] + "...",
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": moment,
        "lastTimestamp": moment,
        "count": 1,
    }


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
