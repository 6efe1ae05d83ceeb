"""The named steps of ``blocked_releases`` and ``_kubernetes`` (``ichor.upgrade.blocked``),
each on its own: a change to one step fails the test that names it."""

from __future__ import annotations

from dataclasses import replace

from ichor.release.observed import Unreadable
from ichor.release.policy import SitePolicy
from ichor.release.refusals import Rule, refuse
from ichor.release.versions import Version, parse
from ichor.upgrade import blocked
from ichor.upgrade.blocked import Blocker
from ichor.upgrade.rule import ClusterVersions, Component
from tests.unit.plan.lists import TALOS_TAGS

ON_1_14 = ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "cilium")
UNKNOWN = refuse(Rule.UNKNOWN_VERSION, "unknown.")
PAIR = refuse(Rule.TALOS_KUBERNETES, "the pair.")
CILIUM = refuse(Rule.CILIUM_KUBERNETES, "the cilium.")
UNREADABLE = refuse(Rule.UNREADABLE_VERSION, "unreadable.")
SKEW = refuse(Rule.KUBERNETES_SKEW, "skew.")


def v(tag: str) -> Version:
    return parse(tag)


def test_explain_asks_the_sites_policy_before_the_components_case() -> None:
    unreadable = replace(ON_1_14, policy=SitePolicy(unreadable="garbage"))
    for component, version in ((Component.TALOS, "v1.14.4"), (Component.KUBERNETES, "v1.36.6")):
        line = blocked.explain(component=component, version=v(version), cluster=unreadable)
        assert line is not None
        assert line.blocker is Blocker.SITE_POLICY_UNREADABLE
        assert line.reason.startswith("this site's policy cannot be read (")
        assert line.step == "correct spec.policy of IchorInstallation ichor; no override passes it"


def test__cni_held_holds_kubernetes_until_the_cni_is_observed() -> None:
    assert blocked._cni_held(v("v1.36.6"), cluster=ON_1_14) is None
    held = blocked._cni_held(v("v1.36.6"), cluster=ClusterVersions("v1.14.3", "v1.36.2"))
    assert held is not None
    assert held.blocker is Blocker.CNI_NOT_OBSERVED
    assert held.refusal is None
    assert "no CNI is observed" in held.reason


def test__skew_tells_another_major_from_minors_up() -> None:
    major = blocked._skew(v("v2.0.0"), running=v("v1.36.2"), refusal=SKEW)
    assert major.reason == "another major version"
    up = blocked._skew(v("v1.38.2"), running=v("v1.36.2"), refusal=SKEW)
    assert (up.reason, up.step) == ("two minors up", "move to the newest v1.37 first")
    assert up.blocker is Blocker.KUBERNETES_SKEW


def test__unknown_talos_speaks_only_of_a_running_talos_this_build_does_not_know() -> None:
    unknown = blocked._unknown_talos(v("v1.36.6"), talos=v("v1.99.0"), refusal=UNKNOWN)
    assert unknown is not None
    assert unknown.reason == "the cluster's Talos v1.99.0 is unknown to this build"
    assert unknown.needs_newer_ichor
    assert blocked._unknown_talos(v("v1.36.6"), talos=v("v1.14.3"), refusal=UNKNOWN) is None
    assert blocked._unknown_talos(v("v1.36.6"), talos=v("v1.99.0"), refusal=PAIR) is None


def test__talos_pair_takes_the_pair_or_an_unknown_kubernetes() -> None:
    pair = blocked._talos_pair(v("v1.38.0"), talos=v("v1.14.3"), refusal=PAIR)
    assert pair is not None
    assert pair.blocker is Blocker.TALOS
    unknown = blocked._talos_pair(v("v1.99.0"), talos=v("v1.14.3"), refusal=UNKNOWN)
    assert unknown is not None
    assert unknown.blocker is Blocker.TALOS
    # an unknown version that is not the Kubernetes (the Cilium's) is not this case
    assert blocked._talos_pair(v("v1.36.6"), talos=v("v1.14.3"), refusal=UNKNOWN) is None
    assert blocked._talos_pair(v("v1.38.0"), talos=v("v1.14.3"), refusal=CILIUM) is None


