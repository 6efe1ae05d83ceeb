"""What Ichor sends to an API server, pure: merge patches (RFC 7386) and Event bodies.

No I/O here, so the pure decisions of the controllers can say what to write and which
Event to post; ``ichor.kube.patching`` and ``ichor.kube.events`` send them.

A merge patch cannot say "remove this list element", so lists are replaced whole, which
is what conditions need. Events are cut to the API's 1 KiB message limit.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from ichor.api.reading import whole_number
from ichor.kube.payloads import ObjectReference

MERGE_PATCH = "application/merge-patch+json"


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``old`` into ``new`` (keys of ``old`` absent from
    ``new`` become ``None``); empty when they are equal."""
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            inner = merge_patch(before, value)
            if inner:
                patch[key] = inner
        elif key not in old or before != value:
            patch[key] = value
    return patch


def without_managed_fields(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """``body`` without ``metadata.managedFields`` (a shallow copy; ``body`` itself when it
    has none), for a body a controller keeps in memory: server-side apply's field
    ownership, which no decision reads, is close to half a TalosCluster's JSON (2.2 of
    4.8 KB) and more of its parsed size, a dict per field it names."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping) or "managedFields" not in metadata:
        return body
    kept = {key: value for key, value in metadata.items() if key != "managedFields"}
    return {**body, "metadata": kept}


def generation(body: Mapping[str, Any]) -> int | None:
    """``metadata.generation`` of ``body``, None when it holds no number."""
    return whole_number((body.get("metadata") or {}).get("generation"))


def observed_generation(body: Mapping[str, Any]) -> int | None:
    """``status.observedGeneration`` of ``body``, None when it holds no number."""
    return whole_number((body.get("status") or {}).get("observedGeneration"))


#: Where Events about cluster-scoped objects (IchorInstallation) are written.
CLUSTER_SCOPED_EVENT_NAMESPACE = "default"
COMPONENT = "ichor-operator"


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class PlannedEvent:
    """An Event a pure decision asks for; the caller posts it about the object it judged.
    ``reason`` is a member of one of ``ichor.api.events``' reason enums."""

    type: EventType
    reason: str
    message: str


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
    name: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about ``involved``; ``message`` is cut to the API's 1 KiB limit.
    ``name``: the Event's name (an owed Event's, ``ichor.api.owed.event_name``), else a
    random one."""
    moment = _rfc3339(now or datetime.now(UTC))
    namespace = involved.get("namespace") or CLUSTER_SCOPED_EVENT_NAMESPACE
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": name or f"{involved.get('name', 'object')}.{uuid.uuid4().hex[:16]}",
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
