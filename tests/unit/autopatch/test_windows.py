"""Maintenance windows with an injected clock: across midnight, both DST changes,
overlaps, and the values a window refuses (quoted back)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ichor.api.autopatch import Window
from ichor.controller.autopatch.windows import Schedule, WindowError, Windows, parse_duration


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def windows(*items: tuple[str, str, str]) -> Windows:
    read = Windows.read([Window(schedule=s, duration=d, time_zone=z) for s, d, z in items])
    assert read.problems == ()
    return read


def test_a_window_across_midnight_is_open_on_both_sides_and_closed_after() -> None:
    w = windows(("0 22 * * *", "4h", "UTC"))
    assert w.open_at(at("2026-06-01T21:59:59+00:00")) is None
    opened = w.open_at(at("2026-06-01T23:30:00+00:00"))
    assert opened is not None
    assert (opened.start, opened.end) == (
        at("2026-06-01T22:00:00+00:00"),
        at("2026-06-02T02:00:00+00:00"),
    )
    assert w.open_at(at("2026-06-02T01:59:59+00:00")) == opened
    assert w.open_at(at("2026-06-02T02:00:00+00:00")) is None  # the end is not inside
    nxt = w.next_after(at("2026-06-02T02:00:00+00:00"))
    assert nxt is not None
    assert nxt.start == at("2026-06-02T22:00:00+00:00")


def test_the_opening_minute_itself_is_inside() -> None:
    w = windows(("30 2 * * *", "1h", "UTC"))
    assert w.open_at(at("2026-06-01T02:30:00+00:00")) is not None
    assert w.open_at(at("2026-06-01T02:29:59.999999+00:00")) is None


def test_a_time_zone_shifts_the_window() -> None:
    w = windows(("0 2 * * *", "1h", "Europe/Berlin"))  # 02:00 CEST is 00:00 UTC in June
    assert w.open_at(at("2026-06-01T00:30:00+00:00")) is not None
    assert w.open_at(at("2026-06-01T02:30:00+00:00")) is None


def test_spring_forward_a_skipped_opening_opens_once_right_after_the_gap() -> None:
    # Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
    w = windows(("30 2 * * *", "2h", "Europe/Berlin"))
    opened = w.open_at(at("2026-03-29T03:10:00+02:00"))
    assert opened is not None
    assert opened.start == at("2026-03-29T03:00:00+02:00")
    assert opened.end == at("2026-03-29T05:00:00+02:00")  # two hours of elapsed time
    assert w.open_at(at("2026-03-29T01:59:00+01:00")) is None  # just before the gap
    # the next day is normal again
    nxt = w.next_after(at("2026-03-29T06:00:00+02:00"))
    assert nxt is not None
    assert nxt.start == at("2026-03-30T02:30:00+02:00")


def test_fall_back_a_repeated_opening_opens_once_and_the_duration_is_elapsed_time() -> None:
    # Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
    w = windows(("30 2 * * *", "1h", "Europe/Berlin"))
    first = w.open_at(at("2026-10-25T02:45:00+02:00"))
    assert first is not None
    assert first.start == at("2026-10-25T02:30:00+02:00")
    assert first.end == at(
        "2026-10-25T02:30:00+01:00"
    )  # 60 elapsed minutes, clock reads 02:30 again
    # the second 02:30 (CET) opens nothing: the window is closed from the first end on
    assert w.open_at(at("2026-10-25T02:45:00+01:00")) is None
    nxt = w.next_after(at("2026-10-25T02:45:00+01:00"))
    assert nxt is not None
    assert nxt.start == at("2026-10-26T02:30:00+01:00")


def test_fall_back_an_hourly_schedule_opens_at_both_two_oclocks() -> None:
    w = windows(("0 * * * *", "10m", "Europe/Berlin"))
    assert w.open_at(at("2026-10-25T02:05:00+02:00")) is not None
    assert w.open_at(at("2026-10-25T02:05:00+01:00")) is not None


def test_overlapping_windows_join_into_one_stretch() -> None:
    w = windows(("0 1 * * *", "2h", "UTC"), ("0 2 * * *", "3h", "UTC"))
    opened = w.open_at(at("2026-06-01T01:30:00+00:00"))
    assert opened is not None
    assert (opened.start, opened.end) == (
        at("2026-06-01T01:00:00+00:00"),
        at("2026-06-01T05:00:00+00:00"),
    )
    late = w.open_at(at("2026-06-01T04:59:00+00:00"))  # only the second one covers it now
    assert late is not None
    assert (late.start, late.end) == (
        at("2026-06-01T02:00:00+00:00"),
        at("2026-06-01T05:00:00+00:00"),
    )
    assert w.open_at(at("2026-06-01T05:00:00+00:00")) is None


def test_a_window_longer_than_its_period_is_one_bounded_stretch() -> None:
    w = windows(("*/10 * * * *", "30m", "UTC"))
    opened = w.open_at(at("2026-06-01T12:05:00+00:00"))
    assert opened is not None
    # never closes: cut at a week past now, not an endless loop
    assert opened.end - at("2026-06-01T12:05:00+00:00") <= timedelta(hours=168)


def test_a_weekday_window_skips_the_weekend() -> None:
    w = windows(("0 9 * * 1-5", "1h", "UTC"))
    nxt = w.next_after(at("2026-06-05T12:00:00+00:00"))  # a Friday
    assert nxt is not None
    assert nxt.start == at("2026-06-08T09:00:00+00:00")


@pytest.mark.parametrize(
    ("window", "words"),
    [
        (Window(schedule="@daily", duration="1h"), 'schedule "@daily" is not a five-field cron'),
        (Window(schedule="0 2 * *", duration="1h"), 'schedule "0 2 * *" is not a five-field'),
        (
            Window(schedule="0 2 * * * *", duration="1h"),
            'schedule "0 2 * * * *" is not a five-field',
        ),
        (
            Window(schedule="61 2 * * *", duration="1h"),
            'schedule "61 2 * * *" is refused: bad minute',
        ),
        (Window(schedule="0 24 * * *", duration="1h"), "bad hour"),
        (Window(schedule="0 2 * * 8", duration="1h"), "bad day-of-week"),
        (Window(schedule="0 0 31 2 *", duration="1h"), "bad day-of-month"),  # no such date
        (
            Window(schedule="0 2 * * *", duration="1h", time_zone="Mars/Olympus"),
            'timeZone "Mars/Olympus" is not a known IANA',
        ),
        (
            Window(schedule="0 2 * * *", duration="1h", time_zone="../../etc/passwd"),
            'timeZone "../../etc/passwd"',
        ),
        (Window(schedule="0 2 * * *", duration="1h", time_zone=""), 'timeZone ""'),
        (Window(schedule="0 2 * * *", duration="0m"), 'duration "0m" must be longer than 0'),
        (Window(schedule="0 2 * * *", duration="0h0m"), 'duration "0h0m" must be longer than 0'),
        (
            Window(schedule="0 2 * * *", duration="169h"),
            'duration "169h" must be longer than 0 and at most 168h',
        ),
        (Window(schedule="0 2 * * *", duration="1d"), 'duration "1d" is not a duration'),
        (Window(schedule="0 2 * * *", duration=""), 'duration "" is not a duration'),
        (Window(schedule="0 2 * * *" + " " * 10_000 + "x", duration="1h"), "is not a five-field"),
    ],
)
def test_a_bad_window_is_refused_quoting_the_value(window: Window, words: str) -> None:
    with pytest.raises(WindowError) as raised:
        Schedule.read(window)
    assert words in str(raised.value)
    read = Windows.read([Window(schedule="0 1 * * *", duration="1h"), window])
    assert len(read.schedules) == 1
    assert read.problems[0].startswith("window 2: ")


def test_a_huge_value_is_quoted_cut() -> None:
    with pytest.raises(WindowError) as raised:
        Schedule.read(Window(schedule="x" * 100_000, duration="1h"))
    assert len(str(raised.value)) < 400


@pytest.mark.parametrize(("text", "minutes"), [("4h", 240), ("90m", 90), ("1h30m", 90), ("0m", 0)])
def test_durations_in_hours_and_minutes(text: str, minutes: int) -> None:
    assert parse_duration(text, field="duration") == timedelta(minutes=minutes)


def test_fall_back_after_the_first_pass_closed_the_window_stays_closed() -> None:
    # Europe/Berlin, 2026-10-25: the window opened at the first 02:30 (CEST) and closed an
    # hour later; at 03:10 CET it is closed, at 02:10 CET it is open until 02:30 CET.
    w = windows(("30 2 * * *", "1h", "Europe/Berlin"))
    assert w.open_at(at("2026-10-25T03:10:00+01:00")) is None
    opened = w.open_at(at("2026-10-25T02:10:00+01:00"))
    assert opened is not None
    assert (opened.start, opened.end) == (
        at("2026-10-25T02:30:00+02:00"),
        at("2026-10-25T02:30:00+01:00"),
    )
    nxt = w.next_after(at("2026-10-25T03:10:00+01:00"))
    assert nxt is not None
    assert nxt.start == at("2026-10-26T02:30:00+01:00")


def test_fall_back_new_york_a_sunday_window_is_closed_after_its_two_hours() -> None:
    # America/New_York, 2026-11-01: 01:30 EDT opens, 2h of elapsed time end at 02:30 EST.
    w = windows(("30 1 * * 0", "2h", "America/New_York"))
    assert w.open_at(at("2026-11-01T03:20:00-05:00")) is None
    opened = w.open_at(at("2026-11-01T01:20:00-05:00"))  # the second 01:20
    assert opened is not None
    assert (opened.start, opened.end) == (
        at("2026-11-01T01:30:00-04:00"),
        at("2026-11-01T02:30:00-05:00"),
    )


def test_fall_back_every_opening_of_the_first_pass_counts_from_the_second() -> None:
    # 02:00, 02:20, 02:40 CEST open; from 02:10 CET, the last opening is 02:40 CEST
    w = windows(("0,20,40 2 * * *", "1h", "Europe/Berlin"))
    opened = w.open_at(at("2026-10-25T02:10:00+01:00"))
    assert opened is not None
    assert opened.end == at("2026-10-25T02:40:00+01:00")
