"""Whether the recorded list can be used, and the reason a person sees when not."""

from __future__ import annotations

import pytest

from ichor.upgrade.choices import Availability, Unavailable, availability


@pytest.mark.parametrize(
    ("check_enabled", "recorded", "error", "available", "cause", "says"),
    [
        (True, True, None, True, None, None),
        (False, True, None, False, Unavailable.CHECK_OFF, "the release check is off"),
        (False, False, "boom", False, Unavailable.CHECK_OFF, "the release check is off"),
        (True, False, None, False, Unavailable.NOT_RECORDED, "no release list has been recorded"),
        (
            True,
            True,
            "403 from ghcr.io",
            True,
            Unavailable.LISTING_FAILED,
            "the last release listing failed (403 from ghcr.io), so the list may be stale",
        ),
        (
            True,
            False,
            "timeout",
            False,
            Unavailable.LISTING_FAILED,
            "the release listing failed (timeout)",
        ),
    ],
)
def test_availability_says_why_a_list_cannot_be_used_or_may_be_stale(
    check_enabled: bool,
    recorded: bool,
    error: str | None,
    available: bool,
    cause: Unavailable | None,
    says: str | None,
) -> None:
    result = availability(check_enabled=check_enabled, recorded=recorded, error=error)
    assert result.available is available
    assert result.cause is cause
    if says is None:
        assert result == Availability(available=True)
    else:
        assert result.reason is not None
        assert says in result.reason
