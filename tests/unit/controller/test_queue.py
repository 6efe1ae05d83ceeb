"""The work queue folds repeated asks and never runs one key on two workers at once."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from ichor.controller.queue import WorkQueue

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_repeated_asks_fold_into_one_run_and_an_ask_during_a_run_runs_once_more() -> None:
    runs: list[str] = []
    running: set[str] = set()
    overlap = False
    release = asyncio.Event()

    async def work(key: str) -> None:
        nonlocal overlap
        overlap = overlap or key in running
        running.add(key)
        runs.append(key)
        await release.wait()
        running.discard(key)

    queue: WorkQueue[str] = WorkQueue(work, workers=4)
    queue.start()
    try:
        for _ in range(5):
            queue.add("a")
        await asyncio.sleep(0.05)
        assert runs == ["a"]
        queue.add("a")  # during the run
        queue.add("a")
        release.set()
        await asyncio.sleep(0.05)
        assert runs == ["a", "a"]
        assert not overlap
    finally:
        await queue.stop()


async def test_a_delayed_ask_keeps_the_earliest_due_time_and_can_be_forgotten() -> None:
    runs: list[str] = []

    async def work(key: str) -> None:
        runs.append(key)

    queue: WorkQueue[str] = WorkQueue(work, workers=1)
    queue.start()
    try:
        queue.add_after("a", 0.05)
        queue.add_after("a", 10)  # later: ignored
        queue.add_after("b", 0.05)
        queue.forget("b")
        await asyncio.sleep(0.2)
        assert runs == ["a"]
    finally:
        await queue.stop()


async def test_a_failing_run_keeps_the_worker_serving() -> None:
    runs: list[str] = []

    async def work(key: str) -> None:
        runs.append(key)
        if key == "bad":
            raise RuntimeError("boom")

    queue: WorkQueue[str] = WorkQueue(work, workers=1)
    queue.start()
    try:
        queue.add("bad")
        queue.add("good")
        await asyncio.sleep(0.05)
        assert runs == ["bad", "good"]
    finally:
        await queue.stop()


async def test_stop_ends_a_worker_whose_run_swallowed_the_cancellation() -> None:
    started = asyncio.Event()

    async def work(key: str) -> None:
        started.set()
        # As Python 3.11's wait_for may do when the inner call has just finished:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(10)

    queue: WorkQueue[str] = WorkQueue(work, workers=1)
    queue.start()
    queue.add("a")
    await started.wait()
    await asyncio.wait_for(queue.stop(), timeout=5)


# --- fairness between groups (namespaces) ------------------------------------------------


def _namespace(key: tuple[str, str]) -> str:
    return key[0]


class Held:
    """Work whose runs each wait until released, recording when each started and how many
    runs of each group ran at once."""

    def __init__(self, *, slow: str | None = None, seconds: float | None = None) -> None:
        self.started: dict[tuple[str, str], float] = {}
        self.order: list[tuple[str, str]] = []
        self.busy: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.release = asyncio.Event()
        self.slow = slow
        self.seconds = seconds

    async def __call__(self, key: tuple[str, str]) -> None:
        namespace = key[0]
        self.started[key] = asyncio.get_running_loop().time()
        self.order.append(key)
        self.busy[namespace] = self.busy.get(namespace, 0) + 1
        self.most[namespace] = max(self.most.get(namespace, 0), self.busy[namespace])
        try:
            if self.slow is None or namespace == self.slow:
                if self.seconds is None:
                    await self.release.wait()
                else:
                    await asyncio.sleep(self.seconds)
        finally:
            self.busy[namespace] -= 1


async def test_one_namespace_of_slow_keys_leaves_a_worker_to_another() -> None:
    # 40 keys of namespace a, each holding its worker 0.5 s (a blackhole's timeout); a
    # key of namespace b asked for after them starts at once, not after 40 / 8 runs
    work = Held(slow="a", seconds=0.5)
    queue: WorkQueue[tuple[str, str]] = WorkQueue(
        work, workers=8, group=_namespace, group_workers=7
    )
    queue.start()
    try:
        for n in range(40):
            queue.add(("a", f"c{n}"))
        await asyncio.sleep(0.05)
        asked = asyncio.get_running_loop().time()
        queue.add(("b", "healthy"))
        await asyncio.sleep(0.1)
        assert ("b", "healthy") in work.started, "b waits behind a's slow keys"
        assert work.started[("b", "healthy")] - asked < 0.05
        assert work.most["a"] == 7
    finally:
        await queue.stop()


async def test_without_groups_a_late_key_waits_behind_the_slow_ones() -> None:
    # the queue as it was (one group): what the fairness above prevents
    work = Held(slow="a", seconds=0.2)
    queue: WorkQueue[tuple[str, str]] = WorkQueue(work, workers=4)
    queue.start()
    try:
        for n in range(12):
            queue.add(("a", f"c{n}"))
        queue.add(("b", "healthy"))
        await asyncio.sleep(0.3)
        assert ("b", "healthy") not in work.started
        assert work.most["a"] == 4
    finally:
        await queue.stop()


async def test_a_namespace_never_runs_more_than_its_share_even_alone() -> None:
    work = Held()
    queue: WorkQueue[tuple[str, str]] = WorkQueue(
        work, workers=4, group=_namespace, group_workers=3
    )
    queue.start()
    try:
        for n in range(10):
            queue.add(("a", f"c{n}"))
        await asyncio.sleep(0.05)
        assert work.most == {"a": 3}
        assert queue.running_in("a") == 3
        work.release.set()
        await asyncio.sleep(0.05)
        assert len(work.order) == 10
        assert work.most == {"a": 3}
        assert queue.running_in("a") == 0
    finally:
        await queue.stop()


async def test_a_freed_worker_goes_to_the_namespace_running_the_fewest() -> None:
    # no reserve (share = workers): a holds both workers; b asked after a's five others
    # still gets the first worker freed, ahead of a's waiting keys
    gates: dict[tuple[str, str], asyncio.Event] = {}
    order: list[tuple[str, str]] = []

    async def work(key: tuple[str, str]) -> None:
        order.append(key)
        await gates.setdefault(key, asyncio.Event()).wait()

    queue: WorkQueue[tuple[str, str]] = WorkQueue(
        work, workers=2, group=_namespace, group_workers=2
    )
    queue.start()
    try:
        for n in range(7):
            queue.add(("a", f"c{n}"))
        await asyncio.sleep(0.02)
        queue.add(("b", "healthy"))
        await asyncio.sleep(0.02)
        assert order == [("a", "c0"), ("a", "c1")]
        gates.setdefault(("a", "c0"), asyncio.Event()).set()
        await asyncio.sleep(0.02)
        assert order[2] == ("b", "healthy")
    finally:
        for gate in gates.values():
            gate.set()
        await queue.stop()


async def test_namespaces_with_waiting_keys_take_turns() -> None:
    work = Held(seconds=0.0)
    queue: WorkQueue[tuple[str, str]] = WorkQueue(
        work, workers=1, group=_namespace, group_workers=1
    )
    for n in range(3):
        queue.add(("a", f"c{n}"))
    for n in range(3):
        queue.add(("b", f"c{n}"))
    queue.add(("c", "c0"))
    queue.start()
    try:
        await asyncio.sleep(0.05)
        assert [k[0] for k in work.order] == ["a", "b", "c", "a", "b", "a", "b"]
        # within a namespace, oldest first
        assert [k for k in work.order if k[0] == "a"] == [("a", "c0"), ("a", "c1"), ("a", "c2")]
    finally:
        await queue.stop()


async def test_dedup_and_one_run_at_a_time_hold_with_groups() -> None:
    runs: list[tuple[str, str]] = []
    running: set[tuple[str, str]] = set()
    overlap = False
    release = asyncio.Event()

    async def work(key: tuple[str, str]) -> None:
        nonlocal overlap
        overlap = overlap or key in running
        running.add(key)
        runs.append(key)
        await release.wait()
        running.discard(key)

    queue: WorkQueue[tuple[str, str]] = WorkQueue(
        work, workers=4, group=_namespace, group_workers=2
    )
    queue.start()
    try:
        for _ in range(5):
            queue.add(("a", "x"))
        await asyncio.sleep(0.02)
        queue.add(("a", "x"))  # during the run: once more after it
        queue.add(("a", "x"))
        queue.add_after(("b", "y"), 0.02)
        queue.add_after(("b", "y"), 5)  # later: ignored
        await asyncio.sleep(0.06)
        assert runs == [("a", "x"), ("b", "y")]
        release.set()
        await asyncio.sleep(0.05)
        assert runs == [("a", "x"), ("b", "y"), ("a", "x")]
        assert not overlap
        assert queue.pending == 0
    finally:
        await queue.stop()
