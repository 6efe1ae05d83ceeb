"""How often the controller reads a workload cluster, and how it backs off."""

from __future__ import annotations

import pytest

from ichor.settings import ControllerSettings


@pytest.mark.parametrize(
    ("failures", "delay"), [(1, 5.0), (2, 10.0), (3, 20.0), (7, 300.0), (30, 300.0)]
)
def test_a_failing_workload_is_retried_with_a_doubling_capped_backoff(
    failures: int, delay: float
) -> None:
    assert ControllerSettings().backoff(failures) == delay


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICHOR_OBSERVE_INTERVAL", "30")
    monkeypatch.setenv("ICHOR_BACKOFF_INITIAL", "1.5")
    monkeypatch.setenv("ICHOR_BACKOFF_MAX", "60")
    monkeypatch.setenv("ICHOR_OBSERVE_TIMEOUT", "7")
    monkeypatch.setenv("ICHOR_WORKERS", "3")
    assert ControllerSettings.from_env() == ControllerSettings(
        observe_interval=30.0, backoff_initial=1.5, backoff_max=60.0, observe_timeout=7.0, workers=3
    )
