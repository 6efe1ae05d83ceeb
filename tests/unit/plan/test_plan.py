"""Path plans: the fewest operations that reach a goal, each valid at its state, or why not."""

from __future__ import annotations

import pytest

from ichor.release.versions import parse
from ichor.upgrade.blocked import Blocker
from ichor.upgrade.choices import availability
from ichor.upgrade.path_plan import Goal, PathPlan, PlanOutcome, plan_path
from ichor.upgrade.rule import ClusterVersions, Component
from tests.support import table
from tests.unit.plan.lists import KUBERNETES_TAGS, TALOS_TAGS, execute, shortest

ON_1_12 = ClusterVersions("v1.12.4", "v1.33.5", "1.19.10", "cilium")
#: The newest Kubernetes minor the newest Talos runs, and a release of the minor after it,
#: which no Talos this build knows runs.
NEWEST_RUNS = table.NEWEST_TALOS_KUBERNETES_MINOR
PAST_NEWEST = table.release(table.after(NEWEST_RUNS), 1)


def plan(
    cluster: ClusterVersions,
    *,
    talos: str | None = None,
    kubernetes: str | None = None,
    talos_tags: tuple[str, ...] = TALOS_TAGS,
    kubernetes_tags: tuple[str, ...] = KUBERNETES_TAGS,
) -> PathPlan:
    return plan_path(
        cluster=cluster,
        talos_releases=talos_tags,
        kubernetes_releases=kubernetes_tags,
        talos=talos,
        kubernetes=kubernetes,
        name="prod",
    )


ACCEPTANCE = (
    "ichor upgrade kubernetes prod v1.34.7",
    "ichor upgrade kubernetes prod v1.35.6",
    "ichor cni upgrade prod",
    "ichor upgrade talos prod v1.13.5",
    "ichor upgrade kubernetes prod v1.36.7",
    "ichor upgrade talos prod v1.14.4",
)


def test_talos_1_12_kubernetes_1_33_cilium_1_19_reaches_talos_1_14_kubernetes_1_36() -> None:
    result = plan(ON_1_12, talos="v1.14.4", kubernetes="v1.36.7")
    assert result.outcome is PlanOutcome.REACHABLE
    assert result.commands == ACCEPTANCE
    assert execute(result) == ClusterVersions("v1.14.4", "v1.36.7", "1.20.4", "cilium")
    assert [step.why for step in result.steps] == [
        "Kubernetes moves one minor at a time, toward v1.36.7",
        "Kubernetes moves one minor at a time, toward v1.36.7",
        "Kubernetes v1.36.7 needs it: Cilium 1.19.10 runs Kubernetes 1.32 to 1.35",
        "Kubernetes v1.36.7 needs it: Talos v1.12.4 supports Kubernetes up to 1.35",
        "reaches the goal, Kubernetes v1.36.7",
        "reaches the goal, Talos v1.14.4",
    ]


def test_the_default_goal_says_why_1_37_is_out_of_reach_and_plans_the_newest_reachable() -> None:
    result = plan(ON_1_12)
    assert result.goal == Goal(talos=parse("v1.14.4"), kubernetes=parse("v1.37.2"), defaulted=True)
    assert result.outcome is PlanOutcome.UNREACHABLE
    assert result.reason == (
        "Kubernetes v1.37.2 is not reachable with this build: Cilium 1.20.4 runs Kubernetes "
        "1.33 to 1.36; a newer Ichor release is needed (the furthest the rules reach is "
        "Talos v1.14.4, Kubernetes v1.36.7, Cilium 1.20.4)."
    )
    assert result.blocked is not None
    assert result.blocked.blocker is Blocker.CILIUM
    assert result.blocked.needs_newer_ichor
    assert result.instead is not None
    assert result.instead.goal == Goal(talos=parse("v1.14.4"), kubernetes=parse("v1.36.7"))
    assert result.instead.commands == ACCEPTANCE
    execute(result.instead)


