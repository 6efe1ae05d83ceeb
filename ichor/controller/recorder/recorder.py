"""The recorder: admission records on stored objects become Warning Events, then go.

The webhook writes no Event; its mutating half puts a record of each passed override or
adoption into the object (``ichor.api.records``). This controller sees the stored object
through its watch, posts each record as a Warning Event naming the user, then removes the
records it posted. A record is never lost: it stays in etcd until posted. Nor doubled:
its Event is named by the object's uid and the record's place among all its records
(``POSTED``), so a crash between post and removal posts it again under the same name and
meets the first (409). A record on the IchorInstallation lifts auto-patch halts.
More in docs/design/notes.md, "ichor/controller/recorder/recorder.py".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds, owed, records
from ichor.api.autopatch import UNHALT_ANNOTATION, Halt, HaltScope, parse_unhalt
from ichor.api.events import AutoPatchEventReason, RecordEventReason
from ichor.controller.autopatch import runner as autopatch
from ichor.controller.queue import WorkQueue
from ichor.kube import bodies, clock, errors, events, objects, patching

logger = logging.getLogger(__name__)

#: Attempts to remove the posted records when the object keeps moving.
ATTEMPTS = 5
#: How many records were posted and removed from the object so far (an operator's mark):
#: the first record of the list is the object's record number POSTED.
POSTED = "ichor.dev/records-posted"
#: Seconds before a failed attempt (API down) runs again.
RETRY_SECONDS = 5.0

Key = tuple[kinds.Plural, str, str]  # (plural, namespace, name)

#: The Event reason of each kind of record.
REASONS: Mapping[records.RecordKind, str] = {
    records.RecordKind.OVERRIDE: RecordEventReason.OVERRIDE,
    records.RecordKind.CARRIED: RecordEventReason.OVERRIDE,
    records.RecordKind.ADOPTION: RecordEventReason.ADOPTED_INCOMPATIBLE,
    records.RecordKind.UNHALT: AutoPatchEventReason.UNHALTED,
    records.RecordKind.CILIUM_RULE_SKIPPED: RecordEventReason.CILIUM_RULE_SKIPPED,
}

_KINDS: Mapping[kinds.Plural, kinds.Kind] = {plural: kind for kind, plural in kinds.PLURALS.items()}


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def unhalt_message(record: records.Record, lifted: tuple[Halt, ...] | None) -> str:
    """The Event's sentence for an unhalt request of ``record.user``: the halts it lifted
    (None: its value could not be read, so nothing was lifted)."""
    asked = f"User {record.user} asked to lift the auto-patch halt {record.detail!r}"
    if lifted is None:
        return f"{asked}, which is not <component>/<version> or all: nothing was lifted"
    if not lifted:
        return f"{asked}: no halt of it was in force, so nothing was lifted"
    named = "; ".join(
        f"{h.component} {h.version} (failed on {h.cluster}, TalosOperation {h.operation}; "
        f"{'the fleet' if h.scope is HaltScope.FLEET else 'namespace ' + h.namespace}; "
        f"until {_stamp(h.until)})"
        for h in lifted[:8]
    )
    more = f" and {len(lifted) - 8} more" if len(lifted) > 8 else ""
    return (
        f"User {record.user} lifted the auto-patch halt {record.detail} (ichor autopatch "
        f"unhalt): {named}{more}; those versions may start again in the next open window"
    )


def has_records(body: Mapping[str, Any]) -> bool:
    return records.RECORDS in records.annotations_of(body)


def posted_before(body: Mapping[str, Any]) -> int:
    """How many records the object held and the operator removed (``POSTED``)."""
    raw = records.annotations_of(body).get(POSTED)
    try:
        found = int(str(raw)) if raw is not None else 0
    except ValueError:
        return 0
    return max(found, 0)


def record_key(uid: str, number: int) -> str:
    """The owed-Event key of the object's record number ``number``: its Event's name."""
    return owed.key(uid, "record", str(number))


class Recorder:
    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.queue: WorkQueue[Key] = WorkQueue(self.reconcile, workers=2)
        #: records posted from the front of an object's list and not yet removed, by uid
        self._posted: dict[str, int] = {}

    def start(self) -> None:
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    def event(self, plural: kinds.Plural, body: Mapping[str, Any]) -> None:
        if has_records(body):
            meta = body.get("metadata") or {}
            self.queue.add((plural, str(meta.get("namespace", "")), str(meta.get("name", ""))))

    async def reconcile(self, key: Key) -> None:
        try:
            await self._reconcile(key)
        except errors.FAILED as error:
            logger.warning("records of %s %s/%s not posted yet: %s", *key, error)
            self.queue.add_after(key, RETRY_SECONDS)

    async def _read(self, key: Key) -> dict[str, Any] | None:
        plural, namespace, name = key
        if plural is kinds.Plural.ICHOR_INSTALLATIONS:
            return await self._get(namespace, name, kind=kinds.Kind.ICHOR_INSTALLATION)
        if plural is kinds.Plural.TALOS_OPERATIONS:
            return await self._get(namespace, name, kind=kinds.Kind.TALOS_OPERATION)
        return await self._get(namespace, name, kind=kinds.Kind.TALOS_CLUSTER)

    async def _get(self, namespace: str, name: str, *, kind: kinds.Kind) -> dict[str, Any] | None:
        return await objects.get(
            self.api, kind=kind, name=name, namespace=namespace if kinds.NAMESPACED[kind] else None
        )

    async def _reconcile(self, key: Key) -> None:
        for _ in range(ATTEMPTS):
            body = await self._read(key)
            if body is None:
                return
            uid = str((body.get("metadata") or {}).get("uid", ""))
            try:
                found = records.read(records.annotations_of(body))
            except records.RecordsUnreadable as error:
                # never written by the webhook (which refuses it): nothing to post
                logger.warning("%s %s/%s: %s", key[0], key[1], key[2], error)
                self._posted.pop(uid, None)
                return
            if not found:
                self._posted.pop(uid, None)
                return
            done = min(self._posted.get(uid, 0), len(found))
            first = posted_before(body)
            for record in found[done:]:
                await self._post(key, body, record, number=first + done)
                done += 1
                self._posted[uid] = done
            if await self._remove(key, body, rest=found[done:], posted=first + done):
                self._posted.pop(uid, None)
                return
        raise TimeoutError(f"{key[0]} {key[1]}/{key[2]} kept moving")

    async def _remove(
        self, key: Key, body: Mapping[str, Any], *, rest: tuple[records.Record, ...], posted: int
    ) -> bool:
        """Drop the posted records (those before ``rest``) and count them (``POSTED``);
        False when the object moved."""
        plural, namespace, name = key
        meta = body.get("metadata") or {}
        version = meta.get("resourceVersion")
        kind = _KINDS[plural]
        annotations: dict[str, str | None] = {
            records.RECORDS: records.dump(rest),
            POSTED: str(posted),
        }
        if kind is kinds.Kind.ICHOR_INSTALLATION and not rest:
            # every request is handled: the request annotation goes with its records (a
            # new request written meanwhile moved the object, and this write fails)
            annotations[UNHALT_ANNOTATION] = None
        try:
            await patching.patch_object(
                self.api,
                # spelt out: the chart's permission test reads the kinds written here
                kind=kinds.Kind.ICHOR_INSTALLATION
                if kind is kinds.Kind.ICHOR_INSTALLATION
                else kinds.Kind.TALOS_OPERATION
                if kind is kinds.Kind.TALOS_OPERATION
                else kinds.Kind.TALOS_CLUSTER,
                name=name,
                namespace=namespace if kinds.NAMESPACED[kind] else None,
                patch={"metadata": {"annotations": annotations}},
                resource_version=str(version) if version else None,
            )
        except errors.Conflict:
            return False
        except errors.NotFound:
            return True
        return True

    async def _post(
        self, key: Key, body: Mapping[str, Any], record: records.Record, *, number: int
    ) -> None:
        plural, namespace, name = key
        involved: Mapping[str, Any] = body
        kind = _KINDS[plural].value
        if plural is kinds.Plural.TALOS_OPERATIONS:
            kind = kinds.Kind.TALOS_OPERATION.value
            cluster = ((body.get("spec") or {}).get("clusterRef") or {}).get("name")
            found = await self._read((kinds.Plural.TALOS_CLUSTERS, namespace, str(cluster)))
            involved = found if found is not None else body
        message = records.message(record, kind=kind, namespace=namespace, name=name)
        if record.kind is records.RecordKind.UNHALT and plural is kinds.Plural.ICHOR_INSTALLATIONS:
            message = await self._unhalt(record)
        reference = bodies.reference(involved)
        try:
            await events.emit(
                self.api,
                reference,
                type_=bodies.EventType.WARNING,
                reason=REASONS[record.kind],
                message=message,
                name=owed.event_name(
                    str(reference.get("name") or "object"),
                    record_key(str((body.get("metadata") or {}).get("uid", "")), number),
                ),
            )
        except errors.Conflict:
            logger.info("record %d of %s %s/%s was posted before", number, *key)
            return
        logger.warning("recorded: %s", message)

    async def _unhalt(self, record: records.Record) -> str:
        """Lift the halts ``record`` asks to lift; the Event's sentence."""
        try:
            request = parse_unhalt(record.detail)
        except ValueError:
            return unhalt_message(record, None)
        lifted = await autopatch.lift_halts(
            self.api, request=request, user=record.user, now=clock.now()
        )
        return unhalt_message(record, lifted)
