"""The named steps of ``plan_path`` and ``_unreachable`` (``ichor.upgrade.path_plan``), each
on its own: a change to one step fails the test that names it."""

from __future__ import annotations

from dataclasses import replace

from ichor.release.versions import Version, parse
from ichor.upgrade import blocked, path_plan
from ichor.upgrade.choices import Availability
from ichor.upgrade.path_plan import Goal, PathPlan, PlanOutcome, Releases
from ichor.upgrade.rule import ClusterVersions, Component
from tests.unit.plan.lists import KUBERNETES_TAGS, TALOS_TAGS

ON_1_12 = ClusterVersions("v1.12.4", "v1.33.5", "1.19.10", "cilium")
NO_CNI = ClusterVersions("v1.12.4", "v1.33.5")
RECORDED = {
    Component.TALOS: Releases.of(TALOS_TAGS),
    Component.KUBERNETES: Releases.of(KUBERNETES_TAGS),
}


def search(
    start: ClusterVersions = ON_1_12, goal: Goal | None = None, *, move: bool = True
) -> path_plan._Search:
    return path_plan._Search(
        start=start,
        talos=RECORDED[Component.TALOS],
        kubernetes=RECORDED[Component.KUBERNETES],
        goal=goal or Goal(),
        move_kubernetes=move,
    )


def v(tag: str) -> Version:
    return parse(tag)


def test__goal_pair_refusal_speaks_only_of_a_known_pair_the_table_refuses() -> None:
    refused = path_plan._goal_pair_refusal(Goal(talos=v("v1.14.4"), kubernetes=v("v1.30.0")))
    assert refused is not None
    assert "Talos 1.14 runs Kubernetes 1.33 to 1.37" in refused.message
    assert path_plan._goal_pair_refusal(Goal(talos=v("v1.14.4"), kubernetes=v("v1.36.7"))) is None
    assert path_plan._goal_pair_refusal(Goal(talos=v("v1.14.4"))) is None
    assert path_plan._goal_pair_refusal(Goal(kubernetes=v("v1.30.0"))) is None
    # a version the table does not know is said by the moves toward it, not here
    assert path_plan._goal_pair_refusal(Goal(talos=v("v1.99.0"), kubernetes=v("v1.36.7"))) is None


def test__ever_reached_looks_at_every_state_of_the_search() -> None:
    found = search()
    assert path_plan._ever_reached(found, Component.TALOS, v("v1.14.4"))
    assert path_plan._ever_reached(found, Component.KUBERNETES, v("v1.33.5"))  # the start
    assert not path_plan._ever_reached(found, Component.KUBERNETES, v("v1.37.2"))


def test__furthest_prefers_a_state_short_of_the_target() -> None:
    found = search()
    furthest = path_plan._furthest(found, Component.KUBERNETES, v("v1.37.2"))
    assert (furthest.talos, furthest.kubernetes, furthest.cilium) == (
        "v1.14.4",
        "v1.36.7",
        "1.20.4",
    )
    # a Kubernetes goal behind every newer state: the furthest is one short of it
    short = path_plan._furthest(found, Component.KUBERNETES, v("v1.34.0"))
    assert parse(short.kubernetes) < v("v1.34.0")
    # nothing short of it: the furthest of all
    none_short = path_plan._furthest(found, Component.KUBERNETES, v("v1.33.0"))
    assert none_short.kubernetes == "v1.36.7"


def test__stopped_names_the_line_that_stops_the_move_or_the_missing_minor() -> None:
    found = search()
    said = path_plan._stopped(found, Component.KUBERNETES, v("v1.37.2"))
    assert said is not None
    reason, line = said
    assert line is not None
    assert line.blocker is blocked.Blocker.CILIUM
    assert reason.startswith("Kubernetes v1.37.2 is not reachable with this build: Cilium")
    assert reason.endswith("(the furthest the rules reach is Talos v1.14.4, Kubernetes "
                           "v1.36.7, Cilium 1.20.4)")  # fmt: skip
    no_minor = path_plan._Search(
        start=ON_1_12,
        talos=Releases.of(["v1.12.4", "v1.14.4"]),
        kubernetes=RECORDED[Component.KUBERNETES],
        goal=Goal(),
        move_kubernetes=True,
    )
    missing = path_plan._stopped(no_minor, Component.TALOS, v("v1.14.4"))
    assert missing is not None
    assert missing[1] is None
    assert "no Talos 1.13 release is recorded" in missing[0]


