"""The annotations the webhook writes into an object it admits, and the check of them, pure.

The mutating half writes them (``ichor.dev/admission-records``, and on an operation
``ichor.dev/override-by``); the validating half refuses an object that does not carry
exactly what this module computes (``Stamp``), so a user can neither add, change nor drop
a record, nor imitate the stamp. Only the operator may drop the records at the front of
the list, once it has posted them as Events.

More in docs/design/notes.md, "ichor/webhook/stamps.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ichor.api import records
from ichor.api.records import Record


@dataclass(frozen=True)
class Stamp:
    """What the webhook's annotations must be once the write is stored (None: absent).

    ``override_by`` is compared only for TalosOperations (``operation``)."""

    records: str | None
    operation: bool = False
    override_by: str | None = None

    def annotations(self) -> dict[str, str | None]:
        """The annotation values to set (None: remove), for the mutating half."""
        found: dict[str, str | None] = {records.RECORDS: self.records}
        if self.operation:
            found[records.OVERRIDE_BY] = self.override_by
        return found


def _readable(annotations: Mapping[str, Any] | None) -> tuple[Record, ...]:
    try:
        return records.read(annotations)
    except records.RecordsUnreadable:
        return ()


def kept_records(
    *, old: Mapping[str, Any] | None, given: Mapping[str, Any], operator: bool
) -> tuple[Record, ...]:
    """The records the object keeps through this write (before the one it adds).

    Everyone keeps the old ones; the operator may have dropped some from the front
    (the ones it posted), which shows as ``given`` being a tail of the old list.
    """
    before = _readable(old)
    if operator:
        now = _readable(given)
        if len(now) <= len(before) and before[len(before) - len(now) :] == now:
            return now
    return before


def _added(admitted: Record | None, traced: Record | None) -> tuple[Record, ...]:
    return tuple(record for record in (admitted, traced) if record is not None)


def cluster_stamp(
    *,
    old: Mapping[str, Any] | None,
    given: Mapping[str, Any],
    operator: bool,
    admitted: Record | None,
    traced: Record | None = None,
) -> Stamp:
    """The stamp of a TalosCluster write (``old`` None on a create); ``traced`` is the
    record of a step past a Cilium the rule skips (unmanaged), after ``admitted``."""
    kept = kept_records(old=old, given=given, operator=operator)
    return Stamp(records=records.dump(kept + _added(admitted, traced)))


def operation_stamp(
    *,
    old: Mapping[str, Any] | None,
    given: Mapping[str, Any],
    operator: bool,
    admitted: Record | None,
    override_by: str | None,
    traced: Record | None = None,
) -> Stamp:
    """The stamp of a TalosOperation write: on a create (``old`` None) ``override_by``
    is the user admitted with ``override: true``; on an update the stored one stays."""
    kept = kept_records(old=old, given=given, operator=operator)
    if old is not None:
        stored = old.get(records.OVERRIDE_BY)
        override_by = stored if isinstance(stored, str) and stored else None
    return Stamp(
        records=records.dump(kept + _added(admitted, traced)),
        operation=True,
        override_by=override_by,
    )


def pending(stamp: Stamp) -> int:
    """How many records the object would carry."""
    return len(_readable({records.RECORDS: stamp.records} if stamp.records else {}))


def problem(stamp: Stamp, given: Mapping[str, Any], *, what: str) -> str | None:
    """Why the object under review does not carry ``stamp``, as a sentence; None if it does."""
    wrong = [key for key, value in stamp.annotations().items() if given.get(key) != value]
    if not wrong:
        return None
    names = " and ".join(f"metadata.annotations[{key!r}]" for key in wrong)
    return (
        f"{what} is refused: {names} is written by the ichor admission webhook alone (the "
        f"record of what it admitted, kept until the operator has posted it as an Event), "
        f"and this write sets it otherwise; leave it out of the write. If you did not set "
        f"it, the MutatingWebhookConfiguration of ichor is missing, or the object changed "
        f"while the write was judged: retry"
    )


def too_many(stamp: Stamp, *, what: str) -> str | None:
    """The refusal of a write that would leave more records than may wait."""
    if pending(stamp) <= records.MAX_PENDING:
        return None
    return (
        f"{what} is refused: {records.MAX_PENDING} admission records already wait for the "
        f"ichor operator to post them as Events, and no record is ever dropped; retry once "
        f"the operator runs (it posts them within seconds)"
    )
