"""The lenient reads of stored objects: a setting whole or not at all, a record field by
field, and the IchorInstallation's status part by part, the one way every reader uses."""

from __future__ import annotations

from typing import Any

from ichor.api.autopatch import AutoPatchSpec, FleetAutoPatchStatus
from ichor.api.ichorinstallation import Installation, UpgradeTargets, read_status
from ichor.api.reading import read_model, read_whole
from ichor.upgrade.rule import Component

HALT = {
    "component": "talos", "version": "v1.14.5", "cluster": "ns/edge", "operation": "op-1",
    "reason": "Job failed", "time": "2026-06-01T02:30:00Z", "until": "2099-01-01T00:00:00Z",
}  # fmt: skip


def test_a_setting_is_read_whole_or_not_at_all() -> None:
    assert read_whole(AutoPatchSpec, {"suspended": True}) == AutoPatchSpec(suspended=True)
    # one bad field: nothing of it applies (a window half read would run at another time)
    assert read_whole(AutoPatchSpec, {"suspended": True, "windows": "every day"}) is None
    for absent in (None, "text", [1, 2]):
        assert read_whole(AutoPatchSpec, absent) is None


def test_a_record_keeps_the_fields_that_load() -> None:
    read = read_model(UpgradeTargets, {"talos": ["v1.14.3"], "kubernetes": 7})
    assert read == UpgradeTargets(talos=("v1.14.3",))
    assert read_model(UpgradeTargets, None) is None


def test_the_installation_status_is_read_part_by_part() -> None:
    raw: dict[str, Any] = {
        "observedGeneration": 4,
        "upgradeTargets": {"talos": ["v1.14.3"], "kubernetes": "not a list"},
        "latestRelease": "garbage",
        "autoPatch": {"halts": [HALT], "seen": 5},
        "conditions": [
            {"type": "ReleaseCheckSucceeded", "status": "True", "reason": "Listed",
             "message": "", "lastTransitionTime": "2026-06-01T02:30:00Z"},
            {"type": "Broken"},
        ],
    }  # fmt: skip
    status = read_status(raw)
    assert status.observed_generation == 4
    assert status.upgrade_targets == UpgradeTargets(talos=("v1.14.3",))
    assert status.latest_release is None
    assert status.auto_patch is not None
    assert [h.operation for h in status.auto_patch.halts] == ["op-1"]
    assert status.auto_patch.seen == FleetAutoPatchStatus().seen
    assert [c.type for c in status.conditions] == ["ReleaseCheckSucceeded"]
    for nothing in (None, "text", {"observedGeneration": True}):
        assert read_status(nothing).observed_generation is None


def test_a_bad_part_of_the_installation_status_leaves_its_lists_usable() -> None:
    """One unreadable part (here the auto-patch record) used to make the whole status
    count as "no list yet" for the choices; each list is read on its own now."""
    body = {
        "spec": {},
        "status": {
            "upgradeTargets": {"checkedAt": "2026-06-01T02:30:00Z", "talos": ["v1.14.5"]},
            "autoPatch": {"halts": "not a list"},
        },
    }
    recorded = Installation.from_body(body).recorded(Component.TALOS)
    assert recorded.releases == ("v1.14.5",)
    assert recorded.availability.available
