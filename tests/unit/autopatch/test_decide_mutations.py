"""A step of the auto-patch decision skipped (always passing) fails a test that names it.

For each step of ``decisions.CHAIN`` and each gate of ``decisions.GATE_CHAIN``, the chain
runs without it and ``test_decide_chain`` runs against it in this process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ichor.controller.autopatch import decisions as d
from tests.support.mutation import failing_tests

CHAIN_TESTS = Path(__file__).with_name("test_decide_chain.py")
#: The tests that read the chain itself, not what it decides.
SHAPE = "test_the_chain_holds_each_step or test_every_step_but_the_last"


@pytest.mark.parametrize("step", [step.__name__ for step in d.CHAIN])
def test_a_step_of_decide_skipped_fails_a_test_that_names_it(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(d, "CHAIN", tuple(s for s in d.CHAIN if s.__name__ != step))
    failed, passed = failing_tests(CHAIN_TESTS, deselect=SHAPE)
    assert passed, "the chain's tests did not run"
    assert any(step in nodeid for nodeid in failed), (step, failed)


@pytest.mark.parametrize("gate", [gate.__name__ for gate in d.GATE_CHAIN])
def test_a_health_gate_skipped_fails_a_test_that_names_it(
    gate: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(d, "GATE_CHAIN", tuple(g for g in d.GATE_CHAIN if g.__name__ != gate))
    failed, passed = failing_tests(CHAIN_TESTS, deselect=SHAPE)
    assert passed, "the chain's tests did not run"
    assert any(gate in nodeid for nodeid in failed), (gate, failed)


def test_the_unchanged_chain_fails_no_test() -> None:
    failed, passed = failing_tests(CHAIN_TESTS)
    assert failed == []
    assert passed >= len(d.CHAIN) + len(d.GATE_CHAIN)
