"""The README stays short and starts with the two commands; the reference is in docs/."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move reference text to docs/"


def test_the_two_commands_come_first() -> None:
    text = README.read_text()
    head = text[: text.index("\n## ")]
    assert "make demo" in head
    assert "make test" in head