def test__under_says_a_site_policy_or_this_build() -> None:
    def line(blocker: blocked.Blocker) -> blocked.BlockedRelease:
        return blocked.BlockedRelease(
            component=Component.TALOS, version=v("v1.14.4"), blocker=blocker, reason="r", step="s"
        )

    assert path_plan._under(line(blocked.Blocker.SITE_POLICY)) == "under this site's policy"
    assert path_plan._under(line(blocked.Blocker.SITE_POLICY_UNREADABLE)) == (
        "under this site's policy"
    )
    assert path_plan._under(line(blocked.Blocker.CILIUM)) == "with this build"


def test__usable_lists_refuses_an_unusable_list_and_warns_of_a_stale_one() -> None:
    fine = Availability(available=True)
    stale = Availability(available=True, reason="stale since noon")
    off = Availability(available=False, reason="the check is off")
    assert path_plan._usable_lists(ON_1_12, talos=fine, kubernetes=fine) == ()
    assert path_plan._usable_lists(ON_1_12, talos=stale, kubernetes=stale) == (
        "The Talos release list: stale since noon.",
        "The Kubernetes release list: stale since noon.",
    )
    refused = path_plan._usable_lists(ON_1_12, talos=stale, kubernetes=off)
    assert isinstance(refused, PathPlan)
    assert refused.outcome is PlanOutcome.UNAVAILABLE
    assert refused.reason == "The Kubernetes release list is unavailable: the check is off."
    first = path_plan._usable_lists(ON_1_12, talos=off, kubernetes=replace(off, reason="x"))
    assert isinstance(first, PathPlan)
    assert first.reason is not None
    assert first.reason.startswith("The Talos release list")


def test__wanted_checks_a_given_goal_and_defaults_to_the_newest() -> None:
    talos = RECORDED[Component.TALOS]

    def wanted(given: str | None, *, defaulted: bool = False) -> object:
        return path_plan._wanted(
            Component.TALOS,
            given,
            cluster=ON_1_12,
            running=v("v1.12.4"),
            releases=talos,
            defaulted=defaulted,
        )

    assert wanted(None) is None
    assert wanted(None, defaulted=True) == v("v1.14.4")
    assert wanted("v1.13.5") == v("v1.13.5")
    assert wanted("v1.12.4") == v("v1.12.4")  # what runs is no move
    unrecorded = path_plan._wanted(
        Component.TALOS, "v1.12.8", cluster=ON_1_12, running=v("v1.12.8"), releases=talos,
        defaulted=False,
    )  # fmt: skip
    assert unrecorded == v("v1.12.8")  # and needs no recorded release
    behind = wanted("v1.12.1")
    assert isinstance(behind, PathPlan)
    assert behind.outcome is PlanOutcome.UNREACHABLE
    for invalid in ("v1.13", "v1.13.9", "v1.14.0-rc.0"):
        answer = wanted(invalid)
        assert isinstance(answer, PathPlan)
        assert answer.outcome is PlanOutcome.INVALID
    newest_behind = path_plan._wanted(
        Component.TALOS, None, cluster=ON_1_12, running=v("v1.14.4"), releases=talos,
        defaulted=True,
    )  # fmt: skip
    assert newest_behind is None


def test__gated_refuses_an_asked_kubernetes_move_and_drops_a_defaulted_one() -> None:
    gate = "no CNI is observed"
    moved = Goal(talos=v("v1.13.5"), kubernetes=v("v1.34.7"))
    assert path_plan._gated(moved, cluster=NO_CNI, running=v("v1.33.5"), gate=None) == (moved, ())
    still = Goal(kubernetes=v("v1.33.5"))
    assert path_plan._gated(still, cluster=NO_CNI, running=v("v1.33.5"), gate=gate) == (still, ())
    refused = path_plan._gated(moved, cluster=NO_CNI, running=v("v1.33.5"), gate=gate)
    assert isinstance(refused, PathPlan)
    assert refused.reason == "No Kubernetes step can be planned: no CNI is observed."
    defaulted = replace(moved, defaulted=True)
    dropped = path_plan._gated(defaulted, cluster=NO_CNI, running=v("v1.33.5"), gate=gate)
    assert dropped == (
        Goal(talos=v("v1.13.5"), defaulted=True),
        ("No Kubernetes step is planned: no CNI is observed.",),
    )


