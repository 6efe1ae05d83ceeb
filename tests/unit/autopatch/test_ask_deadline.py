"""Auto-patch asks the workload (``/readyz``, then the health checks) within one deadline
(``ask_timeout``, the reconciler's ``ICHOR_OBSERVE_TIMEOUT``): a workload that answers
``/readyz`` and then lists its objects slowly, check after check, holds its worker no
longer than that, and the gate stays shut, saying why."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from ichor.controller.autopatch import decisions, health
from ichor.controller.autopatch.runner import AutoPatcher

pytestmark = pytest.mark.asyncio(loop_scope="session")

WORKLOAD: Any = object()


class Slow(AutoPatcher):
    def __init__(self, *, ready: bool, readyz_seconds: float, check_seconds: float) -> None:
        super().__init__(api=None, ask_timeout=0.5)  # type: ignore[arg-type]
        self.ready = ready
        self.readyz_seconds = readyz_seconds
        self.check_seconds = check_seconds
        self.checked = 0

    async def _readyz(self, workload: Any) -> decisions.Probe:
        await asyncio.sleep(self.readyz_seconds)
        return decisions.Probe(ok=self.ready, message="" if self.ready else "answered 500")

    async def _health(
        self, workload: Any, checks: Sequence[health.Compiled], *, cluster: str = ""
    ) -> tuple[health.Verdict, ...]:
        # sixteen checks, each slow but each within its own bound
        for _ in range(16):
            self.checked += 1
            await asyncio.sleep(self.check_seconds)
        return ()


async def _timed(patcher: AutoPatcher) -> tuple[float, decisions.Probe, object]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    probe, verdicts = await patcher._ask(WORKLOAD, (), cluster="a/c")
    return loop.time() - started, probe, verdicts


async def test_slow_health_checks_end_at_the_deadline_and_shut_the_gate() -> None:
    patcher = Slow(ready=True, readyz_seconds=0.0, check_seconds=0.2)
    elapsed, probe, verdicts = await _timed(patcher)
    assert elapsed < 0.5 + 0.3
    assert 1 <= patcher.checked < 16
    assert not probe.ok
    assert verdicts is None
    assert probe.message == "answered, but its health checks were not within 0.5 s"


async def test_a_readyz_that_does_not_answer_ends_at_the_deadline() -> None:
    patcher = Slow(ready=True, readyz_seconds=30.0, check_seconds=0.0)
    elapsed, probe, verdicts = await _timed(patcher)
    assert elapsed < 0.5 + 0.3
    assert (probe.ok, probe.message, verdicts) == (False, "did not answer within 0.5 s", None)
    assert patcher.checked == 0


async def test_within_the_deadline_the_answers_are_kept() -> None:
    ready = Slow(ready=True, readyz_seconds=0.0, check_seconds=0.0)
    _, probe, verdicts = await _timed(ready)
    assert (probe.ok, verdicts, ready.checked) == (True, (), 16)
    refused = Slow(ready=False, readyz_seconds=0.0, check_seconds=0.0)
    _, probe, verdicts = await _timed(refused)
    assert (probe.ok, probe.message, verdicts, refused.checked) == (False, "answered 500", None, 0)
    probe, none = await Slow(ready=True, readyz_seconds=0, check_seconds=0)._ask(
        None, (), cluster="a/c"
    )
    assert (probe.ok, probe.message, none) == (False, "cannot be asked", None)
