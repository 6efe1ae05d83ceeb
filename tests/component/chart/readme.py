"""Commands of the install page (docs/install.md), so the tests run what a reader would.

The page is where the install is documented; the README repeats its first ``helm install``
line, and ``readme_command`` reads the README's shell blocks the same way, so a test can
hold the two equal.
"""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
INSTALL = ROOT / "docs" / "install.md"
README = ROOT / "README.md"


def install_section() -> str:
    text = INSTALL.read_text()
    assert text.startswith("# Install\n"), f"{INSTALL} does not start with '# Install'"
    return text


def _first_command(text: str, prefix: str, where: str) -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", text, re.DOTALL)
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith(prefix):
                return shlex.split(line, comments=True)
    raise AssertionError(f"{where} has no command starting {prefix!r}")


def command(prefix: str) -> list[str]:
    """The first command of the install page's shell blocks that starts with ``prefix``,
    split into words (a trailing ``# comment`` dropped)."""
    return _first_command(install_section(), prefix, "docs/install.md")


def readme_command(prefix: str) -> list[str]:
    """The same, from the README's shell blocks."""
    return _first_command(README.read_text(), prefix, "README.md")


def set_flags(prefix: str) -> list[tuple[str, str]]:
    """The ``--set``/``--set-file`` flags of the page's command starting with ``prefix``,
    as (flag, value) pairs in order."""
    words = command(prefix)
    return [
        (flag, value)
        for flag, value in itertools.pairwise(words)
        if flag in ("--set", "--set-file")
    ]
