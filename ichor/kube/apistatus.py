"""The Status an API server answers a failed call with (``metav1.Status``), read once.

The operator (kubernetes.aio) and the CLI (kubernetes) read the same body: its
message, and the types of the causes it carries (``details.causes[].reason``, a
StatusCause's type: Ichor's webhook names there a refusal ``override: true`` would
pass). Pure, and cheap to import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ApiStatus:
    """What a failed call's answer says: its sentence, and the types of its causes."""

    message: str
    causes: frozenset[str] = frozenset()


def read(body: object, *, status: object = None, reason: object = None) -> ApiStatus:
    """The Status in ``body`` (an exception's body: text, bytes or None); without a
    message in it, the HTTP ``status`` and ``reason``."""
    try:
        data = json.loads(body) if isinstance(body, str | bytes) and body else None
    except ValueError:
        data = None
    data = data if isinstance(data, Mapping) else {}
    message = data.get("message")
    details = data.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return ApiStatus(
        message=str(message) if message else f"{status or ''} {reason or ''}".strip(),
        causes=frozenset(
            str(cause["reason"])
            for cause in (causes if isinstance(causes, list) else ())
            if isinstance(cause, Mapping) and isinstance(cause.get("reason"), str)
        ),
    )
