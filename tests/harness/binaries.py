"""Where the test binaries built by ``make testenv`` live.

A missing binary is an error that names the command to run, never a silent skip.
"""

from __future__ import annotations

import os
from pathlib import Path


class MissingBinaryError(RuntimeError):
    """A real component the tests need has not been built."""


def cache_dir() -> Path:
    explicit = os.environ.get("ICHOR_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ichor"


def testenv_dir() -> Path:
    explicit = os.environ.get("ICHOR_TESTENV")
    return Path(explicit) if explicit else cache_dir() / "testenv"


def find(name: str) -> Path:
    """Return the built binary ``name`` (kube-apiserver, etcd, kubectl, helm, crane, registry)."""
    path = testenv_dir() / "bin" / name
    if not (path.exists() and os.access(path, os.X_OK)):
        raise MissingBinaryError(
            f"{name} is not built (looked for {path}): run `make testenv` to build it "
            "from its Go module; it is cached outside the repo and reused afterwards"
        )
    return path