@pytest.mark.parametrize(
    ("cluster", "talos", "kubernetes", "commands"),
    [
        pytest.param(
            ON_1_12,
            "v1.14.4",
            None,
            ("ichor upgrade talos prod v1.13.5", "ichor upgrade talos prod v1.14.4"),
            id="talos-through-the-newest-patch-of-each-intermediate-minor",
        ),
        pytest.param(
            ON_1_12,
            None,
            "v1.36.7",
            ACCEPTANCE[:-1],
            id="a-talos-and-a-cilium-step-only-where-kubernetes-needs-them",
        ),
        pytest.param(
            ClusterVersions("v1.13.2", "v1.32.5", "1.19.10", "cilium"),
            "v1.14.4",
            None,
            ("ichor upgrade kubernetes prod v1.33.8", "ichor upgrade talos prod v1.14.4"),
            id="a-kubernetes-step-where-talos-1-14-needs-it",
        ),
        pytest.param(
            ClusterVersions("v1.10.2", "v1.29.5", None, "flannel"),
            "v1.14.4",
            "v1.37.2",
            (
                "ichor upgrade kubernetes prod v1.30.14",
                "ichor upgrade kubernetes prod v1.31.13",
                "ichor upgrade kubernetes prod v1.32.11",
                "ichor upgrade kubernetes prod v1.33.8",
                "ichor upgrade talos prod v1.11.6",
                "ichor upgrade kubernetes prod v1.34.7",
                "ichor upgrade talos prod v1.12.7",
                "ichor upgrade kubernetes prod v1.35.6",
                "ichor upgrade talos prod v1.13.5",
                "ichor upgrade kubernetes prod v1.36.7",
                "ichor upgrade talos prod v1.14.4",
                "ichor upgrade kubernetes prod v1.37.2",
            ),
            id="flannel-four-talos-minors-and-seven-kubernetes-minors-interleaved",
        ),
        pytest.param(
            ClusterVersions("v1.14.1", "v1.36.2", "1.20.4", "cilium"),
            "v1.14.3",
            "v1.36.6",
            ("ichor upgrade kubernetes prod v1.36.6", "ichor upgrade talos prod v1.14.3"),
            id="patches-go-straight-to-the-goal-not-to-the-newest-patch",
        ),
        pytest.param(
            ClusterVersions("v1.14.1", "v1.35.2", "1.18.4", "cilium"),
            None,
            "v1.36.7",
            ("ichor cni upgrade prod", "ichor upgrade kubernetes prod v1.36.7"),
            id="an-older-cilium-minor-moves-to-the-embedded-chart-first",
        ),
        pytest.param(
            ClusterVersions("v1.14.1", "v1.36.2", "1.20.4", "cilium"),
            "v1.14.1",
            "v1.36.2",
            (),
            id="the-goal-already-runs",
        ),
    ],
)
def test_the_plan_reaches_the_goal_with_the_expected_commands(
    cluster: ClusterVersions, talos: str | None, kubernetes: str | None, commands: tuple[str, ...]
) -> None:
    result = plan(cluster, talos=talos, kubernetes=kubernetes)
    assert result.outcome is PlanOutcome.REACHABLE, result.reason
    assert result.commands == commands
    end = execute(result)
    assert result.goal is not None
    assert result.goal.reached_by(end)
    if len(result.steps) == minors_to_cross(cluster, result.goal):
        return  # one operation per minor crossed: no plan can be shorter
    assert len(result.steps) == shortest(
        start=cluster,
        talos_tags=TALOS_TAGS,
        kubernetes_tags=KUBERNETES_TAGS,
        talos=result.goal.talos,
        kubernetes=result.goal.kubernetes,
    )


def minors_to_cross(cluster: ClusterVersions, goal: Goal) -> int:
    """A lower bound: Talos moves one minor per operation on the tested path and
    Kubernetes one minor per operation by the skew rule; a patch is one operation."""
    bound = 0
    for running, wanted in ((cluster.talos, goal.talos), (cluster.kubernetes, goal.kubernetes)):
        if wanted is not None and wanted != parse(running):
            bound += max(1, wanted.minor - parse(running).minor)
    return bound


