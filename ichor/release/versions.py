"""Versions as Talos machinery reads them, and the forms Ichor accepts in its fields.

``parse`` reproduces blang/semver v4.0.0's tolerant parse that machinery uses, and
rejects what it rejects with the same reason. The form checks are stricter on purpose: a
spec field is written in full (``vX.Y.Z``, contract ``vX.Y``) and an upgrade target is a
final release. Anything that is not a version raises ``VersionError`` quoting the input
and naming the form expected.

More in docs/design/notes.md, "ichor/release/versions.py".
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from ichor.release import go_printable

__all__ = [
    "Version",
    "VersionError",
    "check_contract",
    "check_final",
    "check_spec_version",
    "parse",
]

_UINT64_MAX = 2**64 - 1
#: Digits of the largest uint64. A longer number is out of range, and is refused before
#: ``int()``, which raises a plain ValueError past Python's digit limit (4,300).
_UINT64_DIGITS = len(str(_UINT64_MAX))
_DIGITS = frozenset("0123456789")
_ALPHANUM = frozenset("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
# Go's strings.TrimSpace trims unicode.IsSpace, which is narrower than str.strip()
# (Python also strips the ASCII separators U+001C..U+001F).
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_FULL = re.compile(
    r"v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)
_FINAL = re.compile(r"v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_CONTRACT = re.compile(r"v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")


class VersionError(ValueError):
    """A text that is not a version in the form a rule or a field expects.

    ``text`` is the input as given, ``expected`` the form asked for, and ``detail`` the
    reason blang/semver gives for a string its tolerant parse rejects (empty when the
    text parses but has the wrong form for a field).
    """

    def __init__(self, text: str, *, expected: str, detail: str = "", field: str = "") -> None:
        self.text = text
        self.expected = expected
        self.detail = detail
        self.field = field
        subject = f"{field} {text!r}" if field else repr(text)
        because = f" ({detail})" if detail else ""
        super().__init__(f"{subject} is not {expected}{because}")


_PreKey = tuple[tuple[int, int, str], ...]
_Key = tuple[int, int, int, tuple[int, _PreKey]]


def _pre_key(pre: tuple[str, ...]) -> _PreKey:
    # Numeric identifiers sort numerically and before alphanumeric ones (SemVer 2.0 §11).
    return tuple((0, int(p), "") if p.isascii() and p.isdigit() else (1, 0, p) for p in pre)


@dataclass(frozen=True, slots=True, eq=False)
class Version:
    """A parsed version: ordering and equality follow SemVer precedence.

    Build metadata is kept for printing but, as in SemVer and in machinery's denied-list
    check, it takes no part in ordering or equality: ``1.0.0+a == 1.0.0+b``.
    """

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = ()
    _key: _Key = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # A release sorts after its pre-releases: (1, ()) > (0, anything).
        pre = (0, _pre_key(self.prerelease)) if self.prerelease else (1, ())
        object.__setattr__(self, "_key", (self.major, self.minor, self.patch, pre))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    @property
    def tag(self) -> str:
        """The registry tag and spec form: ``v`` then the normalised print."""
        return "v" + str(self)

    @property
    def core(self) -> tuple[int, int, int]:
        """(major, minor, patch): what machinery's range checks compare."""
        return (self.major, self.minor, self.patch)

    @property
    def minor_key(self) -> tuple[int, int]:
        """(major, minor): what selects a table row."""
        return (self.major, self.minor)

    @property
    def is_final(self) -> bool:
        return not self.prerelease and not self.build

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key == other._key

    def __lt__(self, other: Version) -> bool:
        return self._key < other._key

    def __le__(self, other: Version) -> bool:
        return self._key <= other._key

    def __gt__(self, other: Version) -> bool:
        return self._key > other._key

    def __ge__(self, other: Version) -> bool:
        return self._key >= other._key


def _uint(part: str, what: str) -> int:
    """Go's strict part checks then strconv.ParseUint(part, 10, 64)."""
    if any(c not in _DIGITS for c in part):
        raise _Reject(f"Invalid character(s) found in {what} number {_goquote(part)}")
    if len(part) > 1 and part[0] == "0":
        raise _Reject(
            f"{what.capitalize()} number must not contain leading zeroes {_goquote(part)}"
        )
    if not part:
        raise _Reject('strconv.ParseUint: parsing "": invalid syntax')
    if len(part) > _UINT64_DIGITS or int(part) > _UINT64_MAX:
        raise _Reject(f"strconv.ParseUint: parsing {_goquote(part)}: value out of range")
    return int(part)


class _Reject(Exception):
    """blang/semver's reason for rejecting a string (internal)."""


_PRINTABLE_STARTS = tuple(first for first, _ in go_printable.RANGES)
_GO_NAMED = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def _go_printable(code: int) -> bool:
    """strconv.IsPrint, from the table the oracle's Go wrote (``go_printable``), not
    ``str.isprintable``, which follows the Unicode version of the running Python."""
    index = bisect_right(_PRINTABLE_STARTS, code) - 1
    return index >= 0 and code <= go_printable.RANGES[index][1]


