"""The named step of ``ClusterController.reconcile`` that merges auto-patch's part into
the status ``evaluate`` computed, under the look's one clock."""

from __future__ import annotations

from datetime import UTC, datetime

from ichor.api.autopatch import AutoPatchStatus
from ichor.api.conditions import Condition
from ichor.api.taloscluster import TalosClusterStatus
from ichor.controller.autopatch import runner
from ichor.controller.taloscluster import reconciler

NOW = datetime(2026, 6, 1, 2, 30, tzinfo=UTC)
EARLIER = datetime(2026, 5, 1, tzinfo=UTC)


def ready(type_: str) -> Condition:
    return Condition(
        type=type_, status="True", reason="Ready", message="", last_transition_time=EARLIER
    )


def test_without_auto_patch_the_status_is_evaluates() -> None:
    status = TalosClusterStatus(conditions=(ready("Ready"),))
    assert reconciler._with_auto(status, None, generation=3, now=NOW) is status


def test_auto_patch_adds_its_status_and_condition_at_the_generation() -> None:
    status = TalosClusterStatus(conditions=(ready("Ready"),))
    auto = runner.Result(
        status=AutoPatchStatus(enabled=True, window_open=True),
        condition=Condition(
            type="AutoPatchReady",
            status="True",
            reason="WindowOpen",
            message="open",
            last_transition_time=EARLIER,
        ),
    )
    merged = reconciler._with_auto(status, auto, generation=3, now=NOW)
    assert merged.auto_patch == AutoPatchStatus(enabled=True, window_open=True)
    (added,) = [c for c in merged.conditions if c.type == "AutoPatchReady"]
    assert added.observed_generation == 3
    assert added.last_transition_time == NOW
    assert [c.type for c in merged.conditions if c.type == "Ready"] == ["Ready"]


def test_auto_patch_not_configured_drops_its_condition() -> None:
    status = TalosClusterStatus(
        conditions=(ready("Ready"), ready("AutoPatchReady")),
        auto_patch=AutoPatchStatus(enabled=True),
    )
    merged = reconciler._with_auto(
        status, runner.Result(status=None, condition=None), generation=3, now=NOW
    )
    assert merged.auto_patch is None
    assert [c.type for c in merged.conditions] == ["Ready"]
