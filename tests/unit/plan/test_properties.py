"""For any cluster and release lists: the plan's steps pass the rule one by one and end at
the goal, no plan is longer than the brute-force shortest, and an unreachable goal is one
the brute force cannot reach either."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ichor.release.versions import parse
from ichor.upgrade.choices import finals
from ichor.upgrade.path_plan import PathPlan, PlanOutcome, plan_path
from ichor.upgrade.rule import ClusterVersions
from tests.unit.plan.lists import execute, shortest

# No example database on disk: unit tests do no I/O.
pure = settings(
    database=None, deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow]
)

cilium_running = st.builds("1.{}.{}".format, st.integers(17, 21), st.integers(0, 6))
cni = st.sampled_from([None, "cilium", "cilium", "cilium", "flannel"])


@st.composite
def clusters(draw: st.DrawFn) -> ClusterVersions:
    """Mostly a Kubernetes near the range its Talos runs (Talos 1.N runs about 1.N+18 to
    1.N+23), sometimes any pair, as an adopted cluster may run."""
    talos = draw(st.integers(10, 14)) if draw(st.integers(0, 9)) else draw(st.integers(9, 15))
    if draw(st.integers(0, 9)) < 7:
        kubernetes = draw(st.integers(talos + 17, talos + 23))
    else:
        kubernetes = draw(st.integers(28, 38))
    return ClusterVersions(
        f"v1.{talos}.{draw(st.integers(0, 3))}",
        f"v1.{kubernetes}.{draw(st.integers(0, 3))}",
        draw(st.none()) if draw(st.integers(0, 9)) == 0 else draw(cilium_running),
        draw(cni),
    )


@st.composite
def release_lists(draw: st.DrawFn, lowest: int, highest: int) -> list[str]:
    """Most minors of a range, a few patches each, now and then a minor this build does
    not know (``highest``), and the odd tags a registry holds."""
    tags: list[str] = []
    for minor in range(lowest, highest + 1):
        if draw(st.integers(0, 9)) < (2 if minor == highest else 8):
            patches = draw(st.sets(st.integers(0, 5), min_size=1, max_size=3))
            tags += [f"v1.{minor}.{patch}" for patch in sorted(patches)]
    tags += draw(st.lists(st.sampled_from(["v1.14.0-rc.0", "1.13.2", "latest"]), max_size=2))
    return draw(st.permutations(tags))


talos_tags = release_lists(10, 15)
kubernetes_tags = release_lists(29, 38)


@st.composite
def goals(draw: st.DrawFn, tags: list[str], running: str) -> str | None:
    """No goal, or a recorded final (the plan refuses other goals up front), mostly one
    not older than what runs."""
    recorded = [version.tag for version in finals(tags)]
    ahead = [tag for tag in recorded if parse(tag) >= parse(running)]
    if not recorded or draw(st.integers(0, 3)) == 0:
        return None
    if ahead and draw(st.integers(0, 9)) < 9:
        return draw(st.sampled_from(ahead))
    return draw(st.sampled_from(recorded))


def brute(plan: PathPlan, *, talos: list[str], kubernetes: list[str]) -> int | None:
    assert plan.goal is not None
    return shortest(
        start=plan.start,
        talos_tags=talos,
        kubernetes_tags=kubernetes,
        talos=plan.goal.talos,
        kubernetes=plan.goal.kubernetes,
    )


@pure
@given(clusters(), talos_tags, kubernetes_tags, st.data())
def test_executing_the_plan_through_the_rules_always_succeeds_and_ends_at_the_goal(
    cluster: ClusterVersions, talos: list[str], kubernetes: list[str], data: st.DataObject
) -> None:
    result = plan_path(
        cluster=cluster,
        talos_releases=talos,
        kubernetes_releases=kubernetes,
        talos=data.draw(goals(talos, cluster.talos)),
        kubernetes=data.draw(goals(kubernetes, cluster.kubernetes)),
    )
    if result.outcome is PlanOutcome.REACHABLE:
        assert result.goal is not None
        assert result.goal.reached_by(execute(result))
        assert len(result.steps) == brute(result, talos=talos, kubernetes=kubernetes)
    elif result.outcome is PlanOutcome.UNREACHABLE and result.goal is not None:
        assert result.reason is not None
        assert "not reachable" in result.reason
        assert brute(result, talos=talos, kubernetes=kubernetes) is None
    else:
        assert result.steps == ()
        assert result.reason


@pure
@given(clusters(), talos_tags, kubernetes_tags)
def test_the_default_goal_or_its_replacement_is_the_newest_the_rules_reach(
    cluster: ClusterVersions, talos: list[str], kubernetes: list[str]
) -> None:
    result = plan_path(cluster=cluster, talos_releases=talos, kubernetes_releases=kubernetes)
    if result.outcome is PlanOutcome.INVALID:
        return
    reached = result if result.reachable else result.instead
    if reached is None:
        return
    assert reached.goal is not None
    end = execute(reached)
    assert reached.goal.reached_by(end)
    assert len(reached.steps) == brute(reached, talos=talos, kubernetes=kubernetes)
    if result.instead is not None:
        assert result.outcome is PlanOutcome.UNREACHABLE
        assert result.goal is not None
        # The replacement is reachable, and no newer Talos of its minor or the next is
        # (Talos moves one minor at a time, so none beyond them is either).
        newest = parse(end.talos)
        for version in finals(talos):
            if version > newest and version.minor <= newest.minor + 1:
                assert (
                    shortest(
                        start=cluster,
                        talos_tags=talos,
                        kubernetes_tags=kubernetes,
                        talos=version,
                        kubernetes=None,
                    )
                    is None
                )
