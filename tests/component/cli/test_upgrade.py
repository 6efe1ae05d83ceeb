"""``ichor upgrade talos|kubernetes|plan`` and ``ichor cni upgrade`` against the real API
server: the choices and "Not offered" from the shared functions, the server's plan with
its refusals, the override with and without the verb, exit codes and ``--output json``."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ichor.upgrade import blocked, choices, path_plan
from ichor.upgrade.rule import ClusterVersions, Component
from tests.component.cli.conftest import HOLDER, KUBERNETES_TAGS, PLAIN, TALOS_TAGS, Cli
from tests.support import table

pytestmark = pytest.mark.component

PINNED_STATE = ClusterVersions(talos="v1.14.3", kubernetes="v1.36.6", cilium="1.20.4", cni="cilium")
OLD_STATE = ClusterVersions(talos="v1.12.4", kubernetes="v1.33.2", cilium="1.19.10", cni="cilium")


def _make(cli: Cli, name: str, state: ClusterVersions) -> None:
    major_minor = ".".join(state.talos.split(".")[:2])
    cli.cluster(
        name,
        talos=state.talos,
        kubernetes=state.kubernetes,
        contract=major_minor,
        cilium=state.cilium if isinstance(state.cilium, str) else None,
        cni=state.cni,
    )


@pytest.mark.parametrize(
    ("component", "state"),
    [
        (Component.KUBERNETES, PINNED_STATE),
        (Component.TALOS, PINNED_STATE),
        (Component.KUBERNETES, OLD_STATE),
        (Component.TALOS, OLD_STATE),
        (Component.KUBERNETES, ClusterVersions(talos="v1.14.3", kubernetes="v1.36.6")),
    ],
    ids=["kubernetes-pinned", "talos-pinned", "kubernetes-old", "talos-old", "cni-unobserved"],
)
def test_list_json_is_what_the_choice_functions_give(
    cli: Cli, recorded: Any, component: Component, state: ClusterVersions
) -> None:
    recorded()
    _make(cli, "prod", state)
    result = cli("upgrade", component.value, "prod", "--list", "-o", "json")
    assert result.code == 0, result.err
    tags = TALOS_TAGS if component is Component.TALOS else KUBERNETES_TAGS
    choose = choices.talos_choices if component is Component.TALOS else choices.kubernetes_choices
    expected = choose(cluster=state, releases=tags)
    answer = result.json
    assert answer["recommended"] == (expected.recommended.tag if expected.recommended else None)
    assert answer["patch"] == [v.tag for v in expected.patch]
    assert answer["nextMinor"] == [v.tag for v in expected.next_minor]
    assert answer["default"] == (expected.default.tag if expected.default else None)
    lines = blocked.blocked_releases(component=component, cluster=state, releases=tags)
    assert [line["message"] for line in answer["notOffered"]] == [line.message for line in lines]
    assert answer["available"] is True


def test_list_table_prints_the_groups_the_default_and_not_offered(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "kubernetes", "prod", "--list")
    assert result.code == 0, result.err
    out = result.out
    assert out.index("Recommended:") < out.index("Patch:") < out.index("Next minor:")
    assert "v1.36.7  (default)" in out
    assert out.index("Not offered:") > out.index("Next minor:")
    assert "Kubernetes v1.37.2: Cilium 1.20.4 runs Kubernetes 1.33 to 1.36" in out
    assert "a newer Ichor release is needed" in out


def test_list_of_the_issue_cluster_says_why_kubernetes_137_is_not_offered(
    cli: Cli, recorded: Any
) -> None:
    recorded()
    _make(cli, "edge", OLD_STATE)
    result = cli("upgrade", "kubernetes", "edge", "--list")
    assert result.code == 0, result.err
    assert "Kubernetes v1.37.2:" in result.out
    assert "Not offered:" in result.out


@pytest.mark.parametrize(
    ("write", "reason"),
    [
        ({"talos": None, "kubernetes": None}, "no release list has been recorded yet"),
        ({"enabled": False}, "the release check is off"),
    ],
    ids=["never-recorded", "check-off"],
)
def test_list_says_why_it_is_unavailable(
    cli: Cli, recorded: Any, write: dict[str, Any], reason: str
) -> None:
    recorded(**write)
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "talos", "prod", "--list")
    assert result.code == 0, result.err
    assert "The release list is unavailable" in result.out
    assert reason in result.out
    as_json = cli("upgrade", "talos", "prod", "--list", "-o", "json").json
    assert as_json["available"] is False
    assert reason in as_json["unavailableReason"]


def test_list_without_an_installation_says_no_check_runs(cli: Cli) -> None:
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "talos", "prod", "--list")
    assert result.code == 0
    assert "there is no IchorInstallation named ichor" in result.out


def test_without_version_the_default_choice_is_planned(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "kubernetes", "prod", "--dry-run")
    assert result.code == 0, result.err
    assert "the default choice is Kubernetes v1.36.7" in result.out
    assert "Dry run: nothing was created" in result.out
    assert cli.operations() == []


def test_an_accepted_version_creates_one_operation(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "talos", "prod", "v1.14.4", user=PLAIN)
    assert result.code == 0, result.err
    [operation] = cli.operations()
    assert operation["spec"] == {
        "clusterRef": {"name": "prod"},
        "type": "talos",
        "version": "v1.14.4",
        "override": False,
    }
    assert f"TalosOperation {cli.namespace}/{operation['metadata']['name']} created" in result.out


def test_an_incompatible_target_is_refused_for_an_ordinary_user_with_the_hint(
    cli: Cli, recorded: Any
) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "kubernetes", "prod", "v1.37.2", user=PLAIN)
    assert result.code == 1
    assert result.err.startswith("Refused: Kubernetes v1.37.2 is refused: Cilium 1.20.4 runs")
    assert "Rerun with --override" in result.err
    assert "`override: true`" not in result.err
    assert cli.operations() == []


def test_a_failed_talos_listing_marks_only_the_talos_list_stale(cli: Cli, recorded: Any) -> None:
    recorded(talos_error="cannot list tags of ghcr.io/siderolabs/installer-base: 503")
    _make(cli, "prod", PINNED_STATE)
    talos = cli("upgrade", "talos", "prod", "--list", "-o", "json").json
    kubernetes = cli("upgrade", "kubernetes", "prod", "--list", "-o", "json").json
    assert talos["available"] is True
    assert "may be stale" in talos["unavailableReason"]
    assert talos["default"] == "v1.14.5"
    assert kubernetes["available"] is True
    assert kubernetes["unavailableReason"] is None


def test_override_without_the_verb_is_refused(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "kubernetes", "prod", "v1.37.2", "--override", user=PLAIN)
    assert result.code == 1
    assert "user 'nadia' does not hold the RBAC verb `override`" in result.err
    assert "Rerun with --override" not in result.err
    assert cli.operations() == []


def test_override_by_a_holder_creates_the_operation_and_the_event(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "kubernetes", "prod", "v1.37.2", "--override", user=HOLDER)
    assert result.code == 0, result.err
    assert "Warning: override by olivia (CiliumKubernetes)" in result.err
    [operation] = cli.operations()
    assert operation["spec"]["override"] is True
    [event] = [e for e in cli.events("Override") if e["involvedObject"]["kind"] == "TalosCluster"]
    assert event["type"] == "Warning"
    assert "User olivia overrode a refusal" in event["message"]


def test_a_dry_run_override_records_no_event(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "kubernetes", "prod", "v1.37.2", "--override", "--dry-run", user=HOLDER)
    assert result.code == 0, result.err
    assert "Warning: override by olivia" in result.err
    assert cli.operations() == []
    assert cli.events("Override") == []


@pytest.mark.parametrize(
    ("component", "version", "reason"),
    [
        ("talos", table.unknown_talos(), f"Talos {table.unknown_talos()} is refused"),
        ("talos", "v1.14.0-rc.1", "is not a final release"),
        ("kubernetes", "v1.36.5", "moves only to a newer version"),
        ("kubernetes", "v1.38.0", "v1.38.0"),
    ],
    ids=["unknown-talos", "pre-release", "not-newer", "two-minors-up"],
)
def test_a_refusal_no_override_passes_has_no_override_hint(
    cli: Cli, recorded: Any, component: str, version: str, reason: str
) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", component, "prod", version, user=HOLDER)
    assert result.code == 1
    assert reason in result.err
    assert "Rerun with --override" not in result.err


def test_the_cilium_order_refusal_names_the_step(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(
        cli,
        "edge",
        ClusterVersions(talos="v1.14.3", kubernetes="v1.35.5", cilium="1.19.10", cni="cilium"),
    )
    result = cli("upgrade", "kubernetes", "edge", "v1.36.7")
    assert result.code == 1
    assert "upgrade Cilium to 1.20.4 first, the chart this Ichor embeds" in result.err
    cni = cli("cni", "upgrade", "edge", "--dry-run")
    assert cni.code == 0, cni.err
    assert "Plan accepted: Cilium to 1.20.4" in cni.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("upgrade", "talos", "prod", "1.x"), "VERSION"),
        (("cni", "upgrade", "prod", "1.20.5"), "takes no version"),
        (("upgrade", "cluster", "prod"), "ichor upgrade cluster was removed"),
        (("upgrade", "talos", "prod", "v1.14.4", "--list"), "--list takes no VERSION"),
    ],
    ids=["not-a-version", "cni-version", "no-upgrade-cluster", "list-with-version"],
)
def test_usage_errors_exit_2(cli: Cli, args: tuple[str, ...], message: str) -> None:
    _make(cli, "prod", PINNED_STATE)
    result = cli(*args)
    assert result.code == 2
    assert message in result.err


def test_a_missing_cluster_is_one_sentence(cli: Cli) -> None:
    result = cli("upgrade", "talos", "nothere", "v1.14.4")
    assert result.code == 1
    assert f"TalosCluster {cli.namespace}/nothere does not exist" in result.err
    assert len(result.err.strip().splitlines()) == 1


def _play(cli: Cli, phases: list[str]) -> threading.Thread:
    """Write the phases an executor would, to the first operation that appears."""

    def run() -> None:
        deadline = time.monotonic() + 20
        while not cli.operations() and time.monotonic() < deadline:
            time.sleep(0.1)
        [operation] = cli.operations()
        name = operation["metadata"]["name"]
        for phase in phases:
            time.sleep(0.6)
            status = {"phase": phase, "message": f"the executor says {phase}"}
            cli.set_status(name, status, plural="talosoperations")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("end", "code"), [("Succeeded", 0), ("Failed", 1)], ids=["succeeded", "failed"]
)
def test_wait_follows_the_operation_until_it_ends(
    cli: Cli, recorded: Any, end: str, code: int
) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    player = _play(cli, ["Running", end])
    result = cli("upgrade", "talos", "prod", "v1.14.5", "--wait", "--timeout", "30")
    player.join(10)
    assert result.code == code, result.err
    assert "Running: the executor says Running" in result.out
    assert f"{end}: the executor says {end}" in result.out


def test_plan_of_the_issue_cluster_reaches_talos_114_and_kubernetes_136(
    cli: Cli, recorded: Any
) -> None:
    recorded()
    _make(cli, "edge", OLD_STATE)
    goal = ("--talos", "v1.14.5", "--kubernetes", "v1.36.7")
    result = cli("upgrade", "plan", "edge", *goal, "-o", "json")
    assert result.code == 0, result.err
    expected = path_plan.plan_path(
        cluster=OLD_STATE,
        talos_releases=TALOS_TAGS,
        kubernetes_releases=KUBERNETES_TAGS,
        talos="v1.14.5",
        kubernetes="v1.36.7",
        name="edge",
    )
    assert [step["command"] for step in result.json["steps"]] == list(expected.commands)
    assert result.json["outcome"] == "Reachable"
    assert "ichor cni upgrade edge" in expected.commands
    table = cli("upgrade", "plan", "edge", *goal)
    assert table.code == 0
    for number, command in enumerate(expected.commands, start=1):
        assert f"{number}. {command}" in table.out


def test_plan_of_an_unreachable_goal_exits_1_with_the_reason(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "plan", "prod", "--kubernetes", "v1.37.2")
    assert result.code == 1
    assert "Unreachable" in result.out
    assert "a newer Ichor release is needed" in result.out


def test_plan_to_the_newest_releases_shows_what_is_reached_instead(cli: Cli, recorded: Any) -> None:
    """The default goal (the newest releases) is a goal like any other: unreached, the
    plan exits 1 (it exited 0 before), and still shows what the rules reach."""
    recorded()
    _make(cli, "prod", PINNED_STATE)
    result = cli("upgrade", "plan", "prod")
    assert result.code == 1, result.err
    assert "Unreachable" in result.out
    assert "What the rules reach instead" in result.out
    assert "ichor upgrade kubernetes prod v1.36.7" in result.out
