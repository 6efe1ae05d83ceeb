"""``make help`` lists every target the Makefile declares, so a reader finds each one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def declared() -> set[str]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(r"^\.PHONY:(.*)$", text, re.MULTILINE)
    assert found is not None, "the Makefile declares no .PHONY targets"
    return set(found[1].split())


def listed() -> set[str]:
    make = shutil.which("make")
    assert make is not None, "make is not installed (apt-get install make)"
    shown = subprocess.run(
        [make, "-s", "--no-print-directory", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return set(re.findall(r"\bmake ([a-z0-9-]+)", shown))


def test_make_help_lists_every_target() -> None:
    targets = declared()
    assert {"demo", "test", "help"} <= targets
    missing = targets - listed()
    assert not missing, f"make help does not list: {', '.join(sorted(missing))}"
