"""Auto-patch's part of a TalosCluster's status, added by the same pure module at the
same clock as the rest (``status.with_auto_patch``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ichor.api.autopatch import AutoPatchStatus
from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import Condition, ConditionStatus
from ichor.api.taloscluster import TalosClusterStatus
from ichor.controller.taloscluster.status import with_auto_patch

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(hours=3)


def auto(status: ConditionStatus, reason: str, *, at: datetime = datetime.min) -> Condition:
    return Condition(
        type=Type.AUTO_PATCH_READY, status=status, reason=reason, message=reason,
        last_transition_time=at,
    )  # fmt: skip


READY = Condition(
    type=Type.READY, status=ConditionStatus.TRUE, reason="Observed", message="",
    observed_generation=2, last_transition_time=EARLIER,
)  # fmt: skip


def test_the_auto_patch_condition_takes_the_generation_and_the_one_clock() -> None:
    base = TalosClusterStatus(conditions=(READY,))
    written = with_auto_patch(
        base,
        auto_patch=AutoPatchStatus(enabled=True, reason="Started"),
        condition=auto(ConditionStatus.TRUE, "Started"),
        generation=3,
        now=NOW,
    )
    assert written.auto_patch == AutoPatchStatus(enabled=True, reason="Started")
    ready, patched = written.conditions
    assert ready == READY  # the rest as evaluate wrote it
    assert (patched.type, patched.observed_generation) == (Type.AUTO_PATCH_READY, 3)
    assert patched.last_transition_time == NOW


def test_an_unchanged_auto_patch_condition_keeps_its_transition_time() -> None:
    before = TalosClusterStatus(
        conditions=(READY, auto(ConditionStatus.FALSE, "WindowClosed", at=EARLIER))
    )
    written = with_auto_patch(
        before,
        auto_patch=None,
        condition=auto(ConditionStatus.FALSE, "WindowClosed"),
        generation=2,
        now=NOW,
    )
    assert written.conditions[1].last_transition_time == EARLIER


def test_no_auto_patch_condition_removes_it_and_the_status() -> None:
    before = TalosClusterStatus(
        auto_patch=AutoPatchStatus(enabled=True),
        conditions=(READY, auto(ConditionStatus.FALSE, "WindowClosed", at=EARLIER)),
    )
    written = with_auto_patch(before, auto_patch=None, condition=None, generation=2, now=NOW)
    assert written.auto_patch is None
    assert written.conditions == (READY,)
