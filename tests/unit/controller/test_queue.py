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