@pytest.mark.parametrize(
    ("cluster", "talos", "kubernetes", "extra", "says", "blocker"),
    [
        pytest.param(
            ClusterVersions(table.newest_talos(2), "v1.36.5", "1.20.4", "cilium"),
            table.unknown_talos(1),
            None,
            (table.unknown_talos(1),),
            f"Talos {table.unknown_talos(1)} is not reachable with this build: unknown to this "
            "build; a newer Ichor release is needed",
            Blocker.UNKNOWN,
            id="an-unknown-talos",
        ),
        pytest.param(
            ClusterVersions(
                table.newest_talos(2),
                table.release(table.after(NEWEST_RUNS, -1), 5),
                None,
                "flannel",
            ),
            None,
            PAST_NEWEST,
            (table.newest_talos(4), table.release(NEWEST_RUNS, 2), PAST_NEWEST),
            f"Kubernetes {PAST_NEWEST} is not reachable with this build: Talos "
            f"{table.newest_talos(4)} supports Kubernetes up to {NEWEST_RUNS[0]}.{NEWEST_RUNS[1]}; "
            "upgrade Talos first (no Talos known to this build supports it) (the furthest the "
            f"rules reach is Talos {table.newest_talos(4)}, Kubernetes "
            f"{table.release(NEWEST_RUNS, 2)}).",
            Blocker.TALOS,
            id="the-kubernetes-after-what-the-newest-talos-runs",
        ),
        pytest.param(
            ClusterVersions("v1.14.2", "v1.35.5", "1.20.4", "cilium"),
            None,
            "v1.38.1",
            ("v1.38.1",),
            "Kubernetes v1.38.1 is not reachable with this build: it goes through Kubernetes "
            "v1.37.2, and Cilium 1.20.4 runs Kubernetes 1.33 to 1.36; a newer Ichor release "
            "is needed (the furthest the rules reach is Talos v1.14.4, Kubernetes v1.36.7, "
            "Cilium 1.20.4)",
            Blocker.CILIUM,
            id="cilium-stops-kubernetes-at-1-36",
        ),
        pytest.param(
            ClusterVersions("v1.12.2", "v1.33.5", None, "flannel"),
            "v1.12.7",
            "v1.37.1",
            (),
            "Talos v1.12.7 and Kubernetes v1.37.1 are not reachable with this build: "
            "Kubernetes v1.37.1 is refused with Talos v1.12.7",
            None,
            id="a-goal-pair-that-cannot-run-together",
        ),
    ],
)
def test_an_unreachable_goal_says_why(
    cluster: ClusterVersions,
    talos: str | None,
    kubernetes: str | None,
    extra: tuple[str, ...],
    says: str,
    blocker: Blocker | None,
) -> None:
    result = plan(
        cluster,
        talos=talos,
        kubernetes=kubernetes,
        talos_tags=TALOS_TAGS + extra,
        kubernetes_tags=KUBERNETES_TAGS + extra,
    )
    assert result.outcome is PlanOutcome.UNREACHABLE
    assert result.steps == ()
    assert result.reason is not None
    assert result.reason.startswith(says)
    assert (result.blocked.blocker if result.blocked else None) is blocker
    assert result.instead is None  # an explicit goal is not replaced
    assert result.goal is not None
    assert (
        shortest(
            start=cluster,
            talos_tags=TALOS_TAGS + extra,
            kubernetes_tags=KUBERNETES_TAGS + extra,
            talos=result.goal.talos,
            kubernetes=result.goal.kubernetes,
        )
        is None
    )


def test_a_missing_intermediate_talos_minor_is_named() -> None:
    without_1_13 = tuple(tag for tag in TALOS_TAGS if not tag.startswith("v1.13."))
    result = plan(ON_1_12, talos="v1.14.4", talos_tags=without_1_13)
    assert result.outcome is PlanOutcome.UNREACHABLE
    assert result.reason == (
        "Talos v1.14.4 is not reachable with this build: no Talos 1.13 release is recorded, "
        "and Talos moves one minor at a time (the furthest the rules reach is Talos v1.12.7, "
        "Kubernetes v1.35.6, Cilium 1.20.4)."
    )


@pytest.mark.parametrize(
    ("talos", "kubernetes", "outcome", "says"),
    [
        ("v1.14", None, PlanOutcome.INVALID, "the Talos goal 'v1.14' is not a final release"),
        (None, "v1.36.7-rc.0", PlanOutcome.INVALID, "the Kubernetes goal 'v1.36.7-rc.0'"),
        ("v1.14.9", None, PlanOutcome.INVALID, "Talos v1.14.9 is not among the recorded"),
        (
            "v1.12.1",
            None,
            PlanOutcome.UNREACHABLE,
            "Talos v1.12.1 is not reachable: the cluster runs v1.12.4, and a version never "
            "moves back.",
        ),
    ],
)
def test_a_goal_that_is_not_a_recorded_newer_final_is_refused_with_its_reason(
    talos: str | None, kubernetes: str | None, outcome: PlanOutcome, says: str
) -> None:
    result = plan(ON_1_12, talos=talos, kubernetes=kubernetes)
    assert result.outcome is outcome
    assert result.reason is not None
    assert says in result.reason
    assert result.steps == ()


