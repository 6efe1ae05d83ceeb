"""Where the checkout's own files are: the CRDs and the chart the harness installs.

The harness runs from a checkout (``make demo``, ``make test``); it finds the checkout by
its ``pyproject.toml`` rather than by counting folders, and says so when there is none.
Processes it starts with ``python -m tests.harness...`` get the checkout on their
``PYTHONPATH``, so they import the harness from any working directory.
"""

from __future__ import annotations

import os
from pathlib import Path


class NoCheckoutError(RuntimeError):
    """The harness was imported from somewhere other than a checkout of Ichor."""


def _find_root(start: Path) -> Path:
    for folder in start.parents:
        project = folder / "pyproject.toml"
        if project.is_file() and (folder / "crds").is_dir() and (folder / "charts").is_dir():
            return folder
    raise NoCheckoutError(
        f"{start} is not inside a checkout of Ichor (no pyproject.toml with crds/ and "
        "charts/ above it): run the harness from a clone of the repository"
    )


ROOT = _find_root(Path(__file__).resolve())
CRDS = ROOT / "crds"
CHART = ROOT / "charts" / "ichor"


def python_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the checkout first on ``PYTHONPATH`` (for ``python -m tests.harness...``)."""
    given = env.get("PYTHONPATH") or os.environ.get("PYTHONPATH") or ""
    return {**env, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [given])])}
