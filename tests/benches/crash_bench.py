"""The whole crash sweep: every flow killed at every crash point of its life, a 409 on
every write, and the API server away at every write of the Talos operation.

Each flow's clean life is counted first; each crash point is then one run with the
operator killed there (SIGKILL) and started again (``tests.support.crash``). A Talos
operation's life is node by node (its read Job, each node's check and upgrade Jobs), so
its life is about three times the calls of a one-Job operation. A line per flow gives
its calls, the crash points covered and the failures; each failure follows with its
run's line; the last line gives the crash points covered per flow. Progress is printed
every ``EVERY`` runs. ``ICHOR_CRASH_FLOWS=talos,overridden`` sweeps only those flows,
``ICHOR_CRASH_SWEEPS=killed`` only those sweeps (killed, 409, away). About 10 s a run:
the Talos flow's kills alone take about 45 minutes, the whole sweep several hours.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from tests.harness.apiproxy import Action, Call
from tests.support import crash, crash_flows

#: Where the API server goes away (etcd, kube-apiserver), at each write of these flows.
OUTAGE_FLOWS = ("talos",)


#: A progress line every this many runs.
EVERY = 20


def _wanted(variable: str) -> list[str]:
    return [w for w in os.environ.get(variable, "").split(",") if w]


def _chosen() -> list[crash.Flow]:
    flows = [*crash_flows.OPERATION_FLOWS, crash_flows.RELEASE]
    wanted = _wanted("ICHOR_CRASH_FLOWS")
    return [f for f in flows if not wanted or f.name in wanted]


def _sweeps(what: str) -> bool:
    wanted = _wanted("ICHOR_CRASH_SWEEPS")
    return not wanted or what in wanted


class _Progress:
    def __init__(self) -> None:
        self.runs = 0
        self.seconds = 0.0

    def __call__(self, outcome: crash.Outcome) -> None:
        self.runs += 1
        self.seconds += outcome.seconds
        if outcome.problems:
            print(f"   FAILED {outcome.line()}", flush=True)
        if self.runs % EVERY == 0:
            print(f"   ... {self.runs} runs, {self.seconds:.0f} s; last: {outcome.line()}",
                  flush=True)  # fmt: skip


async def _sweep(
    stack: crash.Stack, flow: crash.Flow, what: str, points: crash.PointsOf
) -> tuple[str, list[str]]:
    found = await crash.sweep(stack, flow, points=points, progress=_Progress())
    line = f"{what} {found.line()}"
    print(f"   {line}", flush=True)
    _COVERED.setdefault(flow.name, {})[what.rstrip(":")] = found.covered
    return line, [f"  {o.line()}" for o in found.failed]


#: The crash points covered, per flow and sweep, for the last line.
_COVERED: dict[str, dict[str, int]] = {}


def _covered() -> str:
    return "crash points covered per flow: " + "; ".join(
        f"{flow} " + ", ".join(f"{what} {n}" for what, n in sweeps.items())
        for flow, sweeps in _COVERED.items()
    )


def _conflicts(life: tuple[Call, ...]) -> list[crash.Point]:
    return crash.write_points(life, Action.CONFLICT)


def _outages(life: tuple[Call, ...]) -> list[crash.Point]:
    return crash.write_points(life, Action.OUTAGE)


async def _run() -> list[str]:
    lines: list[str] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ichor-crash-bench-") as work:
        async with crash.Stack(Path(work)) as stack:
            for flow in _chosen():
                for what, points in (("killed:", crash.crash_points), ("409:", _conflicts)):
                    if not _sweeps(what.rstrip(":")):
                        continue
                    line, failed = await _sweep(stack, flow, what, points)
                    lines.append(line)
                    failures += failed
                if flow.name in OUTAGE_FLOWS and _sweeps("away"):
                    for part in ("kube-apiserver", "etcd"):
                        stack.outage_part = part
                        line, failed = await _sweep(stack, flow, f"{part} away:", _outages)
                        lines.append(line)
                        failures += failed
            lines.append(_covered())
            assert stack.operator is not None
            starts = sorted(stack.operator.start_seconds)
            lines.append(
                f"operator started {len(starts)} times, median "
                f"{starts[len(starts) // 2]:.1f} s to answer its health check"
            )
    if failures:
        raise AssertionError("\n".join([*lines, "failed runs:", *failures]))
    return lines


def run() -> list[str]:
    return asyncio.run(_run())
