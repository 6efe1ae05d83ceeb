"""The memory budget of the reviews being read and judged."""

from __future__ import annotations

import asyncio

import pytest

from ichor.webhook import intake
from ichor.webhook.budget import Budget, Busy, Full, OverBudget


async def test_waiting_reviews_are_counted_in_the_budget_and_bounded() -> None:
    """While it waits, a review's connection buffers what arrives of its body: each
    waiting review counts ``wait_cost``, at most ``max_waiting`` wait, and one more is
    refused at once rather than buffered outside the budget."""
    import asyncio
    import time

    budget = Budget(total=100, reserved=0, small=0, max_waiting=2, wait_cost=5)
    async with budget.hold(80) as first:
        waiters = [asyncio.create_task(_hold(budget, 25, wait=2.0)) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert budget.waiting == 2
        assert budget.in_use + budget.waiting_bytes == 90
        started = time.monotonic()
        with pytest.raises(Full):
            async with budget.hold(20, wait=2.0):
                pass
        assert time.monotonic() - started < 0.5  # at once, not after waiting
        # a review that fits now is not held back by those that wait
        async with budget.hold(5, wait=0.05):
            assert budget.in_use + budget.waiting_bytes == 95
        await first.shrink(40)
        await asyncio.gather(*waiters)
    assert budget.in_use == 0
    assert budget.waiting == 0
    assert budget.peak_total >= 90


async def test_no_room_for_even_the_wait_is_refused_at_once() -> None:
    budget = Budget(total=100, reserved=0, small=0, max_waiting=8, wait_cost=30)
    async with budget.hold(80):
        with pytest.raises(Full):
            async with budget.hold(50, wait=2.0):
                pass


async def _hold(budget: Budget, cost: int, *, wait: float) -> None:
    async with budget.hold(cost, wait=wait):
        pass


async def test_the_budget_queues_large_reviews_and_keeps_room_for_small_ones() -> None:
    budget = Budget(total=100, reserved=20, small=10)
    async with budget.hold(80):
        # a second large review waits, and is told the budget is full
        with pytest.raises(Busy):
            async with budget.hold(11, wait=0.05):
                pass
        async with budget.hold(10, wait=0.05), budget.hold(10, wait=0.05):
            assert budget.in_use == 100
    assert budget.in_use == 0
    with pytest.raises(OverBudget):
        async with budget.hold(81):
            pass


async def test_a_waiting_review_gets_room_once_another_shrinks() -> None:
    budget = Budget(total=100, reserved=0, small=0)
    order: list[str] = []

    async def second() -> None:
        async with budget.hold(60, wait=2.0):
            order.append("second")

    async with budget.hold(90) as first:
        task = asyncio.create_task(second())
        await asyncio.sleep(0.05)
        assert order == []
        await first.shrink(30)
        await asyncio.wait_for(task, 1.0)
        order.append("first done")
    assert order == ["second", "first done"]
    assert budget.in_use == 0
    assert budget.peak == 90


def test_a_review_of_the_largest_size_can_be_read_within_the_budget() -> None:
    budget = Budget()
    bound = intake.cost_bound(intake.MAX_REVIEW_BYTES)
    assert bound > budget.small
    assert bound <= budget.total - budget.reserved
