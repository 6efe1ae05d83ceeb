"""Where the test-only Go programs of tests/gotools live once ``make testenv`` built them.

hack/testenv/gotools.sh builds them into ``$ICHOR_TESTENV/gotools/<stamp>/`` and links
them from ``$ICHOR_TESTENV/bin``, the cache every test binary comes from
(``tests.harness.binaries``). The stamp hashes the module's sources and the Go version, so
a program built from other sources than the checkout's is not used: it is a
``MissingBinaryError`` naming ``make testenv``, as a binary never built is, never a skip.
"""

from __future__ import annotations

import os
import subprocess
from functools import cache
from hashlib import sha256
from pathlib import Path

from tests.harness.binaries import MissingBinaryError, testenv_dir

__all__ = ["SOURCE", "find", "stamp"]

SOURCE = Path(__file__).resolve().parents[1] / "gotools"


@cache
def stamp() -> str:
    """The stamp of hack/testenv/gotools.sh: the Go version, then each source's relative
    path and bytes (go.mod, go.sum, every .go file), in byte order."""
    try:
        go = subprocess.run(
            ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise MissingBinaryError(
            f"the Go toolchain did not answer `go env GOVERSION` ({error}): the programs of "
            f"{SOURCE} are built by `make testenv`, which needs Go"
        ) from None
    digest = sha256(go.encode())
    files = ["go.mod", "go.sum", *(p.relative_to(SOURCE).as_posix() for p in SOURCE.rglob("*.go"))]
    for name in sorted(files, key=lambda n: n.encode()):
        digest.update(name.encode() + b"\n")
        digest.update((SOURCE / name).read_bytes())
    return digest.hexdigest()[:16]


def find(name: str) -> Path:
    """The program ``name`` (kstatus, gowebhook) built from this checkout's sources."""
    built = testenv_dir() / "gotools" / stamp() / name
    if not (built.is_file() and os.access(built, os.X_OK)):
        raise MissingBinaryError(
            f"{name} is not built from the sources in {SOURCE} (looked for {built}): run "
            "`make testenv` to build it; it is cached outside the repo and reused afterwards"
        )
    return built
