"""Commands of the README's "Install" section, so the tests run what a reader would."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def install_section() -> str:
    text = README.read_text()
    found = re.search(r"^## Install\n(.*?)^## ", text, re.MULTILINE | re.DOTALL)
    assert found is not None, "README.md has no '## Install' section"
    return found[1]


def command(prefix: str) -> list[str]:
    """The first command of the section's shell blocks that starts with ``prefix``, split
    into words (a trailing ``# comment`` dropped)."""
    blocks = re.findall(r"```sh\n(.*?)```", install_section(), re.DOTALL)
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith(prefix):
                return shlex.split(line, comments=True)
    raise AssertionError(f"README's Install section has no command starting {prefix!r}")


def set_flags(prefix: str) -> list[tuple[str, str]]:
    """The ``--set``/``--set-file`` flags of the section's command starting with ``prefix``,
    as (flag, value) pairs in order."""
    words = command(prefix)
    return [
        (flag, value)
        for flag, value in itertools.pairwise(words)
        if flag in ("--set", "--set-file")
    ]