def test__goal_refuses_a_spec_that_does_not_parse_then_checks_talos_first() -> None:
    broken = path_plan._goal(
        ClusterVersions("garbage", "v1.33.5"), talos=None, kubernetes=None, recorded=RECORDED,
        gate=None,
    )  # fmt: skip
    assert isinstance(broken, PathPlan)
    assert broken.outcome is PlanOutcome.INVALID
    both = path_plan._goal(
        ON_1_12, talos="v1.12.1", kubernetes="v9.9.9", recorded=RECORDED, gate=None
    )
    assert isinstance(both, PathPlan)
    assert both.reason is not None
    assert both.reason.startswith("Talos v1.12.1")
    defaulted = path_plan._goal(ON_1_12, talos=None, kubernetes=None, recorded=RECORDED, gate=None)
    assert defaulted == (Goal(talos=v("v1.14.4"), kubernetes=v("v1.37.2"), defaulted=True), ())


def test__reached_ungated_asks_the_search_with_kubernetes_free() -> None:
    goal = Goal(kubernetes=v("v1.34.7"))
    gated = search(goal=goal, move=False)
    assert gated.walk(goal) is None
    assert path_plan._reached_ungated(gated, goal)
    assert not path_plan._reached_ungated(gated, Goal(kubernetes=v("v1.37.2")))


def test__not_reached_says_unavailable_only_when_the_gate_alone_stops_it() -> None:
    goal = Goal(kubernetes=v("v1.34.7"))
    held = path_plan._not_reached(
        search(goal=goal, move=False), goal, gate="held", name="prod", recorded=RECORDED,
        warnings=("w",),
    )  # fmt: skip
    assert held.outcome is PlanOutcome.UNAVAILABLE
    assert (
        held.reason
        == "Kubernetes v1.34.7 needs a Kubernetes step, and none can be planned yet: held."
    )
    assert held.warnings == ("w",)
    # no gate: the goal is unreachable, whatever a search with Kubernetes free would find
    ungated = path_plan._not_reached(
        search(goal=goal, move=False), goal, gate=None, name="prod", recorded=RECORDED,
        warnings=(),
    )  # fmt: skip
    assert ungated.outcome is PlanOutcome.UNREACHABLE
    far = Goal(kubernetes=v("v1.37.2"))
    out = path_plan._not_reached(
        search(goal=far), far, gate=None, name="prod", recorded=RECORDED, warnings=()
    )
    assert out.outcome is PlanOutcome.UNREACHABLE
    assert out.reason is not None
    assert out.reason.endswith(".")
    assert out.blocked is not None
    assert out.instead is None  # not a defaulted goal


def test__instead_plans_the_newest_reached_for_a_defaulted_goal_only() -> None:
    goal = Goal(talos=v("v1.14.4"), kubernetes=v("v1.37.2"), defaulted=True)
    found = search(goal=goal)
    instead = path_plan._instead(found, goal, name="prod", recorded=RECORDED, warnings=("w",))
    assert instead is not None
    assert instead.goal == Goal(talos=v("v1.14.4"), kubernetes=v("v1.36.7"))
    assert instead.outcome is PlanOutcome.REACHABLE
    assert instead.warnings == ("w",)
    assert instead.commands[0] == "ichor upgrade kubernetes prod v1.34.7"
    asked = replace(goal, defaulted=False)
    assert path_plan._instead(found, asked, name="prod", recorded=RECORDED, warnings=()) is None
    stuck = search(ClusterVersions("v1.14.4", "v1.36.7", "1.20.4", "cilium"), goal=goal)
    assert path_plan._instead(stuck, goal, name="prod", recorded=RECORDED, warnings=()) is None


def test__reachable_plans_the_path_found_with_its_warnings() -> None:
    goal = Goal(kubernetes=v("v1.34.7"))
    path = search(goal=goal).walk(goal)
    assert path is not None
    plan = path_plan._reachable(
        path, start=ON_1_12, goal=goal, name="prod", recorded=RECORDED, warnings=("w",)
    )
    assert plan.outcome is PlanOutcome.REACHABLE
    assert (plan.start, plan.goal, plan.warnings) == (ON_1_12, goal, ("w",))
    assert plan.commands == ("ichor upgrade kubernetes prod v1.34.7",)
