"""Events owed by stored state: an Event a controller decided is stored with the decision,
posted after it under a name its key fixes, then removed. Pure shapes.

A controller's Event used to be posted after the status write that made it true: an
operator killed between the two lost it, and a restart had nothing to post it from. Now
the status write itself carries the Event (``status.pendingEvents``, a map from key to
``OwedEvent``; an operation the operator creates carries it in ``OWED_ANNOTATION`` from its
create on). The controller posts each entry with the name ``event_name`` gives, so a post
repeated after a restart meets the first one (409) instead of making a second, then
removes the entries it posted. docs/design/notes.md says why a name rather than a count.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError

from ichor.api._base import ApiModel

#: The status field holding the Events a status owes.
FIELD = "pendingEvents"
#: On an object the operator creates (an operation auto-patch starts): the Events its
#: create owes, as JSON in the same map shape. An operator's mark (``ichor.api.marks``).
OWED_ANNOTATION = "ichor.dev/owed-events"
#: Hex characters of a key (64 bits: no two owed Events of one cluster meet).
KEY_LENGTH = 16
#: The longest Event message the API takes (core/v1 Event ``message``).
MESSAGE_LIMIT = 1024
#: At most this many wait on one object: past it the oldest go (logged). Only an
#: operator that cannot post at all for long gets there.
MOST = 32
#: The longest Event name (a DNS subdomain).
NAME_LIMIT = 253

#: What an owed Event may be about besides the object holding it.
About = Literal["TalosCluster"]
CLUSTER: About = "TalosCluster"


class OwedEvent(ApiModel):
    """One Event decided and not yet posted."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    #: When it was decided: the Event's time, even when a restart posts it later.
    at: datetime
    #: None: about the object holding it; ``TalosCluster``: about the TalosCluster its
    #: spec names (an operation's cluster).
    about: About | None = None


def key(*parts: str) -> str:
    """The key of an owed Event: a hash of what makes it one (the holder's uid, the
    reason, and what tells two of one reason apart)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:KEY_LENGTH]


def owe(
    type_: str,
    reason: str,
    message: str,
    *,
    at: datetime,
    about: About | None = None,
) -> OwedEvent:
    """An owed Event (``type_``: ``Warning``, else ``Normal``), its message cut to what
    the API takes."""
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    kind: Literal["Normal", "Warning"] = "Warning" if type_ == "Warning" else "Normal"
    return OwedEvent(type=kind, reason=reason, message=message, at=at.astimezone(UTC), about=about)


def event_name(involved: str, owed_key: str) -> str:
    """The Event's name: the involved object's name and the key (as client-go names an
    Event ``<name>.<suffix>``), so a second create of the same owed Event meets 409."""
    head = involved[: NAME_LIMIT - len(owed_key) - 1].rstrip(".-") or "object"
    return f"{head}.{owed_key}"


def _entries(raw: object) -> dict[str, OwedEvent]:
    found: dict[str, OwedEvent] = {}
    if not isinstance(raw, Mapping):
        return found
    for name, value in raw.items():
        if not isinstance(name, str) or value is None:
            continue
        try:
            found[name] = OwedEvent.model_validate(value)
        except (ValidationError, TypeError):
            continue  # not one this operator wrote: nothing to post
    return found


def pending(status: object) -> dict[str, OwedEvent]:
    """The owed Events of a raw status (``status.pendingEvents``)."""
    return _entries(status.get(FIELD) if isinstance(status, Mapping) else None)


def annotated(annotations: Mapping[str, Any] | None) -> dict[str, OwedEvent]:
    """The owed Events of an object's ``OWED_ANNOTATION``."""
    raw = (annotations or {}).get(OWED_ANNOTATION)
    if not isinstance(raw, str):
        return {}
    try:
        return _entries(json.loads(raw))
    except ValueError:
        return {}


def dump(entries: Mapping[str, OwedEvent]) -> str:
    """``OWED_ANNOTATION``'s value for ``entries``."""
    return json.dumps(
        {k: v.to_api() for k, v in entries.items()},
        separators=(",", ":"),
        sort_keys=True,
    )


def merged(
    kept: Mapping[str, OwedEvent] | None, added: Mapping[str, OwedEvent]
) -> dict[str, OwedEvent] | None:
    """``kept`` with ``added``, at most ``MOST`` (the newest); None when empty."""
    entries = {**(kept or {}), **added}
    if len(entries) > MOST:
        newest = sorted(entries.items(), key=lambda item: item[1].at)[-MOST:]
        entries = dict(newest)
    return entries or None


def in_order(entries: Mapping[str, OwedEvent]) -> list[tuple[str, OwedEvent]]:
    """The entries in the order they were decided (then by key)."""
    return sorted(entries.items(), key=lambda item: (item[1].at, item[0]))