def test__unreadable_cilium_needs_both_the_seen_cilium_and_the_rule() -> None:
    seen = Unreadable(what="Cilium is seen, its release is not", step="label it")
    cluster = replace(ON_1_14, cilium=seen)
    line = blocked._unreadable_cilium(v("v1.37.0"), cluster=cluster, refusal=UNREADABLE)
    assert line is not None
    assert (line.reason, line.step) == ("Cilium is seen, its release is not", "label it")
    assert blocked._unreadable_cilium(v("v1.37.0"), cluster=ON_1_14, refusal=UNREADABLE) is None
    assert blocked._unreadable_cilium(v("v1.37.0"), cluster=cluster, refusal=CILIUM) is None


def test__cilium_pair_needs_a_cilium_release_and_its_rule() -> None:
    line = blocked._cilium_pair(v("v1.37.1"), cluster=ON_1_14, refusal=CILIUM)
    assert line is not None
    assert line.reason == "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36"
    unknown = blocked._cilium_pair(v("v1.37.1"), cluster=ON_1_14, refusal=UNKNOWN)
    assert unknown is not None
    assert unknown.blocker is Blocker.CILIUM
    no_cilium = replace(ON_1_14, cilium=None)
    assert blocked._cilium_pair(v("v1.37.1"), cluster=no_cilium, refusal=CILIUM) is None
    assert blocked._cilium_pair(v("v1.37.1"), cluster=ON_1_14, refusal=PAIR) is None


def test__running_reads_both_versions_of_the_spec() -> None:
    assert blocked._running(Component.TALOS, ON_1_14) == v("v1.14.3")
    assert blocked._running(Component.KUBERNETES, ON_1_14) == v("v1.36.2")
    for broken in (replace(ON_1_14, talos="garbage"), replace(ON_1_14, kubernetes="garbage")):
        assert blocked._running(Component.TALOS, broken) is None
        assert blocked._running(Component.KUBERNETES, broken) is None


def test__offered_is_what_the_choices_offer_with_the_release_sets_default() -> None:
    on_1_12 = ClusterVersions("v1.12.4", "v1.33.5", "1.19.10", "cilium")
    offered = blocked._offered(Component.TALOS, cluster=on_1_12, tags=TALOS_TAGS, recommended=None)
    assert v("v1.12.7") in offered
    assert v("v1.13.5") in offered
    assert v("v1.14.4") not in offered


def test__newer_by_minor_keeps_newer_finals_newest_first() -> None:
    found = blocked._newer_by_minor(
        ("v1.13.1", "v1.13.2", "v1.13.3-rc.0", "v1.12.9", "v1.14.0", "v1.13.0"),
        running=v("v1.13.0"),
    )
    assert found == {(1, 13): [v("v1.13.2"), v("v1.13.1")], (1, 14): [v("v1.14.0")]}


def test__minor_line_counts_what_is_not_offered_and_skips_an_offered_newest() -> None:
    versions = [v("v1.37.1"), v("v1.37.0")]
    line = blocked._minor_line(
        Component.KUBERNETES, versions, cluster=ON_1_14, offered=set(), running=v("v1.36.2")
    )
    assert line is not None
    assert line.not_offered == 2
    assert line.blocker is Blocker.CILIUM
    one = blocked._minor_line(
        Component.KUBERNETES, versions, cluster=ON_1_14, offered={v("v1.37.0")},
        running=v("v1.36.2"),
    )  # fmt: skip
    assert one is not None
    assert one.not_offered == 1
    newest = blocked._minor_line(
        Component.KUBERNETES, versions, cluster=ON_1_14, offered={v("v1.37.1")},
        running=v("v1.36.2"),
    )  # fmt: skip
    assert newest is None


def test__tested_path_offered_rewords_a_tested_path_line_only() -> None:
    line = blocked.BlockedRelease(
        component=Component.TALOS,
        version=v("v1.14.4"),
        blocker=Blocker.TESTED_PATH,
        reason="two minors up",
        step="s",
    )
    said = blocked._tested_path_offered(line, [v("v1.14.3")], running=v("v1.12.4"))
    assert said.reason == (
        "two minors up, and of Talos 1.14 the choices offer only the release set's v1.14.3 "
        "(the path the Talos docs test goes through each minor)"
    )
    assert blocked._tested_path_offered(line, [], running=v("v1.12.4")) is line
    other = replace(line, blocker=Blocker.TALOS_PATH)
    assert blocked._tested_path_offered(other, [v("v1.14.3")], running=v("v1.12.4")) is other