def _goquote(text: str) -> str:
    """Go's %q (strconv.Quote) of the text blang/semver's messages quote."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif _go_printable(code):
            out.append(ch)
        elif ch in _GO_NAMED:
            out.append(_GO_NAMED[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            # No UTF-8 string holds a surrogate: Go sees its three bytes, each invalid,
            # and writes each as \xHH.
            out.extend(f"\\x{byte:02x}" for byte in ch.encode("utf-8", "surrogatepass"))
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _strict(text: str) -> Version:
    """blang/semver v4.0.0 Parse (the strict half of ParseTolerant)."""
    if not text:
        raise _Reject("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise _Reject("No Major.Minor.Patch elements found")
    major = _uint(parts[0], "major")
    minor = _uint(parts[1], "minor")
    rest, pre, build = _split_meta(parts[2])
    patch = _uint(rest, "patch")
    _check_prerelease(pre)
    _check_build(build)
    return Version(major, minor, patch, tuple(pre), tuple(build))


def _split_meta(rest: str) -> tuple[str, list[str], list[str]]:
    """The patch text, the pre-release and the build identifiers of ``rest`` (what
    follows the minor): the build after the first ``+``, the pre-release after the first
    ``-`` before it."""
    build: list[str] = []
    pre: list[str] = []
    plus = rest.find("+")
    if plus != -1:
        build = rest[plus + 1 :].split(".")
        rest = rest[:plus]
    dash = rest.find("-")
    if dash != -1:
        pre = rest[dash + 1 :].split(".")
        rest = rest[:dash]
    return rest, pre, build


def _check_prerelease(pre: list[str]) -> None:
    """blang's checks of the pre-release identifiers: none empty, numeric ones without a
    leading zero and within uint64, the others alphanumeric or ``-``."""
    for ident in pre:
        if not ident:
            raise _Reject("Prerelease is empty")
        if all(c in _DIGITS for c in ident):
            if len(ident) > 1 and ident[0] == "0":
                raise _Reject(
                    "Numeric PreRelease version must not contain leading zeroes " + _goquote(ident)
                )
            if len(ident) > _UINT64_DIGITS or int(ident) > _UINT64_MAX:
                raise _Reject(f"strconv.ParseUint: parsing {_goquote(ident)}: value out of range")
        elif any(c not in _ALPHANUM for c in ident):
            raise _Reject(f"Invalid character(s) found in prerelease {_goquote(ident)}")


def _check_build(build: list[str]) -> None:
    """blang's checks of the build identifiers: none empty, each alphanumeric or ``-``."""
    for ident in build:
        if not ident:
            raise _Reject("Build meta data is empty")
        if any(c not in _ALPHANUM for c in ident):
            raise _Reject(f"Invalid character(s) found in build meta data {_goquote(ident)}")


def blang_parse_tolerant(text: str) -> Version:
    """blang/semver v4.0.0 ParseTolerant; raises ``_Reject`` with blang's reason."""
    s = text.strip(_GO_SPACE)
    if s.startswith("v"):
        s = s[1:]
    parts = s.split(".", 2)
    for i, part in enumerate(parts):
        if len(part.encode("utf-8", "surrogatepass")) > 1:  # Go counts bytes
            stripped = part.lstrip("0")
            if not stripped or stripped[0] not in _DIGITS:
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        last = parts[-1]
        if "+" in last or "-" in last:
            raise _Reject("Short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return _strict(".".join(parts))


def _parse(text: str) -> Version:
    """Machinery's tolerant parse (blang/semver v4.0.0). Raises ``VersionError``.

    ``parse("v1.14")`` is ``1.14.0``; ``parse("1.14-alpha.0")`` is refused.
    """
    fast = _FINAL.fullmatch(text)
    if fast is not None and all(len(g) <= _UINT64_DIGITS for g in fast.groups()):
        major, minor, patch = (int(g) for g in fast.groups())
        if max(major, minor, patch) <= _UINT64_MAX:
            return Version(major, minor, patch)
    try:
        return blang_parse_tolerant(text)
    except _Reject as reject:
        raise VersionError(text, expected="a version", detail=str(reject)) from None


class _Parse(Protocol):
    """``parse``'s type: a cache whose callers must pass text (``lru_cache`` alone would
    let mypy accept any hashable argument, an observed ``Unreadable`` among them)."""

    def __call__(self, text: str) -> Version: ...

    def cache_clear(self) -> None: ...


parse: _Parse = lru_cache(maxsize=65536)(_parse)


def as_version(value: str | Version) -> Version:
    """A ``Version`` as given, or the tolerant parse of a string."""
    return value if isinstance(value, Version) else parse(value)


def check_spec_version(value: str, *, field: str) -> Version:
    """A spec version field: full ``vX.Y.Z`` (pre-release and build allowed by form)."""
    match = _FULL.fullmatch(value)
    if match is None:
        raise VersionError(
            value, expected="a full version vX.Y.Z, for example v1.14.3", field=field
        )
    try:
        return parse(value)
    except VersionError as error:
        raise VersionError(
            value,
            expected="a full version vX.Y.Z, for example v1.14.3",
            detail=error.detail,
            field=field,
        ) from None


def check_contract(value: str) -> tuple[int, int]:
    """A version contract: ``vX.Y`` exactly."""
    match = _CONTRACT.fullmatch(value)
    if match is None:
        raise VersionError(
            value, expected="a version contract vX.Y, for example v1.14", field="versionContract"
        )
    digits = (match.group(1), match.group(2))
    if any(len(d) > _UINT64_DIGITS for d in digits) or max(map(int, digits)) > _UINT64_MAX:
        raise VersionError(
            value,
            expected="a version contract vX.Y, for example v1.14",
            detail="number out of range",
            field="versionContract",
        )
    return (int(digits[0]), int(digits[1]))


def check_final(value: str, *, field: str) -> Version:
    """An upgrade target: a final ``vX.Y.Z`` (no pre-release, no build, not ``vX.Y``)."""
    expected = "a final release vX.Y.Z (no pre-release, no build), for example v1.14.3"
    if value.startswith("v") and _FINAL.fullmatch(value):
        try:
            return parse(value)
        except VersionError as error:
            raise VersionError(value, expected=expected, detail=error.detail, field=field) from None
    raise VersionError(value, expected=expected, field=field)
