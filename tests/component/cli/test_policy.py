"""A site's policy (IchorInstallation ``spec.policy``) through the CLI, the API server and
the webhook: a denied Talos patch is refused for a user without the override verb with
the entry and the reason a person wrote, passed with the verb and recorded as a Warning
Event naming the entry, left out of ``--list`` (the default moves to the next patch,
"Not offered" says why) and routed around by ``ichor upgrade plan``. ``ichor init`` and
``ichor adopt`` at a denied version are warned, not refused; the next move is judged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ichor.api import kinds
from ichor.release.release_set import PINNED
from tests.component.cli.conftest import HOLDER, PLAIN, Cli
from tests.component.cli.test_clusters import Workload, workload  # noqa: F401
from tests.component.cli.test_upgrade import OLD_STATE, PINNED_STATE, _make

pytestmark = pytest.mark.component

REASON = "NIC driver regression on the R650s (INC-1234)"
POLICY: dict[str, Any] = {
    "deny": [
        {"name": "nic", "component": "talos", "versions": ["v1.14.5"], "reason": REASON},
        {
            "name": "bad-113",
            "component": "talos",
            "versions": ["v1.13.9"],
            "reason": "boot loop on the lab nodes",
        },
    ]
}
SAYS = (
    "Talos v1.14.5 is refused by this site's policy: IchorInstallation ichor, "
    f"spec.policy.deny entry 'nic' denies Talos v1.14.5 (\"{REASON}\")"
)


def write_policy(cli: Cli, raw: object) -> None:
    """The policy, written as whoever may update the installation does (the webhook
    judges the write)."""
    patched = cli.plane.kubectl(
        "patch", "ichorinstallation", kinds.INSTALLATION_NAME, "--type=merge",
        "-p", json.dumps({"spec": {"policy": raw}}),
    )  # fmt: skip
    assert patched.returncode == 0, patched.stderr


def test_a_denied_patch_is_refused_without_the_verb_and_passed_with_it_and_an_event(
    cli: Cli, recorded: Any
) -> None:
    recorded()
    write_policy(cli, POLICY)
    _make(cli, "prod", PINNED_STATE)
    refused = cli("upgrade", "talos", "prod", "v1.14.5", user=PLAIN)
    assert refused.code != 0
    assert SAYS in refused.err
    assert "Rerun with --override" in refused.err
    assert cli.operations() == []
    # the same patch is accepted where the site does not deny it
    write_policy(cli, None)
    assert cli("upgrade", "talos", "prod", "v1.14.5", "--dry-run", user=PLAIN).code == 0
    write_policy(cli, POLICY)
    passed = cli("upgrade", "talos", "prod", "v1.14.5", "--override", user=HOLDER)
    assert passed.code == 0, passed.err
    assert "Warning: override by olivia (SitePolicy)" in passed.err
    [operation] = cli.operations()
    assert operation["spec"]["version"] == "v1.14.5"
    # posted on the cluster the operation names, as every override of an operation
    [event] = [e for e in cli.events("Override") if e["involvedObject"]["kind"] == "TalosCluster"]
    assert event["type"] == "Warning"
    assert "User olivia overrode a refusal of TalosOperation" in event["message"]
    assert "SitePolicy:" in event["message"]
    assert "spec.policy.deny entry 'nic'" in event["message"]
    assert REASON in event["message"]


def test_a_denied_patch_is_not_offered_and_not_offered_says_why(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    before = cli("upgrade", "talos", "prod", "--list", "-o", "json", user=PLAIN).json
    assert before["patch"] == ["v1.14.5", "v1.14.4"]
    assert before["default"] == "v1.14.5"
    write_policy(cli, POLICY)
    after = cli("upgrade", "talos", "prod", "--list", "-o", "json", user=PLAIN).json
    assert after["patch"] == ["v1.14.4"]
    assert after["default"] == "v1.14.4"  # the next valid patch
    [line] = [n for n in after["notOffered"] if n["version"] == "v1.14.5"]
    assert line["blocker"] == "SitePolicy"
    assert line["overridable"] is True
    assert line["reason"] == f"denied by this site: {REASON}"
    table = cli("upgrade", "talos", "prod", "--list", user=PLAIN)
    assert f"Talos v1.14.5: denied by this site: {REASON}" in table.out
    # without VERSION the command plans the moved default
    default = cli("upgrade", "talos", "prod", "--dry-run", user=PLAIN)
    assert default.code == 0, default.err
    assert "v1.14.4" in default.out


def test_the_plan_routes_around_a_denied_patch(cli: Cli, recorded: Any) -> None:
    """From Talos 1.12 the tested path goes through the newest 1.13 patch, v1.13.9; the
    site denies it, so the plan goes through v1.13.8."""
    recorded()
    _make(cli, "edge", OLD_STATE)
    goal = ("--talos", "v1.14.4")
    plain = cli("upgrade", "plan", "edge", *goal, "-o", "json", user=PLAIN)
    assert [s["command"] for s in plain.json["steps"]] == [
        "ichor upgrade talos edge v1.13.9",
        "ichor upgrade talos edge v1.14.4",
    ]
    write_policy(cli, POLICY)
    routed = cli("upgrade", "plan", "edge", *goal, "-o", "json", user=PLAIN)
    assert routed.code == 0, routed.err
    assert routed.json["outcome"] == "Reachable"
    assert [s["command"] for s in routed.json["steps"]] == [
        "ichor upgrade talos edge v1.13.8",
        "ichor upgrade talos edge v1.14.4",
    ]
    # a goal the site denies is unreachable under its policy, in the site's words
    denied = cli("upgrade", "plan", "edge", "--talos", "v1.14.5", user=PLAIN)
    assert denied.code == 1
    assert "not reachable under this site's policy: denied by this site" in denied.out


def test_init_and_adopt_at_a_denied_version_are_warned_and_the_next_move_is_judged(
    cli: Cli,
    recorded: Any,
    workload: Workload,  # noqa: F811
) -> None:
    """A create is no step: ``ichor init`` writes the release set and ``ichor adopt`` what
    runs, even where the site denies it, with the entry in a warning. Every later move of
    the cluster is judged by the policy, for a user without the verb."""
    recorded()
    policy = {
        "deny": [
            *POLICY["deny"],
            {"name": "set", "component": "talos", "versions": [PINNED.talos], "reason": REASON},
        ]
    }
    write_policy(cli, policy)
    init = cli("init", "prod", user=PLAIN)
    assert init.code == 0, init.err
    assert "created as it is, though this site's policy refuses it" in init.err
    assert "spec.policy.deny entry 'set'" in init.err
    assert cli.get("taloscluster", "prod")["spec"]["talosVersion"] == PINNED.talos
    workload.node("n1", talos="v1.14.5", kubelet="v1.36.7")
    adopted = cli(
        "adopt", "edge", "--workload-kubeconfig", str(cli.plane.kubeconfig), user=PLAIN
    )  # fmt: skip
    assert adopted.code == 0, adopted.err
    assert "spec.policy.deny entry 'nic'" in adopted.err
    assert cli.get("taloscluster", "edge")["spec"]["talosVersion"] == "v1.14.5"
    # the next move is judged: to a denied version refused, off the denied one allowed
    moved = cli("upgrade", "talos", "prod", "v1.14.5", user=PLAIN)
    assert moved.code != 0
    assert SAYS in moved.err
    off = cli("upgrade", "talos", "prod", "v1.14.4", "--dry-run", user=PLAIN)
    assert off.code == 0, off.err
    assert cli.operations() == []