@pytest.mark.parametrize(
    ("talos_usable", "kubernetes_usable", "says"),
    [
        (
            availability(check_enabled=False, recorded=True, error=None),
            availability(check_enabled=False, recorded=True, error=None),
            "The Talos release list is unavailable: the release check is off",
        ),
        (
            availability(check_enabled=True, recorded=True, error=None),
            availability(check_enabled=True, recorded=False, error=None),
            "The Kubernetes release list is unavailable: no release list has been recorded",
        ),
        (
            availability(check_enabled=True, recorded=False, error="timeout"),
            availability(check_enabled=True, recorded=True, error=None),
            "The Talos release list is unavailable: the release listing failed (timeout)",
        ),
    ],
)
def test_without_a_usable_list_the_plan_says_unavailable_and_why(
    talos_usable: object, kubernetes_usable: object, says: str
) -> None:
    from ichor.upgrade.choices import Availability

    assert isinstance(talos_usable, Availability)
    assert isinstance(kubernetes_usable, Availability)
    result = plan_path(
        cluster=ON_1_12,
        talos_releases=TALOS_TAGS,
        kubernetes_releases=KUBERNETES_TAGS,
        talos_availability=talos_usable,
        kubernetes_availability=kubernetes_usable,
    )
    assert result.outcome is PlanOutcome.UNAVAILABLE
    assert result.reason is not None
    assert result.reason.startswith(says)


def test_a_stale_list_is_used_with_a_warning() -> None:
    result = plan_path(
        cluster=ON_1_12,
        talos_releases=TALOS_TAGS,
        kubernetes_releases=KUBERNETES_TAGS,
        talos="v1.14.4",
        talos_availability=availability(check_enabled=True, recorded=True, error="403"),
    )
    assert result.outcome is PlanOutcome.REACHABLE
    assert result.warnings == (
        "The Talos release list: the last release listing failed (403), so the list may be stale.",
    )


@pytest.mark.parametrize(
    "cluster",
    [
        ClusterVersions("v1.13.2", "v1.32.5", None, None),
        ClusterVersions("v1.13.2", "v1.32.5", None, "cilium"),
    ],
)
def test_no_kubernetes_step_is_planned_while_the_cni_is_not_observed(
    cluster: ClusterVersions,
) -> None:
    explicit = plan(cluster, kubernetes="v1.33.8")
    assert explicit.outcome is PlanOutcome.UNAVAILABLE
    assert explicit.reason is not None
    assert "No Kubernetes step can be planned" in explicit.reason
    needs_one = plan(cluster, talos="v1.14.4")  # Talos 1.14 runs Kubernetes 1.33 and newer
    assert needs_one.outcome is PlanOutcome.UNAVAILABLE
    assert needs_one.reason is not None
    assert "needs a Kubernetes step, and none can be planned yet" in needs_one.reason
    talos_only = plan(cluster, talos="v1.13.5")
    assert talos_only.commands == ("ichor upgrade talos prod v1.13.5",)
    defaulted = plan(cluster)
    assert "No Kubernetes step is planned" in " ".join(defaulted.warnings)
    assert all(step.component is Component.TALOS for step in defaulted.steps)


def test_a_cluster_spec_that_does_not_parse_is_invalid() -> None:
    result = plan(ClusterVersions("v1.x", "v1.33.5", "1.19.10", "cilium"))
    assert result.outcome is PlanOutcome.INVALID
    assert result.reason is not None
    assert result.reason.startswith("The cluster's spec is refused")


def test_nothing_newer_recorded_is_an_empty_plan() -> None:
    cluster = ClusterVersions("v1.14.4", "v1.37.2", None, "flannel")
    result = plan(cluster)
    assert result.outcome is PlanOutcome.REACHABLE
    assert result.goal == Goal(defaulted=True)
    assert result.steps == ()
    assert result.end == cluster
