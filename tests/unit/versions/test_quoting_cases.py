"""The differential test's quoting cases come from committed data, not from the Python that
runs them.

The cases are the code points where Go's %q (the committed ``go_printable`` table, which
the differential test holds equal to the oracle's) and Unicode 14's notion of printable
(Python 3.11's ``str.isprintable``, committed as ``tests/differential/unicode14_printable``)
disagree: the characters Unicode 15.0 added. Computed from the running Python's
``str.isprintable`` they would vanish on a Python of Unicode 15 (3.12 and later), and the
differential test would pass without asking the oracle about one of them.
"""

from __future__ import annotations

import ast
import inspect
import unicodedata

from ichor.release import go_printable
from tests.differential import cases, unicode14_printable

#: Unicode 15.0's additions that Go 1.26 prints (and Python 3.11 escapes).
UNICODE_15_PRINTABLE_ADDITIONS = 4_482


def _points(ranges: tuple[tuple[int, int], ...]) -> set[int]:
    found: set[int] = set()
    for first, last in ranges:
        found.update(range(first, last + 1))
    return found


def test_the_cases_are_the_committed_tables_difference() -> None:
    go = _points(go_printable.RANGES)
    reference = _points(unicode14_printable.RANGES)
    differ = go ^ reference
    assert len(differ) == UNICODE_15_PRINTABLE_ADDITIONS
    assert reference <= go, "Go 1.26 prints every character Unicode 14 calls printable"
    texts = cases.quoting()
    assert len(texts) == 3 * (len(cases.ESCAPED) + len(differ))
    quoted = {ord(text[2]) for text in texts if text.startswith("1.") and text.endswith(".0")}
    assert quoted == differ | {ord(ch) for ch in cases.ESCAPED}


def test_the_cases_never_ask_the_running_python() -> None:
    """No call of ``isprintable`` and no ``unicodedata`` in the code of the cases."""
    tree = ast.parse(inspect.getsource(cases))
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert "isprintable" not in names
    assert "unicodedata" not in names | imported


def test_the_reference_is_unicode_14s_printable() -> None:
    """Written by `make printable` from a Python of Unicode 14.0.0 (3.11), and kept as it
    is on another; on such a Python it is that Python's ``str.isprintable``."""
    assert unicode14_printable.UNICODE_VERSION == "14.0.0"
    if unicodedata.unidata_version == unicode14_printable.UNICODE_VERSION:
        here = {
            code
            for code in range(0x110000)
            if not 0xD800 <= code <= 0xDFFF and chr(code).isprintable()
        }
        assert here == _points(unicode14_printable.RANGES)
