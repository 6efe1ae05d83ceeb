"""A module's docstring says what the module is in a few lines; the reasons live in
docs/design/notes.md, and every pointer there names a section that exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NOTES = ROOT / "docs" / "design" / "notes.md"
LIMIT = 12

#: Modules allowed a longer docstring, with its length: none since every one was
#: shortened (a listed one may shrink, never grow, and leaves once within the limit).
LONGER: dict[str, int] = {}
POINTER = re.compile(r'docs/design/notes\.md, "([^"]+)"')


def docstring_lines(path: Path) -> int:
    """Lines the module docstring spans, its quotes included; 0 without one."""
    tree = ast.parse(path.read_text())
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        assert first.end_lineno is not None
        return first.end_lineno - first.lineno + 1
    return 0


def lengths() -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): docstring_lines(path)
        for path in sorted((ROOT / "ichor").rglob("*.py"))
    }


def test_module_docstrings_stay_within_the_limit() -> None:
    over = {
        name: lines
        for name, lines in lengths().items()
        if lines > LIMIT and lines > LONGER.get(name, 0)
    }
    assert not over, (
        f"module docstrings over {LIMIT} lines (move the reasons to docs/design/notes.md "
        f"and point there): {over}"
    )


def test_the_list_of_longer_ones_only_shrinks() -> None:
    found = lengths()
    within = sorted(name for name in LONGER if found.get(name, 0) <= LIMIT)
    assert not within, f"within the limit now, drop from LONGER: {within}"


def test_the_counter_counts_lines(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""One.\n\nTwo.\n"""\n\nX = 1\n')
    assert docstring_lines(module) == 4
    module.write_text("X = 1\n")
    assert docstring_lines(module) == 0


def test_every_pointer_into_the_notes_names_a_section() -> None:
    headings = set(re.findall(r"^#+ (.+)$", NOTES.read_text(), re.MULTILINE))
    missing = []
    for path in sorted((ROOT / "ichor").rglob("*.py")):
        for name in POINTER.findall(" ".join(path.read_text().split())):
            if not any(heading.startswith(name.rstrip(".")) for heading in headings):
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, f"pointers to no section of docs/design/notes.md: {missing}"
