"""A work queue of object keys: each key waits once, runs on one worker at a time.

Watch events, timers and a changed release list all ask for the same thing ("look at
this cluster again"); the queue folds repeated asks into one run, never runs a key on
two workers at once (an ask during a run queues one more run after it), and keeps one
delayed ask per key (the earliest wins). A bounded number of workers serve it, so 200
clusters never mean 200 concurrent requests. It knows nothing of what a key means.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

logger = logging.getLogger(__name__)


class WorkQueue(Generic[K]):
    def __init__(self, work: Callable[[K], Awaitable[None]], *, workers: int) -> None:
        self._work = work
        self._workers = workers
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._running: set[K] = set()
        self._again: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._serve(), name=f"ichor-worker-{n}")
            for n in range(self._workers)
        ]

    async def stop(self) -> None:
        """Stop the workers; a run in progress is cancelled."""
        self._closed = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        pending = set(self._tasks)
        # Cancel again while any is left: Python 3.11's wait_for can swallow a
        # cancellation that races with the inner call finishing.
        while pending:
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=1)
        self._tasks = []

    def add(self, key: K) -> None:
        """Run ``key`` as soon as a worker is free (once, however often asked)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer[1].cancel()
        if key in self._running:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Run ``key`` after ``delay`` seconds, unless an earlier run is already due."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        current = self._timers.get(key)
        if current is not None:
            if current[0] <= due:
                return
            current[1].cancel()
        self._timers[key] = (due, loop.call_at(due, self._fire, key))

    def forget(self, key: K) -> None:
        """Drop a delayed run of ``key`` (its object is gone)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer[1].cancel()
        self._again.discard(key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    @property
    def pending(self) -> int:
        return len(self._queued) + len(self._running)

    async def _serve(self) -> None:
        while not self._closed:
            key = await self._queue.get()
            self._queued.discard(key)
            self._running.add(key)
            try:
                await self._work(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The work reports its own failures; this only keeps the worker alive.
                logger.exception("unexpected failure while reconciling %s", key)
            finally:
                self._running.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self.add(key)
