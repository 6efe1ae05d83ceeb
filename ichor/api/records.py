"""Admission records: what the webhook admitted under a person's authority, stored with the
object it admitted until the operator has posted it as an Event.

The webhook's mutating half puts a record into the object under review (``RECORDS``, a
JSON list); its validating half refuses an object whose records are not exactly those.
The operator posts each record it finds on a stored object as an Event, then removes it.
A TalosOperation created with ``override: true`` also keeps ``OVERRIDE_BY``, the user
it was admitted for. This module only reads and writes the shapes; the webhook decides
what they must be.

More in docs/design/notes.md, "ichor/api/records.py".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from ichor.api._base import ApiModel

#: The records not yet posted as Events (JSON list of ``Record``).
RECORDS = "ichor.dev/admission-records"
#: On a TalosOperation admitted with ``override: true``: the user it was admitted for.
OVERRIDE_BY = "ichor.dev/override-by"
#: On a TalosCluster create: the create is an adoption (``ichor adopt``). Any user may
#: set it; it only changes how a create's incompatible pair is judged.
ADOPTION = "ichor.dev/adoption"
#: At most this many records wait on one object; a write that would add one more is
#: refused until the operator has posted them (nothing is ever dropped).
MAX_PENDING = 16


class RecordKind(StrEnum):
    #: A holder of the verb passed a compatibility refusal.
    OVERRIDE = "Override"
    #: An adoption stored a pair the rules call incompatible, as it runs.
    ADOPTION = "Adoption"
    #: The operator moved a spec under the override an operation was admitted with.
    CARRIED = "CarriedOverride"
    #: A person asked to lift auto-patch halts (``ichor.dev/unhalt`` on the
    #: IchorInstallation; ``detail`` is its value). The operator lifts them, then posts it.
    UNHALT = "Unhalt"
    #: A Kubernetes step on a cluster with ``spec.cni.preset: unmanaged`` that runs a
    #: Cilium the Cilium rule would have refused (the rule is skipped there, not silently).
    CILIUM_RULE_SKIPPED = "CiliumRuleSkipped"


class Passed(ApiModel):
    """One refusal the write passed: the rule and its sentence."""

    rule: str
    message: str


class Record(ApiModel):
    """One admitted write to record as a Warning Event."""

    kind: RecordKind
    #: The user the API server named in the review (for CARRIED: the operation's).
    user: str
    #: What was written, for the Event: ``create``, ``update``, ``kubernetes to v1.37.2``.
    detail: str
    passed: tuple[Passed, ...] = ()
    #: CARRIED: the TalosOperation whose override the write carried.
    carried_from: str | None = None
    #: CARRIED: the field moved and its new value.
    field: str | None = None
    value: str | None = None


class RecordsUnreadable(ValueError):
    """The annotation holds something that is not a list of records."""


def read(annotations: Mapping[str, Any] | None) -> tuple[Record, ...]:
    """The records in an object's annotations; raises ``RecordsUnreadable``."""
    raw = (annotations or {}).get(RECORDS)
    if raw is None:
        return ()
    if not isinstance(raw, str):
        raise RecordsUnreadable(f"{RECORDS} is not a string")
    try:
        loaded = json.loads(raw)
    except ValueError as error:
        raise RecordsUnreadable(f"{RECORDS} is not JSON: {error}") from None
    if not isinstance(loaded, list):
        raise RecordsUnreadable(f"{RECORDS} is not a list")
    try:
        return tuple(Record.model_validate(item) for item in loaded)
    except (ValidationError, TypeError) as error:
        raise RecordsUnreadable(f"{RECORDS} holds an unreadable record: {error}") from None


def dump(records: Sequence[Record]) -> str | None:
    """The annotation's value for ``records`` (None: no annotation)."""
    if not records:
        return None
    return json.dumps(
        [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in records],
        separators=(",", ":"),
    )


def annotations_of(body: object) -> Mapping[str, Any]:
    """``metadata.annotations`` of a raw object, or an empty mapping."""
    return _metadata_map(body, "annotations")


def labels_of(body: object) -> Mapping[str, Any]:
    """``metadata.labels`` of a raw object, or an empty mapping."""
    return _metadata_map(body, "labels")


def _metadata_map(body: object, key: str) -> Mapping[str, Any]:
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    found = meta.get(key) if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def message(record: Record, *, kind: str, namespace: str, name: str) -> str:
    """The Event's sentence for ``record`` on the object it was admitted for."""
    what = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    refusals = "; ".join(f"{p.rule}: {p.message}" for p in record.passed)
    if record.kind is RecordKind.ADOPTION:
        return (
            f"User {record.user} adopted {what} at a pair the rules refuse, as it runs "
            f"(no override needed for an adoption; every later write is judged as "
            f"usual): {refusals}"
        )
    if record.kind is RecordKind.UNHALT:
        return f"User {record.user} asked to lift the auto-patch halt {record.detail} on {what}"
    if record.kind is RecordKind.CILIUM_RULE_SKIPPED:
        verb = "created" if kind == "TalosOperation" else "wrote"
        return (
            f"User {record.user} {verb} {what} ({record.detail}), a Kubernetes step past the "
            f"Cilium that runs on the cluster: spec.cni.preset is unmanaged, so the Cilium "
            f"rule was not asked, and it would have refused: {refusals}"
        )
    if record.kind is RecordKind.CARRIED:
        return (
            f"The operator moved spec.{record.field} of {what} to {record.value} ("
            f"{record.detail}) under the override of TalosOperation "
            f"{namespace}/{record.carried_from}, created by user {record.user} under the "
            f"verb `override`: {refusals}"
        )
    if not record.passed:
        return (
            f"User {record.user} created {what} ({record.detail}) with `override: true` "
            f"under the verb `override`; its plan refused nothing at creation, and a "
            f"compatibility refusal met at execution is passed"
        )
    return (
        f"User {record.user} overrode a refusal of {what} ({record.detail}) under the "
        f"verb `override`: {refusals}"
    )
