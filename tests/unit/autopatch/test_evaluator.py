"""The health checks' worker process (ichor.controller.autopatch.evaluator, celworker): a
runaway that passes the estimate is stopped at its deadline and its process is gone, the
next check runs in a new one; the worker holds nothing of the operator's; its steps,
memory and CPU are bounded; a cancelled check kills it. And the runner's share of it: a
cluster's checks have one budget per look, and a check stopped for its cost waits."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ichor.api import celbudget
from ichor.api.autopatch import HealthCheck
from ichor.controller.autopatch import evaluator as evaluator_module
from ichor.controller.autopatch import health, runner
from ichor.controller.autopatch.evaluator import Evaluator

SECRET = "v-s3cr3t-" * 4


def compiled(expression: str, name: str = "gate") -> health.Compiled:
    check = HealthCheck(name=name, api_version="v1", resource="configmaps", expression=expression)
    done, problems = health.compile_checks([check])
    assert problems == (), problems
    return done[0]


#: Passes the estimate (membership charged as one pass over the list per element, some
#: 44,000 steps) but compares whole objects: each comparison walks every field.
RUNAWAY = "objects.all(a, a in objects)"


def heavy_objects() -> list[dict[str, Any]]:
    """200 objects that differ only in their last field, 1.4 MB of JSON (under the 2 MiB a
    check may list): comparing two walks all 150 fields before it finds them different."""
    fields = {f"k{i}": SECRET for i in range(150)}
    return [{"data": dict(fields), "metadata": {"name": f"o{n}"}} for n in range(200)]


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


@pytest_asyncio.fixture(loop_scope="session")
async def evaluator() -> AsyncIterator[Evaluator]:
    made = Evaluator()
    try:
        yield made
    finally:
        await made.close()


async def warm(made: Evaluator) -> int:
    """A first, ordinary check: the worker runs; its pid."""
    outcome, _ = await made.run(compiled("objects.size() == 0"), [], within=30)
    assert outcome.result is health.Result.TRUE, outcome
    assert made.pid is not None
    return made.pid


async def test_a_runaway_is_stopped_at_its_deadline_its_process_killed_and_the_next_runs(
    evaluator: Evaluator,
) -> None:
    first = await warm(evaluator)
    assert celbudget.judge(RUNAWAY) is None  # the estimate admits it
    check = compiled(RUNAWAY)
    loop = asyncio.get_running_loop()
    began = loop.time()
    outcome, took = await evaluator.run(check, heavy_objects(), within=2.0)
    assert outcome.result is health.Result.TIMEOUT, outcome
    assert 2.0 <= took < 6.0
    assert loop.time() - began < 8.0
    assert gone(first), "the worker outlived its deadline"
    assert evaluator.pid is None
    verdict = health.verdict(check.check, outcome)
    assert not verdict.ok
    assert (
        "was stopped: its evaluation took over 2 s, and its process was killed" in verdict.message
    )
    assert SECRET not in verdict.message
    assert "o17" not in verdict.message
    # the next check runs, in a new process
    second = await warm(evaluator)
    assert second != first
    assert evaluator.started == 2


async def test_the_worker_holds_nothing_of_the_operators(
    evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No environment (the operator's holds its kubeconfig and token paths), no file but
    its pipes (no socket), ``/`` as its directory, and its limits set."""
    monkeypatch.setenv("KUBECONFIG", "/var/run/secrets/kubeconfig")
    monkeypatch.setenv("ICHOR_TEST_SECRET", SECRET)
    await evaluator.close()
    pid = await warm(evaluator)
    proc = Path(f"/proc/{pid}")
    assert (proc / "environ").read_bytes() == b""
    files = {int(fd.name): os.readlink(fd) for fd in (proc / "fd").iterdir()}
    assert set(files) == {0, 1, 2}, files
    assert all(t.startswith("pipe:") or t == "/dev/null" for t in files.values()), files
    assert os.readlink(proc / "cwd") == "/"
    limits = (proc / "limits").read_text()
    space = f"{evaluator_module.ADDRESS_SPACE}"
    assert any(
        line.startswith("Max address space") and line.split()[3:5] == [space, space]
        for line in limits.splitlines()
    ), limits
    assert any(
        line.startswith("Max file size") and line.split()[3:5] == ["0", "0"]
        for line in limits.splitlines()
    ), limits
    assert (proc / "oom_score_adj").read_text().strip() == "1000"
    assert (proc / "status").read_text().count("PPid:\t" + str(os.getpid())) == 1


