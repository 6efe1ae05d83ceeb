"""Maintenance windows: when one is open, and when the next one opens. Pure.

A window opens at each time its five-field cron ``schedule`` names, in its IANA
``timeZone`` (``zoneinfo`` with ``tzdata``), read by ``cronsim`` as Debian's cron reads it
across a change of the clock, and stays open for ``duration`` of elapsed time. Windows
that overlap make one open stretch.

More in docs/design/notes.md, "ichor/controller/autopatch/windows.py".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ichor.api.autopatch import MAX_WINDOW_HOURS, Window

_DURATION = re.compile(r"([0-9]{1,4}h)?([0-9]{1,6}m)?")
#: The longest text quoted back in a message.
_QUOTE = 64
#: The openings a walk may pass over before the first on the right side of its start:
#: those of a repeated stretch of the clock (a few hours of minutes at most).
_PASSED_OVER = 4 * 60 + 2


class WindowError(ValueError):
    """A window that cannot be read; the message quotes the value and says the form."""


def _quote(value: str) -> str:
    return f'"{value}"' if len(value) <= _QUOTE else f'"{value[:_QUOTE]}..."'


def parse_duration(text: str, *, field: str) -> timedelta:
    """``4h``, ``90m``, ``1h30m`` (hours and minutes only, as the CRD accepts)."""
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        raise WindowError(
            f"{field} {_quote(text)} is not a duration in hours and minutes such as 4h, 90m "
            "or 1h30m"
        )
    hours = int(match[1][:-1]) if match[1] else 0
    minutes = int(match[2][:-1]) if match[2] else 0
    return timedelta(hours=hours, minutes=minutes)


@dataclass(frozen=True)
class Schedule:
    """A window read: its cron, zone and length."""

    schedule: str
    zone: ZoneInfo
    duration: timedelta

    @classmethod
    def read(cls, window: Window) -> Schedule:
        """The window, or ``WindowError`` naming the field, the value and the form."""
        fields = window.schedule.split()
        if len(fields) != 5:
            raise WindowError(
                f"schedule {_quote(window.schedule)} is not a five-field cron schedule "
                '(minute hour day-of-month month day-of-week), for example "0 2 * * 6"'
            )
        expression = " ".join(fields)
        try:
            CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as error:
            raise WindowError(
                f"schedule {_quote(window.schedule)} is refused: {str(error).lower()} "
                "(the five fields are minute hour day-of-month month day-of-week, for example "
                '"0 2 * * 6")'
            ) from None
        try:
            zone = ZoneInfo(window.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise WindowError(
                f"timeZone {_quote(window.time_zone)} is not a known IANA time zone, such as "
                "Europe/Berlin or UTC"
            ) from None
        duration = parse_duration(window.duration, field="duration")
        if duration <= timedelta(0) or duration > timedelta(hours=MAX_WINDOW_HOURS):
            raise WindowError(
                f"duration {_quote(window.duration)} must be longer than 0 and at most "
                f"{MAX_WINDOW_HOURS}h"
            )
        return cls(schedule=expression, zone=zone, duration=duration)

    def _starts(self, after: datetime, *, reverse: bool = False) -> datetime | None:
        """The first opening strictly after (or with ``reverse``, strictly before)
        ``after``, compared in UTC.

        cronsim reads a schedule with a fixed minute and hour on the wall clock, without
        the fold: from a moment in the second pass of a repeated hour it walks forward
        from the wall time and may meet an opening of the first pass, which is earlier
        than ``after`` (those are passed over), and walking back it starts from that
        wall time and misses the openings of the first pass after it. So a reverse walk
        from the second pass starts from the same wall time read at the first pass's
        offset, that is later on the clock, and passes over what is not before ``after``.
        """
        local = after.astimezone(self.zone)
        origin = local
        if reverse:
            ahead = local.replace(fold=0).utcoffset()
            behind = local.utcoffset()
            if ahead is not None and behind is not None and ahead > behind:
                origin = local + (ahead - behind)  # wall-clock arithmetic: the same zone
        try:
            walk = CronSim(self.schedule, origin, reverse=reverse)
            # Bounded: what is passed over lies in a repeated stretch of the clock, at
            # most a few hours of minutes.
            for _ in range(_PASSED_OVER):
                found = next(walk).astimezone(UTC)
                if (found < after) if reverse else (found > after):
                    return found
        except (StopIteration, CronSimError):
            return None  # a schedule that names no date (30 February)
        return None

    def covering(self, now: datetime) -> Interval | None:
        """The stretch of this window's openings that holds ``now``, or None."""
        first = self._starts(now - self.duration)
        if first is None or first > now:
            return None
        last = self._starts(now + timedelta(microseconds=1), reverse=True)
        # ``first`` opened and holds ``now``: the last opening is never before it
        last = first if last is None else max(first, last)
        return Interval(start=first, end=last + self.duration)

    def last_start_before(self, moment: datetime) -> datetime | None:
        return self._starts(moment, reverse=True)

    def next_start(self, now: datetime) -> Interval | None:
        start = self._starts(now)
        return None if start is None else Interval(start=start, end=start + self.duration)


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Windows:
    """The windows of one cluster, read; ``problems`` quotes each that could not be."""

    schedules: tuple[Schedule, ...]
    problems: tuple[str, ...]

    @classmethod
    def read(cls, windows: Sequence[Window]) -> Windows:
        schedules: list[Schedule] = []
        problems: list[str] = []
        for number, window in enumerate(windows, start=1):
            try:
                schedules.append(Schedule.read(window))
            except WindowError as error:
                problems.append(f"window {number}: {error}")
        return cls(schedules=tuple(schedules), problems=tuple(problems))

    def open_at(self, now: datetime) -> Interval | None:
        """The open stretch holding ``now`` (overlapping windows joined), or None."""
        found = [c for s in self.schedules if (c := s.covering(now)) is not None]
        if not found:
            return None
        start, end = min(c.start for c in found), max(c.end for c in found)
        # A window that opens before the stretch closes extends it. Bounded: each round
        # moves the end by at least a minute, and a stretch that keeps growing is cut at
        # a week past now (a set of windows that is never closed).
        limit = now + timedelta(hours=MAX_WINDOW_HOURS)
        for _ in range(64):
            extended = end
            for schedule in self.schedules:
                last = schedule.last_start_before(end)
                if last is not None and last + schedule.duration > extended:
                    extended = last + schedule.duration
            if extended == end or extended >= limit:
                end = min(extended, limit)
                break
            end = extended
        return Interval(start=start, end=end)

    def next_after(self, now: datetime) -> Interval | None:
        """The next window to open after ``now`` (the earliest; its stretch's end)."""
        upcoming = [n for s in self.schedules if (n := s.next_start(now)) is not None]
        if not upcoming:
            return None
        first = min(upcoming, key=lambda n: n.start)
        return self.open_at(first.start) or first
