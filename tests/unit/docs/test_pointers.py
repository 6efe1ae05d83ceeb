"""The project speaks of itself only: no text of the tree points at a text outside the
repository (a decision record, fact sheets or issues kept elsewhere).

What such a pointer says belongs in the tree: the decision record is docs/design/, the
upstream facts are cited by their upstream source (a URL, an upstream file), and a code
comment says the reason itself.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ["ichor", "tests", "hack", "charts", "crds", "docs", ".ci"]
FILES = ["README.md", "Makefile", "Dockerfile", "pyproject.toml"]
POINTER = re.compile(
    r"(?i:\badr-\d+)|\bADRs?\b|compat-facts|node-notes|testenv-notes|DESIGN\.md"
    r"|/work/shared|\.\./shared\b"
    r"|\b[Aa]mendments?\b|\b[Ii]ssue \d+|\b[Tt]he issue\b",
)
SKIPPED = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis"}


def texts() -> list[Path]:
    found = [ROOT / name for name in FILES]
    for folder in SCANNED:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and not SKIPPED & set(path.parts) and path != Path(__file__):
                found.append(path)
    return found


def pointers(text: str) -> list[str]:
    return [m[0] for m in POINTER.finditer(text)]


def test_no_text_points_outside_the_repository() -> None:
    found = []
    for path in texts():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if pointers(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "pointers to texts outside the repository:\n" + "\n".join(found)


def test_the_pattern_catches_what_it_is_for() -> None:
    assert pointers("see the ADR, amendment 2026-11-03") == ["ADR", "amendment"]
    assert pointers("(compat-facts §2), goal (issue 7), what the issue asks")
    assert not pointers("an address, the padre, readme, ladder, tissue 7")


def test_the_pattern_catches_a_numbered_record_and_a_sibling_folder() -> None:
    assert pointers("as adr-0003 says; ADR-12 too") == ["adr-0003", "ADR-12"]
    assert pointers("see ../shared/STYLE.md") == ["../shared"]
    assert not pointers("the address-4 of ../sharedthings, a shared/ folder")