async def test_lists_longer_than_the_estimate_are_stopped_at_the_step_limit() -> None:
    """The estimate takes 200 as any list's length; a workload whose objects hold longer
    lists meets the step limit inside the worker, which answers and stays."""
    made = Evaluator(steps=20_000)
    try:
        pid = await warm(made)
        check = compiled("objects.all(p, p.status.containerStatuses.all(c, c.ready))")
        pods = [
            {"status": {"containerStatuses": [{"ready": True, "name": SECRET}] * 2000}}
            for _ in range(20)
        ]
        outcome, _ = await made.run(check, pods, within=60)
        assert outcome.result is health.Result.STEPS, outcome
        message = health.verdict(check.check, outcome).message
        assert "was stopped at 20,000 evaluation steps, its budget" in message
        assert SECRET not in message
        assert made.pid == pid  # stopped by the count: the process answered and stays
    finally:
        await made.close()


async def test_an_expression_that_builds_too_much_is_stopped_by_the_address_space() -> None:
    made = Evaluator(address_space=160 * 1024 * 1024)
    try:
        pid = await warm(made)
        hundred = "[" + ",".join(str(i) for i in range(100)) + "]"
        check = compiled(f"objects.map(a, {hundred}.map(i, a.b + a.b + a.b)).size() > 0")
        outcome, _ = await made.run(check, [{"b": "x" * 600_000}] * 2, within=60)
        assert outcome.result in (health.Result.MEMORY, health.Result.ENDED), outcome
        if outcome.result is health.Result.MEMORY:
            assert "needed more than 160 MiB" in health.verdict(check.check, outcome).message
        assert gone(pid)
        await warm(made)
    finally:
        await made.close()


async def test_an_evaluation_over_its_cpu_time_ends_by_the_kernels_limit() -> None:
    """The CPU limit holds even if the operator never kills the worker."""
    made = Evaluator(cpu_seconds=1.0)
    try:
        pid = await warm(made)
        check = compiled(RUNAWAY)
        outcome, _ = await made.run(check, heavy_objects(), within=120)
        assert outcome.result is health.Result.CPU, outcome
        assert "used over 1 s of CPU" in health.verdict(check.check, outcome).message
        assert gone(pid)
    finally:
        await made.close()


async def test_a_cancelled_evaluation_kills_the_worker(evaluator: Evaluator) -> None:
    pid = await warm(evaluator)
    task = asyncio.create_task(evaluator.run(compiled(RUNAWAY), heavy_objects(), within=60))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(50):
        if gone(pid):
            break
        await asyncio.sleep(0.1)
    assert gone(pid)
    await warm(evaluator)


async def test_close_kills_an_idle_worker() -> None:
    made = Evaluator()
    pid = await warm(made)
    await made.close()
    assert gone(pid)
    assert made.pid is None


async def test_checks_run_one_at_a_time_and_a_wait_is_bounded() -> None:
    made = Evaluator(wait_timeout=1.0)
    try:
        await warm(made)
        running = asyncio.create_task(made.run(compiled(RUNAWAY), heavy_objects(), within=4))
        await asyncio.sleep(0.2)
        outcome, took = await made.run(compiled("true"), [], within=10)
        assert outcome.result is health.Result.UNAVAILABLE
        assert outcome.detail == "the evaluator stayed busy with other checks for 1 s"
        assert took == 0.0
        verdict = health.verdict(compiled("true").check, outcome)
        assert verdict.message.endswith("was not evaluated: " + outcome.detail)
        assert (await running)[0].result is health.Result.TIMEOUT
    finally:
        await made.close()


