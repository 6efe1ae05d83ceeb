"""The operator killed (SIGKILL) at an API call of an operation's life loses nothing.

The operator runs as the chart runs it, as its own account, behind the counting proxy
(``tests.harness.apiproxy``), its read Jobs' output played (``played_operator``);
``tests.support.crash`` restarts it after the kill and checks each flow's end
(``tests.support.crash_flows``): one Job per step and node, none repeated (a Talos
operation's read Job, each node's check and upgrade Jobs; a read or check Job, which
changes nothing, may be made once more after a kill), no node upgraded twice, the spec
moved once, every owed Event there once, nothing stuck. Here: the kill inside the
Override Event's create (which once lost it), the kill before the first node's Job, and
a seeded sample of every flow's crash points (``ICHOR_CRASH_SEED``, else the day's),
its time printed; ``make bench`` sweeps them all.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio

from ichor.api import owed
from tests.harness.apiproxy import Action
from tests.support import crash, crash_flows
from tests.support.crash import Context

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

#: Crash points of the Talos and the overridden flows in the sample (the whole sweep is
#: ``make bench``'s).
SAMPLE = 3
SEED = int(os.environ.get("ICHOR_CRASH_SEED", datetime.now(UTC).date().toordinal()))


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[crash.Stack]:
    began = time.monotonic()
    async with crash.Stack(tmp_path_factory.mktemp("crash")) as started:
        yield started
    print(f"\ncrash sample: {time.monotonic() - began:.0f} s with its stack, seed {SEED}")


def _override_create(method: str, path: str, body: bytes) -> bool:
    """The executor's Override Event create (on the operation, not the recorder's)."""
    if method != "POST" or not path.endswith("/events"):
        return False
    event = json.loads(body)
    return bool(
        event.get("reason") == "Override"
        and (event.get("involvedObject") or {}).get("kind") == crash_flows.OPERATION
    )


def _job_create(method: str, path: str, body: bytes) -> bool:
    """The create of a Job that acts (a node's upgrade), not of a read-only one (the read
    of the nodes' images, an etcd check): the step the override lets through."""
    if method != "POST" or not path.endswith("/jobs"):
        return False
    return not crash.read_only(json.loads(body))


async def _override_owed_or_posted(context: Context) -> list[str]:
    """While the operator is down: the Override is on record, owed or posted."""
    operations = await context.operations()
    owes = [
        entry.get("reason")
        for op in operations
        for entry in ((op.get("status") or {}).get(owed.FIELD) or {}).values()
    ]
    posted = [
        e
        for e in await context.events()
        if e.get("reason") == "Override" and e["involvedObject"]["kind"] == crash_flows.OPERATION
    ]
    if "Override" in owes or posted:
        return []
    return [f"the operator died with no Override on record (owed: {owes})"]


def _report(outcome: crash.Outcome) -> str:
    return f"{outcome.line()}\n  calls before the kill: " + ", ".join(map(str, outcome.calls))


@pytest.mark.parametrize("action", [Action.BEFORE, Action.INFLIGHT, Action.AFTER])
async def test_killed_inside_the_override_event_create_it_is_posted_once(
    stack: crash.Stack, action: Action
) -> None:
    """A failure once measured: the kill on the executor's Override Event create
    left an overridden operation that ran and succeeded with no Override Event at all."""
    fault = crash.fault_for(action, 1, match=_override_create)
    outcome = await crash.run(stack, crash_flows.OVERRIDDEN, fault)
    assert outcome.reached, _report(outcome)
    assert not outcome.problems, _report(outcome)


async def test_the_override_is_on_record_before_the_job_it_allows_exists(
    stack: crash.Stack,
) -> None:
    """Killed just before the first node's Job create (the step the override lets
    through; the read Job before it only reads), the Override is already owed or posted;
    after the restart the Job is created (the node was recorded started, its Job never
    made) and the Override is there exactly once."""
    fault = crash.fault_for(Action.BEFORE, 1, match=_job_create)
    outcome = await crash.run(stack, crash_flows.OVERRIDDEN, fault, dead=_override_owed_or_posted)
    assert outcome.reached, _report(outcome)
    assert not outcome.problems, _report(outcome)


def _runs_write() -> Callable[[str, str, bytes], bool]:
    """The operation's first status write after its Job's create: the one that says the
    Job runs (and owes Started)."""
    created: list[str] = []

    def match(method: str, path: str, body: bytes) -> bool:
        if _job_create(method, path, body):
            created.append(path)
            return False
        status = "/talosoperations/" in path and path.endswith("/status")
        return bool(created) and method == "PATCH" and status

    return match


@pytest.mark.parametrize("flow", [crash_flows.CILIUM, crash_flows.KUBERNETES], ids=lambda f: f.name)
async def test_killed_between_the_job_create_and_its_write_started_is_posted(
    stack: crash.Stack, flow: crash.Flow
) -> None:
    """A failure the day's sample found (its order of two writes differs run to run):
    killed after the Job's create and before the write that says it runs, the Job ended
    while the operator was down, and the restart went from creating to the end without
    owing Started or the cluster's UpgradeStarted."""
    outcome = await crash.run(stack, flow, crash.fault_for(Action.BEFORE, 1, match=_runs_write()))
    assert outcome.reached, _report(outcome)
    assert not outcome.problems, _report(outcome)


async def _sampled(
    stack: crash.Stack, flow: crash.Flow, tmp_path: Path, points: crash.PointsOf, k: int
) -> None:
    """``k`` of the flow's ``points``, chosen by ``SEED``, each a run."""
    began = time.monotonic()
    life = await crash.life(stack, flow)
    found = points(life)
    chosen = crash.sample(found, k, SEED)
    outcomes = [await crash.run(stack, flow, point.fault()) for point in chosen]
    crash.dump(tmp_path / f"{flow.name}.txt", outcomes)
    print(f"\n{flow.name}: seed {SEED}, {len(found)} points in a life of {len(life)} "
          f"calls; sampled {', '.join(map(str, chosen))} in "
          f"{time.monotonic() - began:.0f} s")  # fmt: skip
    for outcome in outcomes:
        print(f"  {outcome.line()}")
    failed = [_report(o) for o in outcomes if o.problems]
    assert not failed, f"seed {SEED} (ICHOR_CRASH_SEED):\n" + "\n".join(failed)
    assert any(o.reached for o in outcomes), "no sampled point was reached"


#: The sample's size per flow: the Talos and the overridden flows, then one point of each
#: other.
SAMPLED = [
    (crash_flows.TALOS, SAMPLE),
    (crash_flows.OVERRIDDEN, SAMPLE),
    *((flow, 1) for flow in (*crash_flows.OPERATION_FLOWS, crash_flows.RELEASE)
      if flow not in (crash_flows.TALOS, crash_flows.OVERRIDDEN)),
]  # fmt: skip


@pytest.mark.parametrize(("flow", "k"), SAMPLED, ids=[f.name for f, _ in SAMPLED])
async def test_a_seeded_sample_of_crash_points(
    stack: crash.Stack, flow: crash.Flow, k: int, tmp_path: Path
) -> None:
    """``k`` of the flow's crash points (at least one kill on a write), each a run with
    the operator killed there and started again."""
    await _sampled(stack, flow, tmp_path, crash.crash_points, k)


async def test_a_409_on_a_seeded_write(stack: crash.Stack, tmp_path: Path) -> None:
    """One write of the Talos operation's life answered 409 (a create: after it was
    stored): the operator reads again and goes on, with nothing doubled."""
    await _sampled(
        stack, crash_flows.TALOS, tmp_path,
        lambda life: crash.write_points(life, Action.CONFLICT), 1,
    )  # fmt: skip


def _check_passed_write(method: str, path: str, body: bytes) -> bool:
    """The status write that records a node's etcd check as passed (the check Job read
    and deleted just before it)."""
    return method == "PATCH" and path.endswith("/status") and b"etcd healthy with" in body


async def test_a_409_on_the_write_after_a_check_makes_the_check_anew_and_no_node_twice(
    stack: crash.Stack,
) -> None:
    """A failure the whole 409 sweep found: the write that records a passed etcd check
    answered 409 loses the check's result (its Job is already deleted). The step is
    decided again from what is stored, so the check is made once more, the fresh read
    before the node; nothing that acts is made twice and no node upgrades twice."""
    fault = crash.fault_for(Action.CONFLICT, 1, match=_check_passed_write)
    outcome = await crash.run(stack, crash_flows.TALOS, fault)
    assert outcome.reached, _report(outcome)
    assert not outcome.problems, _report(outcome)


def _check_create(method: str, path: str, body: bytes) -> bool:
    """The create of an etcd check Job (read-only, ``talosctl etcd``)."""
    if method != "POST" or not path.endswith("/jobs"):
        return False
    job = json.loads(body)
    return crash.read_only(job) and b'"etcd"' in body


async def test_the_api_server_away_at_a_check_create_leaves_no_job_for_ever(
    stack: crash.Stack,
) -> None:
    """A failure the whole outage sweep found: a check Job's create held while the API
    server was away was stored after the executor had made, read and deleted the check
    anew, and that Job stayed. A read Job now goes on its own once finished; nothing that
    acts is made twice and no node upgrades twice."""
    fault = crash.fault_for(Action.OUTAGE, 1, match=_check_create)
    outcome = await crash.run(stack, crash_flows.TALOS, fault)
    assert outcome.reached, _report(outcome)
    assert not outcome.problems, _report(outcome)


@pytest.mark.parametrize("part", ["kube-apiserver", "etcd"])
async def test_the_api_server_away_at_a_seeded_write(
    stack: crash.Stack, part: str, tmp_path: Path
) -> None:
    """``part`` stopped and started again while a write of the Talos operation's life
    waits to be sent: the operator rides it out, with nothing lost or doubled."""
    stack.outage_part = part
    try:
        await _sampled(
            stack, crash_flows.TALOS, tmp_path,
            lambda life: crash.write_points(life, Action.OUTAGE), 1,
        )  # fmt: skip
    finally:
        stack.outage_part = "kube-apiserver"
