"""The operator's marks are the operator's: which write of an ``ichor.dev`` label or
annotation, or of an operator-started operation's owner references, is refused. Pure.

The controllers read their own bookkeeping from these (``ichor.api.marks`` lists whose
key is whose): an operation labelled ``ichor.dev/started-by`` and owned by its cluster is
auto-patch's (a failure of it suspends the cluster and may halt the version);
``ichor.dev/auto-patch-halted`` says the fleet's record holds its halt. Anyone but the
operator who adds, changes or removes one (a create counts, a removal counts) is refused,
and so is a change of the owner references of an operation the operator started. Keys a
person sets (``USER_KEYS``) and the webhook's own stamps (judged by ``stamps``) are not
judged here. This module only says why a write is refused; ``judgement`` answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ichor.api import kinds, marks
from ichor.api.talosoperation import STARTED_BY_LABEL
from ichor.webhook.reviews import Requester

#: Marks named one by one in a refusal; the rest are counted.
NAMED = 3
#: The longest value quoted in a refusal.
QUOTED = 64


@dataclass(frozen=True)
class Change:
    """One operator's mark the write adds, changes or removes."""

    where: str  # "label" or "annotation"
    key: str
    before: str | None
    after: str | None


def _metadata(body: object) -> Mapping[str, Any]:
    if isinstance(body, Mapping):
        meta = body.get("metadata")
        if isinstance(meta, Mapping):
            return meta
    return {}


def _strings(meta: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    found = meta.get(field)
    return found if isinstance(found, Mapping) else {}


def _shown(value: object) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text if len(text) <= QUOTED else text[: QUOTED - 3] + "..."


def changes(kind: kinds.Kind, *, new: object, old: object) -> tuple[Change, ...]:
    """The operator's marks that differ between ``old`` (None: a create) and ``new``."""
    found: list[Change] = []
    after, before = _metadata(new), _metadata(old)
    for where, field in (("label", "labels"), ("annotation", "annotations")):
        now, then = _strings(after, field), _strings(before, field)
        for key in sorted({*now, *then}, key=str):
            if not isinstance(key, str) or not marks.operators(kind, key):
                continue
            if now.get(key) != then.get(key):
                found.append(
                    Change(where=where, key=key, before=_shown(then.get(key)),
                           after=_shown(now.get(key)))
                )  # fmt: skip
    return tuple(found)


def _started_by_operator(body: object) -> bool:
    return STARTED_BY_LABEL in _strings(_metadata(body), "labels")


def owners_changed(kind: kinds.Kind, *, new: object, old: object) -> bool:
    """Whether the write changes the owner references of an operation the operator
    started (its stored object carries ``ichor.dev/started-by``)."""
    if kind is not kinds.Kind.TALOS_OPERATION or old is None or not _started_by_operator(old):
        return False
    return _metadata(new).get("ownerReferences") != _metadata(old).get("ownerReferences")


def _what(kind: kinds.Kind, body: object) -> str:
    meta = _metadata(body)
    namespace, name = meta.get("namespace"), meta.get("name")
    if isinstance(name, str) and name:
        if isinstance(namespace, str) and namespace:
            return f"{kind.value} {namespace}/{name}"
        return f"{kind.value} {name}"
    return f"the {kind.value}"


def _meaning(key: str) -> str:
    said = marks.OPERATOR_MARKS.get(key)
    if said is not None:
        return f"it records {said}"
    return f"keys under {marks.DOMAIN} are reserved for the ichor operator's own bookkeeping"


def refusal(
    kind: kinds.Kind,
    *,
    new: object,
    old: object,
    operation: str,
    requester: Requester,
    operator: bool,
) -> str | None:
    """Why this write is refused for touching the operator's marks, as one sentence; None
    when it touches none, or when ``operator`` (the requester is the operator)."""
    if operator:
        return None
    before = old if operation == "UPDATE" else None
    what = f"{_what(kind, new if new is not None else old)} is refused for user "
    what += repr(requester.username)
    found = changes(kind, new=new, old=before)
    if found:
        first = found[0]
        change = "set" if before is None else "added, changed or removed"
        if before is None:
            step = f"create it without the {first.where}"
        elif first.after is None:
            step = f"keep the {first.where} as it was ({first.before!r}) in the write"
        else:
            step = f"leave the {first.where} out of the write, or as it was"
        others = found[1:]
        also = ""
        if others:
            named = ", ".join(c.key for c in others[: NAMED - 1])
            rest = len(others) - (NAMED - 1)
            also = f" (and {named}" + (f" and {rest} more" if rest > 0 else "") + ")"
        return (
            f"{what}: the {first.where} {first.key}{also} is a mark of the ichor operator "
            f"({_meaning(first.key)}), and is {change} only by the operator, whose "
            f"decisions read it (the halts and suspensions of auto-patch); {step}"
        )
    if owners_changed(kind, new=new, old=before):
        return (
            f"{what}: the owner references of an operation the ichor operator started by "
            f"itself ({STARTED_BY_LABEL}) are the operator's (auto-patch counts a failed "
            f"operation its cluster owns to suspend that cluster and halt its version), "
            f"and are changed only by the operator; keep metadata.ownerReferences as they "
            f"are in the write"
        )
    return None
