"""The CLI's own argument types: durations as kubectl, helm and flux write them, and
the form of a VERSION argument, each refused in the project's words.

``--timeout`` takes a duration (``30m``, ``90s``, ``1h30m``, ``1.5h``, ``500ms``). A bare
number is still read as seconds, with a warning that names the form: the flag took
seconds before, and a script written then should keep working while it is changed.

A VERSION is checked for its form only (the rules are the server's); a text that is not
one is refused with the form to write, never with the parser's reason (the tolerant
parse of blang/semver, which the rules need, speaks of "major number" and Go quoting).
"""

from __future__ import annotations

import re
from typing import Any

import click

from ichor.release.versions import VersionError, parse

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_BARE = re.compile(r"\d+(?:\.\d+)?")
FORM = "a duration such as 90s, 30m or 1h30m"


class DurationError(ValueError):
    """A text that is not a duration."""


def parse_duration(text: str) -> tuple[float, bool]:
    """Seconds of ``text`` and whether it was a bare number (read as seconds).

    ``"1h30m"`` is ``(5400.0, False)``; ``"45"`` is ``(45.0, True)``. Raises
    ``DurationError`` for anything else and for a duration that is not more than zero.
    """
    value = text.strip()
    if _BARE.fullmatch(value):
        seconds, bare = float(value), True
    else:
        position, seconds, bare = 0, 0.0, False
        for match in _PART.finditer(value):
            if match.start() != position:
                break
            seconds += float(match[1]) * _SECONDS[match[2]]
            position = match.end()
        if not value or position != len(value):
            raise DurationError(f"{text!r} is not {FORM}")
    if seconds <= 0:
        raise DurationError(f"{text!r} is not more than zero")
    return seconds, bare


def format_duration(seconds: float) -> str:
    """``5400`` as ``1h30m``, ``90`` as ``1m30s`` (whole seconds)."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


class Duration(click.ParamType[float, Any]):
    """A ``--timeout`` value: seconds, from a duration (or a bare number, with a warning)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float | int) and not isinstance(value, bool):
            return float(value)
        flag = param.opts[0] if param is not None and param.opts else "the value"
        try:
            seconds, bare = parse_duration(str(value))
        except DurationError as error:
            self.fail(f"{error}: write {FORM}", param, ctx)
        if bare:
            click.echo(
                f"Warning: {flag} {value} is read as {format_duration(seconds)}; write a "
                f"duration ({FORM}): a bare number will be refused by a later release.",
                err=True,
            )
        return seconds


DURATION = Duration()


def version_form(text: str, *, hint: str = "VERSION") -> str:
    """``text`` as the CLI sends it (``v`` added), once it has the form of a version;
    else a usage error that says the form in the project's words."""
    try:
        parse(text)
    except VersionError:
        raise click.BadParameter(
            f"{text[:80]!r} is not a version: write vX.Y.Z, for example v1.14.3",
            param_hint=hint,
        ) from None
    return text if text.startswith("v") else f"v{text}"
