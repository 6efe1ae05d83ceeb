"""Parsers for the three headers the tag lister acts on: WWW-Authenticate, Link, Retry-After.

Pure functions, no I/O, so they are tested on their own with the odd inputs registries
send (quoted commas in a scope, several challenges, relative links, HTTP dates). They
return ``None`` for what they cannot read instead of guessing; the lister turns that into a
typed error.
"""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass, field

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM = re.compile(
    rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))\s*(?:,|$)',
)
_SCHEME = re.compile(rf"\s*({_TOKEN})(?:\s+|$)")


@dataclass(frozen=True)
class Challenge:
    """One auth challenge: its scheme (lower case) and parameters (keys lower case)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def realm(self) -> str | None:
        return self.params.get("realm")


def parse_challenges(header: str) -> list[Challenge]:
    """Parse a WWW-Authenticate value (RFC 9110 §11.6.1) into its challenges.

    ``Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull"``
    gives one challenge; parameters with quoted commas (``scope="repository:x:pull,push"``)
    stay whole. Unreadable input gives the challenges read so far.
    """
    challenges: list[Challenge] = []
    pos = 0
    while pos < len(header):
        while pos < len(header) and header[pos] in " ,":
            pos += 1
        scheme_match = _SCHEME.match(header, pos)
        if scheme_match is None:
            break
        scheme = scheme_match.group(1).lower()
        pos = scheme_match.end()
        params: dict[str, str] = {}
        while pos < len(header):
            param = _PARAM.match(header, pos)
            if param is None:
                break
            key, quoted, token = param.group(1), param.group(2), param.group(3)
            value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else token
            params[key.lower()] = value
            pos = param.end()
        challenges.append(Challenge(scheme=scheme, params=params))
    return challenges


_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^,;<>]+)*)")
_LINK_PARAM = re.compile(r';\s*([A-Za-z0-9*!#$&+\-.^_`|~]+)\s*=\s*(?:"([^"]*)"|([^;,\s]+))')


def next_link(header: str) -> str | None:
    """The target of the ``rel="next"`` link of a Link header value (RFC 8288), as given.

    The distribution registry sends ``</v2/a/b/tags/list?last=x&n=100>; rel="next"``; the
    caller resolves the target against the response URL. ``rel`` may list several relation
    types (``rel="next last"``).
    """
    for match in _LINK.finditer(header):
        target, params = match.group(1), match.group(2)
        for param in _LINK_PARAM.finditer(params):
            if param.group(1).lower() != "rel":
                continue
            rels = (param.group(2) if param.group(2) is not None else param.group(3)).split()
            if "next" in (rel.lower() for rel in rels):
                return target.strip()
    return None


def retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds to wait from a Retry-After value: delay-seconds or an HTTP date (``now`` is
    the current POSIX time). ``None`` when absent or unreadable; never negative."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)
