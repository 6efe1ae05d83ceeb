"""A parse error quotes the input as Go's %q does, with Go's own table of printable
characters (committed as data from the oracle), so the message does not depend on the
Unicode version of the Python that runs the port."""

from __future__ import annotations

import itertools

import pytest

from ichor.release import go_printable
from ichor.release.versions import VersionError, parse


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # Go's %q names \a and \b (Python's repr and a naive port write \x07 and \x08)
        ("1.\a.0", 'Invalid character(s) found in minor number "\\a"'),
        ("1.2.\b", 'Invalid character(s) found in patch number "\\b"'),
        ("1.2.3-\x01", 'Invalid character(s) found in prerelease "\\x01"'),
        ("1.2.3-\x7f", 'Invalid character(s) found in prerelease "\\x7f"'),
        # (inside the text: Go's TrimSpace strips U+0085 and U+00A0 at the ends)
        ("1.2.3-\u0085x", 'Invalid character(s) found in prerelease "\\u0085x"'),
        ("1.2.3-\u00a0x", 'Invalid character(s) found in prerelease "\\u00a0x"'),
        ("1.2.3-\U000e0001", 'Invalid character(s) found in prerelease "\\U000e0001"'),
        # Unicode 15.0 additions: printable for Go 1.26 (Unicode 15), escaped by Python
        # 3.11's str.isprintable (Unicode 14); the port follows Go's table, not Python's.
        ("1.2.3-\U0001e030", 'Invalid character(s) found in prerelease "\U0001e030"'),
        ("1.2.3-\U00011f00", 'Invalid character(s) found in prerelease "\U00011f00"'),
        ("1.2.3-\U00031350", 'Invalid character(s) found in prerelease "\U00031350"'),
        # printable for both
        ("1.2.3-\u00e9", 'Invalid character(s) found in prerelease "\u00e9"'),
        ('1.2.3-"', 'Invalid character(s) found in prerelease "\\""'),
        ("1.2.3-\\", 'Invalid character(s) found in prerelease "\\\\"'),
    ],
)
def test_a_parse_error_quotes_as_gos_percent_q(text: str, reason: str) -> None:
    with pytest.raises(VersionError) as caught:
        parse(text)
    assert caught.value.detail == reason


def test_the_printable_table_is_gos_with_its_source() -> None:
    assert go_printable.GO_VERSION.startswith("go1.")
    assert go_printable.UNICODE_VERSION == "15.0.0"
    assert "make printable" in go_printable.SOURCE
    ranges = go_printable.RANGES
    assert all(lo <= hi for lo, hi in ranges)
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(ranges))
    assert ranges[0] == (0x20, 0x7E)
