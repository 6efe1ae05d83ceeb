"""The generation reads and the clock every controller shares."""

from __future__ import annotations

from datetime import UTC

import pytest

from ichor.kube import bodies, clock


@pytest.mark.parametrize(
    ("body", "generation", "observed"),
    [
        ({"metadata": {"generation": 3}, "status": {"observedGeneration": 2}}, 3, 2),
        ({}, None, None),
        ({"metadata": None, "status": None}, None, None),
        ({"metadata": {"generation": "3"}, "status": {"observedGeneration": True}}, None, None),
    ],
    ids=["numbers", "absent", "null", "not-numbers"],
)
def test_a_generation_is_a_number_or_none(
    body: dict[str, object], generation: int | None, observed: int | None
) -> None:
    assert bodies.generation(body) == generation
    assert bodies.observed_generation(body) == observed


def test_the_clock_reads_utc_to_the_second() -> None:
    now = clock.now()
    assert now.tzinfo is UTC
    assert now.microsecond == 0
