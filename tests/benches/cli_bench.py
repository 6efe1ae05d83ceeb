"""How fast the ``ichor`` command starts next to ``kubectl version --client``, and what
each Kubernetes client costs to import.

``ichor version`` and ``ichor --help`` run as a person runs them (the console script, a
fresh interpreter each time) in alternating rounds with ``kubectl version --client``, the
command kubectl users wait on; the times are medians, wall and CPU (user + system, which
a busy machine inflates less). Goal: each under 0.3 s of wall time; the ratio to kubectl
is the figure that travels between machines. The same runs say which heavy modules
``ichor version`` loaded (none is the point of the lazy commands).

The clients: ``import kubernetes`` (the CLI's) and ``import kubernetes.aio`` (the
operator's, shipped with it), each in a fresh interpreter, its time and its peak RSS:
what each side of the one client library costs to load.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.harness import binaries

RUNS = 15
IMPORT_RUNS = 7
GOAL_SECONDS = 0.3
#: What ``ichor version`` must not load (the lazy commands' point).
HEAVY = (
    "kubernetes",
    "urllib3",
    "aiohttp",
    "pydantic",
    "rich",
    "yaml",
    "kopf",
)
CLIENTS = ("kubernetes", "kubernetes.aio")

_LOADED = (
    "import json, sys\n"
    "from ichor.cli.main import main\n"
    "main(['version'])\n"
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
)
_IMPORT = (
    "import json, resource, sys, time\n"
    "start = time.perf_counter()\n"
    "__import__(sys.argv[1])\n"
    "seconds = time.perf_counter() - start\n"
    "print(json.dumps([seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))\n"
)


@dataclass(frozen=True)
class Imported:
    """One client's import: the median seconds and the median peak RSS (KiB)."""

    seconds: float
    rss_kib: float


def _timed(command: Sequence[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, timeout=120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _commands() -> dict[str, list[str]]:
    ichor = str(Path(sys.executable).parent / "ichor")
    kubectl = str(binaries.find("kubectl"))
    return {
        "ichor version": [ichor, "version"],
        "ichor --help": [ichor, "--help"],
        "kubectl version --client": [kubectl, "version", "--client"],
    }


def _imported(module: str) -> Imported:
    seconds, rss = [], []
    for _ in range(IMPORT_RUNS):
        done = subprocess.run(
            [sys.executable, "-c", _IMPORT, module],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        took, peak = json.loads(done.stdout)
        seconds.append(float(took))
        rss.append(float(peak))
    return Imported(seconds=statistics.median(seconds), rss_kib=statistics.median(rss))


def report(
    times: Mapping[str, Sequence[float]],
    loaded: Sequence[str],
    imports: Mapping[str, Imported],
    cpu: Mapping[str, Sequence[float]] | None = None,
) -> list[str]:
    """The lines for the medians of ``times`` (wall seconds per command) and ``cpu``
    (CPU seconds), what ``ichor version`` loaded, and the clients' imports."""
    median = {name: statistics.median(samples) for name, samples in times.items()}
    kubectl = median["kubectl version --client"]
    runs = min(len(samples) for samples in times.values())
    lines = [
        "cli: "
        + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in median.items())
        + f" (medians of {runs}, a fresh process each)"
    ]
    if cpu:
        cpu_median = {name: statistics.median(samples) for name, samples in cpu.items()}
        lines.append(
            "cli: CPU "
            + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in cpu_median.items())
        )
    for name in ("ichor version", "ichor --help"):
        ratio = median[name] / kubectl
        met = "met" if median[name] < GOAL_SECONDS else "NOT met"
        lines.append(
            f"cli: start ratio {name} / kubectl version --client {ratio:.2f}x "
            f"(goal: under {GOAL_SECONDS} s: {met})"
        )
    heavy = sorted(set(loaded) & set(HEAVY))
    lines.append(
        "cli: ichor version loads "
        + (f"{', '.join(heavy)} (NOT lazy)" if heavy else "no API client, registry client or model")
    )
    base = imports.get("kubernetes")
    for name, found in imports.items():
        versus = (
            f", {found.seconds / base.seconds:.2f}x kubernetes"
            if base and name != "kubernetes"
            else ""
        )
        lines.append(
            f"clients: import {name} {found.seconds * 1000:.0f} ms, peak RSS "
            f"{found.rss_kib / 1024:.1f} MiB (medians of {IMPORT_RUNS}{versus})"
        )
    return lines


def run() -> list[str]:
    commands = _commands()
    for command in commands.values():  # warm the page cache and the bytecode
        _timed(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(RUNS):
        for name, command in commands.items():
            wall, used = _timed(command)
            times[name].append(wall)
            cpu[name].append(used)
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", _LOADED], capture_output=True, text=True, check=True
        ).stdout.splitlines()[-1]
    )
    imports = {module: _imported(module) for module in CLIENTS}
    return report(times, loaded, imports, cpu)


if __name__ == "__main__":
    for line in run():
        print(line, flush=True)
