"""A site's policy can only refuse more: over random policies, clusters and tag lists,
the choices with a policy are a subset of those without, every refusal without it is one
with it (on every path: the target rule, the TalosCluster write, the executor), and no
policy makes an unknown version pass, not even for a holder of the override verb."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from ichor.release import policy, steps
from ichor.release.policy import SitePolicy
from ichor.release.refusals import Rule, Verdict
from ichor.upgrade import choices, path_plan
from ichor.upgrade.rule import ClusterVersions, Component, judge_target
from ichor.webhook import decisions
from ichor.webhook.reviews import ClusterObject, NamespacedName, Requester
from tests.support import table
from tests.unit.plan.lists import execute

pure = settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))

T_LOW, T_HIGH = 12, table.UNKNOWN_TALOS_MINOR[1]
K_LOW, K_HIGH = 31, table.UNKNOWN_KUBERNETES_MINOR[1]
C_LOW, C_HIGH = 18, table.UNKNOWN_CILIUM_MINOR[1]


def _release(minor: int, patch: int, *, v: bool = True) -> str:
    return f"{'v' if v else ''}1.{minor}.{patch}"


def releases(low: int, high: int, *, v: bool = True) -> st.SearchStrategy[str]:
    return st.builds(lambda m, p: _release(m, p, v=v), st.integers(low, high), st.integers(0, 7))


_COMPONENTS = {
    "talos": (T_LOW, T_HIGH, True),
    "kubernetes": (K_LOW, K_HIGH, True),
    "cilium": (C_LOW, C_HIGH, False),
}


@st.composite
def spans(draw: st.DrawFn, component: str) -> dict[str, Any]:
    low, high, v = _COMPONENTS[component]
    found: dict[str, Any] = {}
    if draw(st.booleans()):
        found["versions"] = draw(st.lists(releases(low, high, v=v), min_size=1, max_size=3))
    if draw(st.booleans()) or not found:
        ends = sorted(
            draw(st.lists(releases(low, high, v=v), min_size=2, max_size=2)),
            key=lambda t: tuple(int(x) for x in t.lstrip("v").split(".")),
        )
        bounds = dict(zip(("from", "to"), ends, strict=True))
        if draw(st.booleans()):
            bounds.pop(draw(st.sampled_from(["from", "to"])))
        found["range"] = bounds
    return found


@st.composite
def raw_policies(draw: st.DrawFn) -> dict[str, Any]:
    deny: list[dict[str, Any]] = []
    for index in range(draw(st.integers(0, 3))):
        component = draw(st.sampled_from(list(_COMPONENTS)))
        entry: dict[str, Any] = {"name": f"d{index}", "component": component, "reason": "r"}
        entry.update(draw(spans(component)))
        if draw(st.integers(0, 3)) == 3:
            other = draw(st.sampled_from([c for c in _COMPONENTS if c != component]))
            entry["with"] = {"component": other, **draw(spans(other))}
        deny.append(entry)
    highest: list[dict[str, Any]] = []
    for index in range(draw(st.integers(0, 2))):
        component = draw(st.sampled_from(list(_COMPONENTS)))
        low, high, _ = _COMPONENTS[component]
        minor = draw(st.integers(low, high))
        highest.append(
            {"name": f"h{index}", "component": component, "minor": f"1.{minor}", "reason": "r"}
        )
    raw: dict[str, Any] = {}
    if deny:
        raw["deny"] = deny
    if highest:
        raw["highestMinor"] = highest
    return raw


site_policies = st.one_of(
    raw_policies().map(policy.read),
    raw_policies().map(policy.read),
    st.just(SitePolicy(unreadable="spec.policy is not an object")),
)
ciliums = st.one_of(st.none(), releases(C_LOW - 2, C_HIGH, v=False))
cni_kinds = st.sampled_from([None, "cilium", "cilium", "flannel"])


@st.composite
def clusters(draw: st.DrawFn) -> ClusterVersions:
    kind = draw(cni_kinds)
    preset = draw(st.sampled_from(["cilium", "cilium", "unmanaged"]))
    return ClusterVersions(
        talos=draw(releases(T_LOW, T_HIGH)),
        kubernetes=draw(releases(K_LOW, K_HIGH)),
        cilium=steps.cilium_release(preset=preset, detected=kind, version=draw(ciliums)),
        cni=kind,
        preset=preset,
    )


tag_lists = st.lists(st.one_of(releases(T_LOW, T_HIGH), releases(K_LOW, K_HIGH)), max_size=24)


def _contains(without: Verdict, with_policy: Verdict) -> None:
    """Every refusal without the policy is one with it, a blocking one stays blocking."""
    for refusal in without.refusals:
        assert refusal in with_policy.refusals, (without, with_policy)
    if without.blocking is not None:
        assert with_policy.blocking == without.blocking


@pure
@given(site_policies, clusters(), tag_lists, st.data())
def test_the_choices_with_a_policy_are_a_subset_of_those_without(
    site: SitePolicy, cluster: ClusterVersions, tags: list[str], data: st.DataObject
) -> None:
    for component in (Component.TALOS, Component.KUBERNETES):  # releases the choices look at
        tags += data.draw(st.lists(near(cluster, component), max_size=6))
    if tags and site.unreadable is None and data.draw(st.booleans()):
        tag = data.draw(st.sampled_from(tags))
        component = data.draw(st.sampled_from([Component.TALOS, Component.KUBERNETES]))
        aimed = policy.read({"deny": [denying(tag, component)]})
        site = SitePolicy(entries=(*site.entries, *aimed.entries))
    for choose in (choices.talos_choices, choices.kubernetes_choices):
        without = choose(cluster=cluster, releases=tags)
        found = choose(cluster=replace(cluster, policy=site), releases=tags)
        assert set(found.offered) <= set(without.offered)
        event("some choice removed" if set(found.offered) < set(without.offered) else "same")
        if found.default is not None:
            assert found.default in found.offered


@st.composite
def near(draw: st.DrawFn, cluster: ClusterVersions, component: Component) -> str:
    """A target past the path and skew rules now and then (a newer patch, the next minor),
    where the pairs and the policy decide; else anywhere."""
    if component is Component.CNI:
        return ""
    running = cluster.talos if component is Component.TALOS else cluster.kubernetes
    minor, patch = (int(x) for x in running.split(".")[1:])
    close = st.one_of(
        st.builds(lambda p: _release(minor, p), st.integers(patch + 1, patch + 4)),
        st.builds(lambda p: _release(minor + 1, p), st.integers(0, 7)),
    )
    return draw(st.one_of(close, close, releases(T_LOW, K_HIGH)))


def denying(target: str, component: Component) -> dict[str, Any]:
    """A policy entry that denies exactly ``target`` (so the policy has a say)."""
    return {"name": "aimed", "component": component.value, "versions": [target], "reason": "r"}


@st.composite
def scenes(draw: st.DrawFn) -> tuple[ClusterVersions, Component, str, bool]:
    """A cluster, a component and a target near it; and whether to add an entry that
    denies exactly that target (so the policy has a say)."""
    cluster = draw(clusters())
    component = draw(st.sampled_from(list(Component)))
    return cluster, component, draw(near(cluster, component)), draw(st.booleans())


#: The corner that matters: the table's overridable pair refusal must be read before the
#: policy, whose refusal (here one no override passes) must not hide it.
PAIR_THEN_UNREADABLE = (
    SitePolicy(unreadable="spec.policy is not an object"),
    (ClusterVersions("v1.13.2", "v1.32.3", None, "flannel"), Component.TALOS, "v1.14.3", False),
)


@settings(pure, max_examples=300)
@given(site_policies, scenes())
@example(*PAIR_THEN_UNREADABLE)
def test_every_refusal_without_a_policy_is_one_with_it(
    site: SitePolicy, scene: tuple[ClusterVersions, Component, str, bool]
) -> None:
    cluster, component, target, aim = scene
    if component is not Component.CNI and aim and site.unreadable is None:
        aimed = policy.read({"deny": [denying(target, component)]})
        site = SitePolicy(entries=(*site.entries, *aimed.entries))
    without = judge_target(component=component, target=target, cluster=cluster)
    found = judge_target(component=component, target=target, cluster=replace(cluster, policy=site))
    _contains(without, found)
    added = set(found.refusals) - set(without.refusals)
    assert all(r.rule in (Rule.SITE_POLICY, Rule.SITE_POLICY_UNREADABLE) for r in added)
    event("refused more" if added else "the same")


def _object(cluster: ClusterVersions, cilium: str | None) -> ClusterObject:
    return ClusterObject(
        ref=NamespacedName("team-a", "prod"),
        talos=cluster.talos,
        kubernetes=cluster.kubernetes,
        contract=f"v1.{cluster.talos.split('.')[1]}",
        detected_cni="cilium" if cilium else None,
        detected_cni_version=cilium,
    )


@pure
@given(
    site_policies,
    clusters(),
    releases(T_LOW, T_HIGH),
    releases(K_LOW, K_HIGH),
    ciliums,
)
def test_a_cluster_write_is_refused_at_least_as_much_with_a_policy(
    site: SitePolicy, cluster: ClusterVersions, talos: str, kubernetes: str, cilium: str | None
) -> None:
    old = _object(cluster, cilium)
    new = replace(old, talos=talos, kubernetes=kubernetes)
    without = decisions.review_cluster(new=new, old=old)
    found = decisions.review_cluster(new=new, old=old, policy=site)
    _contains(without, found)


ALICE = Requester(username="alice", groups=("admins",))
UNKNOWN_TARGETS = st.one_of(
    st.builds(table.unknown_talos, st.integers(0, 9)).map(lambda t: (Component.TALOS, t)),
    st.builds(table.unknown_kubernetes, st.integers(0, 9)).map(lambda k: (Component.KUBERNETES, k)),
)


@pure
@given(site_policies, clusters(), UNKNOWN_TARGETS)
@example(
    policy.read(
        {"deny": [{"name": "x", "component": "talos", "versions": ["v1.12.0"], "reason": "r"}]}
    ),
    ClusterVersions("v1.14.3", table.newest_kubernetes(1), None, "flannel"),
    (Component.KUBERNETES, table.unknown_kubernetes()),
)
def test_no_policy_makes_an_unknown_version_pass(
    site: SitePolicy, cluster: ClusterVersions, target: tuple[Component, str]
) -> None:
    component, version = target
    found = judge_target(component=component, target=version, cluster=replace(cluster, policy=site))
    assert found.blocking is not None
    assert not found.blocking.overridable
    # nor through the webhook's write of the cluster, for a holder of the verb (a write
    # that moves it there: an unchanged value is always allowed)
    assume(version != (cluster.talos if component is Component.TALOS else cluster.kubernetes))
    old = _object(cluster, None)
    if component is Component.TALOS:
        new = replace(old, talos=version)
    else:
        new = replace(old, kubernetes=version)
    verdict = decisions.review_cluster(new=new, old=old, policy=site)
    answer = decisions.answer_cluster(
        verdict, requester=ALICE, cluster=old.ref, holds_verb=True, operation="UPDATE"
    )
    assert not answer.allowed


@pure
@given(site_policies, clusters(), tag_lists)
def test_every_step_of_a_plan_with_a_policy_passes_the_rule_with_it(
    site: SitePolicy, cluster: ClusterVersions, tags: list[str]
) -> None:
    planned = path_plan.plan_path(
        cluster=replace(cluster, policy=site), talos_releases=tags, kubernetes_releases=tags
    )
    execute(planned)  # each step through check_target, at the state before it
    for step in planned.steps:
        assert step.before.policy == site
