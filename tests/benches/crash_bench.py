"""The whole crash sweep: every flow killed at every crash point of its life, a 409 on
every write, and the API server away at every write of the Talos operation.

Each flow's clean life is counted first; each crash point is then one run with the
operator killed there (SIGKILL) and started again (``tests.support.crash``). A line per
flow gives its calls, the crash points covered and the failures; each failure follows
with its run's line. ``ICHOR_CRASH_FLOWS=talos,overridden`` sweeps only those. About
10 s a run: the whole sweep takes an hour or two on a quiet machine.
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


def _chosen() -> list[crash.Flow]:
    flows = [*crash_flows.OPERATION_FLOWS, crash_flows.RELEASE]
    wanted = [w for w in os.environ.get("ICHOR_CRASH_FLOWS", "").split(",") if w]
    return [f for f in flows if not wanted or f.name in wanted]


def _progress(outcome: crash.Outcome) -> None:
    if outcome.problems:
        print(f"   FAILED {outcome.line()}", flush=True)


async def _sweep(
    stack: crash.Stack, flow: crash.Flow, what: str, points: crash.PointsOf
) -> tuple[str, list[str]]:
    found = await crash.sweep(stack, flow, points=points, progress=_progress)
    line = f"{what} {found.line()}"
    print(f"   {line}", flush=True)
    return line, [f"  {o.line()}" for o in found.failed]


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
                    line, failed = await _sweep(stack, flow, what, points)
                    lines.append(line)
                    failures += failed
                if flow.name in OUTAGE_FLOWS:
                    for part in ("kube-apiserver", "etcd"):
                        stack.outage_part = part
                        line, failed = await _sweep(stack, flow, f"{part} away:", _outages)
                        lines.append(line)
                        failures += failed
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
