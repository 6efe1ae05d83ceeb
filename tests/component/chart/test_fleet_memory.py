"""The worst memory load the tests know, on the operator the chart installs: a fleet of
1,000 observed TalosClusters while its webhook reads sixteen concurrent reviews of the
largest size, at rest, while the fleet follows a changed release list, and twice more.
The worst peak leaves at least a quarter of the chart's memory limit free, and a storm
leaves nothing behind for the next. The run is ``tests/benches/memory_bench.py``'s, in
API servers of its own; ``make bench`` runs it with more storms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benches import memory_bench
from tests.fixtures.fuzzing import figure

pytestmark = pytest.mark.component

FLEET = 1000
#: What the RSS before a storm at rest may have grown since the first: one answered
#: review of the largest size kept until a garbage collection was 8 MiB, a storm's 48.
LEFT_BEHIND = 24 * 1024 * 1024


async def test_a_fleet_and_the_largest_reviews_leave_a_quarter_of_the_limit_free(
    tmp_path: Path,
) -> None:
    measured = await memory_bench.measure(tmp_path, size=FLEET, again=2)
    for line in measured.lines():
        figure(f"fleet memory: {line}")
    assert measured.free >= memory_bench.GOAL_FREE, "\n".join(measured.lines())
    at_rest = [p for p in measured.phases if "at rest" in p.name]
    grown = at_rest[-1].before - at_rest[0].before
    assert grown < LEFT_BEHIND, "\n".join(measured.lines())
