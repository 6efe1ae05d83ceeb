"""The operator's registry holds every part once, under ids that do not collide.

kopf keys an activity's progress by handler id: two startup handlers with one id would
let only one of them run, so each part's ids must be its own.
"""

from __future__ import annotations

from collections import Counter

import kopf
import pytest

from ichor import operator
from ichor.settings import Settings


def test_every_part_registers_its_handlers_under_ids_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ICHOR_WEBHOOK_CERT", raising=False)
    registry = operator.build_registry(kopf.OperatorRegistry(), settings=Settings.from_env())
    activities = registry._activities.get_all_handlers()  # no public listing in kopf
    ids = Counter(str(handler.id) for handler in activities)
    assert [i for i, n in ids.items() if n > 1] == []
    assert {"clusters-start", "clusters-stop", "ichor-login", "operator-exit"} <= ids.keys()


async def test_the_exit_is_bounded_under_the_pods_grace_period() -> None:
    """kopf would wait ten minutes for a stuck stop before it kills the process; the
    operator lets it wait less than the 30 s the chart gives the Pod."""
    settings = kopf.OperatorSettings()
    assert settings.process.ultimate_exiting_timeout == 600
    await operator.bound_the_exit(settings)
    assert settings.process.ultimate_exiting_timeout == operator.EXIT_TIMEOUT
    assert operator.EXIT_TIMEOUT < 30
