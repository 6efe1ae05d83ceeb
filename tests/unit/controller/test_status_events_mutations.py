"""A source of a TalosCluster's Events skipped fails a test that names it.

For each step of ``status.EVENT_CHAIN`` and each entry of ``status.TRANSITION_EVENTS``,
the chain runs without it and ``test_status_events_chain`` runs against it in this
process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ichor.controller.taloscluster import status as s
from tests.support.mutation import failing_tests

CHAIN_TESTS = Path(__file__).with_name("test_status_events_chain.py")
SHAPE = "test_the_chain_holds_each_source_once"


@pytest.mark.parametrize("step", [step.__name__ for step in s.EVENT_CHAIN])
def test_a_source_of_events_skipped_fails_a_test_that_names_it(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s, "EVENT_CHAIN", tuple(x for x in s.EVENT_CHAIN if x.__name__ != step))
    failed, passed = failing_tests(CHAIN_TESTS, deselect=SHAPE)
    assert passed, "the chain's tests did not run"
    assert any(step in nodeid for nodeid in failed), (step, failed)


@pytest.mark.parametrize("step", [f.__name__ for f in s.TRANSITION_EVENTS.values()])
def test_a_conditions_events_skipped_fail_a_test_that_names_them(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = {t: f for t, f in s.TRANSITION_EVENTS.items() if f.__name__ != step}
    monkeypatch.setattr(s, "TRANSITION_EVENTS", kept)
    failed, passed = failing_tests(CHAIN_TESTS, deselect=SHAPE)
    assert passed, "the chain's tests did not run"
    assert any(step in nodeid for nodeid in failed), (step, failed)


def test_the_unchanged_chain_fails_no_test() -> None:
    failed, passed = failing_tests(CHAIN_TESTS)
    assert failed == []
    assert passed >= len(s.EVENT_CHAIN) + len(s.TRANSITION_EVENTS)
