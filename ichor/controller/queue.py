"""A work queue of object keys: each key waits once, runs on one worker at a time, and
no group of keys (a namespace) holds every worker.

Watch events, timers and a changed release list all ask for the same thing ("look at
this cluster again"); the queue folds repeated asks into one run, never runs a key on
two workers at once (an ask during a run queues one more run after it), and keeps one
delayed ask per key (the earliest wins). A bounded number of workers serve it, so 200
clusters never mean 200 concurrent requests. Keys wait in a queue per group, oldest
first; a freed worker goes to the group running the fewest keys (ties: the group served
longest ago), and no group runs more than ``group_workers`` keys at once, so one
tenant's slow keys leave workers to the others. It knows nothing of what a key means.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

logger = logging.getLogger(__name__)


def _one_group(key: Hashable) -> Hashable:
    return None


class WorkQueue(Generic[K]):
    def __init__(
        self,
        work: Callable[[K], Awaitable[None]],
        *,
        workers: int,
        group: Callable[[K], Hashable] | None = None,
        group_workers: int | None = None,
    ) -> None:
        """``group``: the group of a key (None: all keys in one, first come first
        served); ``group_workers``: the most keys of one group run at once (None: all
        ``workers``; at least 1)."""
        self._work = work
        self._workers = workers
        self._group = group or _one_group
        self._group_workers = max(1, workers if group_workers is None else group_workers)
        #: Keys waiting for a worker, per group; the groups in the order they are served
        #: (the one served longest ago first).
        self._ready: OrderedDict[Hashable, deque[K]] = OrderedDict()
        #: Keys running, per group.
        self._busy: dict[Hashable, int] = {}
        self._queued: set[K] = set()
        self._running: set[K] = set()
        self._again: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
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
            group = self._group(key)
            waiting = self._ready.get(group)
            if waiting is None:
                waiting = self._ready[group] = deque()
            waiting.append(key)
            self._wake.set()

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

    def running_in(self, group: Hashable) -> int:
        """How many keys of ``group`` run now."""
        return self._busy.get(group, 0)

    def _take(self) -> K | None:
        """The next key to run: the oldest of the group running the fewest keys, below
        its share (ties: the group served longest ago); None when none may run now."""
        chosen: Hashable = None
        fewest = self._group_workers
        for group in self._ready:
            busy = self._busy.get(group, 0)
            if busy < fewest:
                chosen, fewest = group, busy
                if busy == 0:
                    break
        if fewest >= self._group_workers:
            return None
        waiting = self._ready[chosen]
        key = waiting.popleft()
        if waiting:
            self._ready.move_to_end(chosen)
        else:
            del self._ready[chosen]
        self._queued.discard(key)
        self._running.add(key)
        self._busy[chosen] = fewest + 1
        return key

    def _done(self, key: K) -> None:
        self._running.discard(key)
        group = self._group(key)
        busy = self._busy.get(group, 0) - 1
        if busy > 0:
            self._busy[group] = busy
        else:
            self._busy.pop(group, None)
        self._wake.set()  # a group at its share may take a worker again
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    async def _serve(self) -> None:
        while not self._closed:
            key = self._take()
            if key is None:
                # nothing may run: sleep until a key is added or a run ends (every worker
                # tries _take before it sleeps, so no wake is lost)
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                await self._work(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The work reports its own failures; this only keeps the worker alive.
                logger.exception("unexpected failure while reconciling %s", key)
            finally:
                self._done(key)
