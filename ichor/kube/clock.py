"""The operator's clock: now, in UTC, to the second, as the API server stores times.

Every controller reads it here, so a status written now and a time read back compare
equal, and one look at an object takes one reading of it.
"""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    """Now in UTC, without the microseconds the API server's times do not keep."""
    return datetime.now(UTC).replace(microsecond=0)
