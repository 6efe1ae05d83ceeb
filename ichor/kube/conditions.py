"""Writing ``status.conditions`` the way the API conventions ask.

A condition's ``lastTransitionTime`` moves only when its status changes; a new reason
or message under the same status keeps the old time. Callers compute the conditions they
mean; this module merges them into what was there and refuses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from ichor.api.conditions import Condition, ConditionStatus


def find(conditions: Iterable[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def merge(
    previous: Sequence[Condition], updates: Iterable[Condition], *, now: datetime
) -> tuple[Condition, ...]:
    """``previous`` with each of ``updates`` written over the one of its type.

    An update's own ``lastTransitionTime`` is ignored: it is ``now`` when the status
    changed (or the type is new) and the previous time otherwise. Types not updated keep
    their place; new types are appended in the order given.
    """
    merged = {c.type: c for c in previous}
    for update in updates:
        old = merged.get(update.type)
        moved = old is None or old.status != update.status
        merged[update.type] = update.model_copy(
            update={
                "last_transition_time": now if moved or old is None else old.last_transition_time
            }
        )
    return tuple(merged.values())


def transitions(
    previous: Sequence[Condition], current: Sequence[Condition]
) -> list[tuple[Condition | None, Condition]]:
    """The conditions of ``current`` whose status or reason differs from ``previous``."""
    before = {c.type: c for c in previous}
    changed: list[tuple[Condition | None, Condition]] = []
    for condition in current:
        old = before.get(condition.type)
        if old is None or (old.status, old.reason) != (condition.status, condition.reason):
            changed.append((old, condition))
    return changed


def while_true(
    previous: Sequence[Condition], type_: str, update: Condition | None, *, now: datetime
) -> tuple[Condition, ...]:
    """``previous`` with the "abnormal-true" condition ``type_`` (``Reconciling``,
    ``Stalled``) set to ``update``, or removed when ``update`` is None.

    kstatus and Flux read these two only while True; a False one would say nothing a
    reader can trust, so it is never written. ``update`` must be True and of ``type_``.
    """
    if update is None:
        return tuple(c for c in previous if c.type != type_)
    if update.type != type_ or update.status != ConditionStatus.TRUE:
        raise ValueError(f"{type_} is written only while True, got {update.type}={update.status}")
    return merge(previous, [update], now=now)
