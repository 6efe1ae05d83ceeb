"""``make bench``: run every bench module in tests/benches and print its lines.

A module takes part by exposing ``run() -> list[str]``. One whose binary is not built
prints the reason (``MissingBinaryError``: the make target to run) and the rest still
run; a module that fails otherwise prints its error, the rest still run, and the exit
status is non-zero. ``python -m tests.bench rules registry`` runs only the modules whose
names contain one of the words.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import cast

from tests import benches
from tests.harness.binaries import MissingBinaryError


def bench_modules() -> list[str]:
    """Every module of tests/benches, in name order."""
    return sorted(
        f"{benches.__name__}.{info.name}"
        for info in pkgutil.iter_modules(benches.__path__)
        if not info.ispkg and not info.name.startswith("_")
    )


def main(argv: Sequence[str] = ()) -> int:
    wanted = [w.lower() for w in argv]
    failed = 0
    for name in bench_modules():
        short = name.rsplit(".", 1)[-1]
        if wanted and not any(w in short.lower() for w in wanted):
            continue
        print(f"== {short}", flush=True)
        start = time.perf_counter()
        try:
            module = importlib.import_module(name)
            run = getattr(module, "run", None)
            if not callable(run):
                print("   (no run() here: not a bench)", flush=True)
                continue
            lines = cast(Callable[[], list[str]], run)()
        except MissingBinaryError as missing:
            print(f"   not run: {missing}", flush=True)
            continue
        except Exception:
            failed += 1
            print("   failed:", flush=True)
            print("   " + traceback.format_exc().rstrip().replace("\n", "\n   "), flush=True)
            continue
        for line in lines:
            print(f"   {line}", flush=True)
        print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
