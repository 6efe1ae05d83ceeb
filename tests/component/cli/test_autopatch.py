"""``ichor autopatch suspend|resume`` and the auto-patch column of ``ichor status``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ichor.api import kinds
from ichor.api.autopatch import RESUME_ANNOTATION
from tests.component.cli.conftest import PLAIN, Cli

pytestmark = pytest.mark.component

SUSPENDED = {
    "enabled": True,
    "windowOpen": True,
    "nextWindow": {"start": "2026-06-01T02:00:00Z", "end": "2026-06-01T06:00:00Z"},
    "suspension": {
        "operation": "auto-patch-prod-talos-v1-14-5-0123abcd", "component": "talos",
        "version": "v1.14.5", "reason": "Job failed", "time": "2026-06-01T02:10:00Z",
    },
    "reason": "PatchFailed",
    "message": "auto-patch is suspended",
}  # fmt: skip
FAILED_CONDITION = {
    "type": "AutoPatchReady", "status": "False", "reason": "PatchFailed",
    "message": "auto-patch is suspended: TalosOperation auto-patch-prod-talos-v1-14-5-0123abcd "
    "failed",
    "lastTransitionTime": "2026-06-01T02:10:00Z",
}  # fmt: skip


def test_suspend_then_resume_writes_the_spec(cli: Cli) -> None:
    cli.cluster("prod")
    done = cli("autopatch", "suspend", "prod")
    assert done.code == 0, done.err
    assert "auto-patch suspended" in done.out
    assert cli.get("taloscluster", "prod")["spec"]["autoPatch"] == {"suspended": True}
    resumed = cli("autopatch", "resume", "prod")
    assert resumed.code == 0, resumed.err
    stored = cli.get("taloscluster", "prod")
    # the cluster's own setting goes (null), rather than a false that would beat a
    # fleet-wide suspension for ever
    assert "suspended" not in (stored["spec"].get("autoPatch") or {})
    assert RESUME_ANNOTATION not in (stored["metadata"].get("annotations") or {})
    assert "not configured" in resumed.err


def test_resume_leaves_the_fleets_suspension_in_force_and_says_so(cli: Cli, recorded: Any) -> None:
    recorded()
    cli.plane.kubectl(
        "patch", "ichorinstallation", kinds.INSTALLATION_NAME, "--type=merge",
        "-p", json.dumps({"spec": {"autoPatch": {"suspended": True}}}),
    )  # fmt: skip
    cli.cluster("prod")
    cli.cluster("edge")
    assert cli("autopatch", "suspend", "prod").code == 0
    resumed = cli("autopatch", "resume", "prod")
    assert resumed.code == 0, resumed.err
    assert "suspended" not in (cli.get("taloscluster", "prod")["spec"].get("autoPatch") or {})
    assert "the fleet's auto-patch is suspended" in resumed.out
    assert "IchorInstallation" in resumed.out
    # a cluster with no setting of its own gets none: the fleet's still decides
    untouched = cli("autopatch", "resume", "edge")
    assert untouched.code == 0, untouched.err
    assert "autoPatch" not in cli.get("taloscluster", "edge")["spec"]
    assert "the fleet's auto-patch is suspended" in untouched.out


def test_resume_after_a_failure_names_the_failed_operation(cli: Cli) -> None:
    cli.cluster("prod")
    cli.set_status("prod", {"autoPatch": SUSPENDED, "conditions": [FAILED_CONDITION]})
    resumed = cli("autopatch", "resume", "prod")
    assert resumed.code == 0, resumed.err
    assert "resumed after TalosOperation auto-patch-prod-talos-v1-14-5-0123abcd" in resumed.out
    annotations = cli.get("taloscluster", "prod")["metadata"]["annotations"]
    assert annotations[RESUME_ANNOTATION] == "auto-patch-prod-talos-v1-14-5-0123abcd"


def test_status_shows_the_window_and_the_failure(cli: Cli) -> None:
    cli.cluster("prod")
    cli.cluster("edge")
    plain = cli("status")
    assert "AUTO-PATCH" not in plain.out  # nothing configured: no column
    cli.set_status("prod", {"autoPatch": SUSPENDED, "conditions": [FAILED_CONDITION]})
    closed = {**SUSPENDED, "windowOpen": False, "reason": "WindowClosed"}
    closed.pop("suspension")
    cli.set_status("edge", {"autoPatch": closed})
    table = cli("status")
    assert table.code == 0, table.err
    assert "AUTO-PATCH" in table.out.splitlines()[0]
    (prod,) = [line for line in table.out.splitlines() if line.startswith("prod")]
    (edge,) = [line for line in table.out.splitlines() if line.startswith("edge")]
    assert prod.rstrip().endswith("failed")
    assert edge.rstrip().endswith("next 2026-06-01 02:00Z")
    assert "prod: auto-patch is suspended: TalosOperation" in table.out
    rows = {row["name"]: row for row in cli("status", "-o", "json").json}
    assert rows["prod"]["autoPatch"]["suspension"]["version"] == "v1.14.5"
    assert rows["edge"]["autoPatch"]["windowOpen"] is False


def test_a_user_who_may_not_update_clusters_is_refused_in_one_sentence(cli: Cli) -> None:
    cli.cluster("prod")
    refused = cli("autopatch", "suspend", "prod", user=PLAIN)
    assert refused.code == 1
    assert "forbidden" in refused.err.lower()
    assert "Traceback" not in refused.err
    assert "autoPatch" not in cli.get("taloscluster", "prod")["spec"]


def test_a_missing_cluster_is_one_sentence(cli: Cli) -> None:
    missing = cli("autopatch", "resume", "nope")
    assert missing.code == 1
    assert "TalosCluster" in missing.err
    assert "does not exist" in missing.err
