"""The memory budget of the reviews the webhook endpoint reads and judges.

A review holds its cost (``intake.cost``) while it is read and judged; it waits for room
at most ``QUEUE_SECONDS``, or is refused (``Busy``, ``Full``, ``OverBudget``). What waits
counts in the budget too, so hostile load cannot grow the process past its limit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

#: Memory the reviews being read and judged may take together (``intake.cost``). Set
#: with the chart's 384Mi limit: an operator observing 1,000 clusters takes about
#: 196 MiB, sixteen concurrent reviews of the largest size add about 35 MiB (222 MiB at
#: worst, 42% of the limit free; tests/component/chart/test_fleet_memory.py).
BUDGET_BYTES = 96 * 1024 * 1024
#: Part of the budget only reviews costing at most ``SMALL_COST`` may use, so ordinary
#: reviews are answered while large ones wait.
SMALL_RESERVE = 16 * 1024 * 1024
SMALL_COST = 4 * 1024 * 1024
#: How long a review waits for room in the budget (the API server waits 5 s).
QUEUE_SECONDS = 3.0
#: Reviews that may wait for room at once. While it waits, a review's connection buffers
#: what arrives of its body (TLS and HTTP buffers: about 1.2 MiB measured), so each one
#: holds ``WAIT_COST`` of the budget while it waits; one more is refused at once.
MAX_WAITING = 8
WAIT_COST = 2 * 1024 * 1024


class OverBudget(Exception):
    """A review would need more memory than the whole budget: it is never read."""


class Busy(Exception):
    """The budget stayed full for ``QUEUE_SECONDS``: the review was not read."""


class Full(Busy):
    """No room now, and ``MAX_WAITING`` reviews already wait: refused at once."""


@dataclass
class Hold:
    """Bytes of the budget one review holds; ``shrink`` once its real cost is known."""

    budget: Budget
    cost: int
    large: bool

    async def shrink(self, cost: int) -> None:
        if cost < self.cost:
            await self.budget._release(self, self.cost - cost)


class Budget:
    """Memory the reviews being read and judged may take together, counted in
    ``intake.cost`` bytes; a review waits for room, at most ``wait`` seconds.

    Reviews costing more than ``small`` may use all but ``reserved`` of it, so an
    ordinary review finds room while large ones wait. At most ``max_waiting`` reviews
    wait at once, each counted as ``wait_cost`` meanwhile (what its connection buffers
    while it waits; by default ``WAIT_COST`` scaled with ``total``); one more is refused
    at once (``Full``). ``peak`` is the most reviews held at once, ``peak_total`` with
    what the waiting ones count.
    """

    def __init__(
        self,
        *,
        total: int = BUDGET_BYTES,
        reserved: int = SMALL_RESERVE,
        small: int = SMALL_COST,
        max_waiting: int = MAX_WAITING,
        wait_cost: int | None = None,
    ) -> None:
        self.total = total
        self.reserved = reserved
        self.small = small
        self.max_waiting = max_waiting
        self.wait_cost = WAIT_COST * total // BUDGET_BYTES if wait_cost is None else wait_cost
        self.in_use = 0
        self.large_in_use = 0
        self.waiting = 0
        self.peak = 0
        self.peak_total = 0
        self._changed: asyncio.Condition | None = None

    @property
    def waiting_bytes(self) -> int:
        return self.waiting * self.wait_cost

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _limit(self, cost: int) -> int:
        return self.total if cost <= self.small else self.total - self.reserved

    def _fits(self, cost: int, *, waited: int = 0) -> bool:
        """Whether ``cost`` fits now; ``waited``: what the asking review counts while it
        waits, given back when it takes its room."""
        if self.in_use + self.waiting_bytes - waited + cost > self.total:
            return False
        return cost <= self.small or self.large_in_use + cost <= self._limit(cost)

    def _take(self, cost: int) -> Hold:
        held = Hold(self, cost, large=cost > self.small)
        self.in_use += cost
        if held.large:
            self.large_in_use += cost
        self.peak = max(self.peak, self.in_use)
        self.peak_total = max(self.peak_total, self.in_use + self.waiting_bytes)
        return held

    async def _release(self, hold: Hold, amount: int) -> None:
        async with self._condition():
            hold.cost -= amount
            self.in_use -= amount
            if hold.large:
                self.large_in_use -= amount
            self._condition().notify_all()

    async def _wait_for_room(self, cost: int, wait: float) -> Hold:
        """Room for ``cost``, at once or after waiting at most ``wait`` seconds counted
        as ``wait_cost``; raises ``Full`` or ``Busy``."""
        changed = self._condition()
        async with changed:
            if self._fits(cost):
                return self._take(cost)
            if (
                self.waiting >= self.max_waiting
                or self.in_use + self.waiting_bytes + self.wait_cost > self.total
            ):
                raise Full(cost)
            self.waiting += 1
            self.peak_total = max(self.peak_total, self.in_use + self.waiting_bytes)
            try:
                async with asyncio.timeout(wait):
                    await changed.wait_for(lambda: self._fits(cost, waited=self.wait_cost))
            except TimeoutError:
                raise Busy(cost) from None
            finally:
                self.waiting -= 1
                changed.notify_all()
            return self._take(cost)

    @contextlib.asynccontextmanager
    async def hold(self, cost: int, *, wait: float = QUEUE_SECONDS) -> AsyncIterator[Hold]:
        """Hold ``cost`` bytes for the ``with`` block; raises ``OverBudget``, ``Full`` or
        ``Busy``."""
        if cost > self._limit(cost):
            raise OverBudget(cost)
        held = await self._wait_for_room(cost, wait)
        try:
            yield held
        finally:
            await self._release(held, held.cost)