async def test_a_worker_that_cannot_start_is_said_and_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = Evaluator(start_timeout=20)
    monkeypatch.setattr(evaluator_module, "WORKER_MODULE", "ichor.no_such_module")
    try:
        outcome, _ = await made.run(compiled("true"), [], within=10)
        assert outcome.result is health.Result.UNAVAILABLE
        assert "could not be started" in outcome.detail
        monkeypatch.undo()
        await warm(made)
    finally:
        await made.close()


# --- the runner's share: one budget per cluster and look, and a wait after a costly one ---


class FakeEvaluator:
    """Answers each check with the next of ``outcomes``, taking ``took`` seconds."""

    def __init__(self, outcomes: list[health.Outcome], took: float = 0.1) -> None:
        self.outcomes = outcomes
        self.took = took
        self.asked: list[tuple[str, float]] = []

    async def run(
        self, compiled: health.Compiled, objects: Any, *, within: float
    ) -> tuple[health.Outcome, float]:
        self.asked.append((compiled.check.name, within))
        return self.outcomes.pop(0), self.took

    async def close(self) -> None:
        pass


def patcher(fake: FakeEvaluator) -> runner.AutoPatcher:
    made = runner.AutoPatcher(
        api=None,  # type: ignore[arg-type]
        evaluator=fake,  # type: ignore[arg-type]
        clock=lambda: datetime(2026, 12, 5, 12, 0, tzinfo=UTC),
    )

    async def listed(workload: Any, check: health.Compiled) -> tuple[list[Any], str]:
        return [], ""

    made._list = listed  # type: ignore[method-assign]
    return made


TRUE = health.Outcome(health.Result.TRUE)


async def test_a_clusters_checks_share_one_budget_per_look() -> None:
    fake = FakeEvaluator([TRUE, TRUE, TRUE], took=6.0)
    made = patcher(fake)
    checks = [compiled("true", name=f"c{i}") for i in range(3)]
    verdicts = await made._health(None, checks, cluster="team-a/prod")  # type: ignore[arg-type]
    assert [v.ok for v in verdicts] == [True, True, False]
    assert fake.asked == [("c0", runner.HEALTH_TIMEOUT), ("c1", runner.HEALTH_LOOK_TIME - 6.0)]
    assert "the cluster's checks took over 10 s in this look" in verdicts[2].message


async def test_a_check_stopped_for_its_cost_waits_unless_its_expression_changes() -> None:
    stopped = health.Outcome(health.Result.TIMEOUT, limit=runner.HEALTH_TIMEOUT)
    fake = FakeEvaluator([stopped, TRUE, TRUE])
    made = patcher(fake)
    burn = compiled("objects.all(a, a in objects)", name="burn")
    (first,) = await made._health(None, [burn], cluster="team-a/prod")  # type: ignore[arg-type]
    assert not first.ok
    assert "took over 10 s" in first.message
    assert "it is not evaluated again before 2026-12-05T12:05:00Z" in first.message
    (again,) = await made._health(None, [burn], cluster="team-a/prod")  # type: ignore[arg-type]
    assert again == first
    assert len(fake.asked) == 1  # not evaluated again
    # another tenant's cluster with the same check is not held by this one's
    (other,) = await made._health(None, [burn], cluster="team-b/prod")  # type: ignore[arg-type]
    assert other.ok
    # a changed expression is evaluated at once
    changed = compiled("objects.size() >= 0", name="burn")
    (fixed,) = await made._health(None, [changed], cluster="team-a/prod")  # type: ignore[arg-type]
    assert fixed.ok
    assert len(fake.asked) == 3
