"""Every path reads the site's policy through the one target rule: the plan refuses a
denied version with the entry and its reason, the choices leave it out (the default
moves to the next valid one), the blocked lines say why in the site's words, the path
plan routes around a denied patch, and an unknown version stays refused whatever it says.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ichor.release import policy
from ichor.release.refusals import Rule
from ichor.release.versions import parse
from ichor.upgrade import blocked, choices, path_plan, site
from ichor.upgrade.rule import ClusterVersions, Component, judge_target
from tests.support import table

TALOS, KUBERNETES, CNI = Component.TALOS, Component.KUBERNETES, Component.CNI


def deny(name: str, component: str, reason: str = "a reason", **fields: Any) -> dict[str, Any]:
    return {"name": name, "component": component, "reason": reason, **fields}


SITE = policy.read(
    {
        "deny": [
            deny("nic", "talos", "NIC regression on the R650s (INC-1234)", versions=["v1.14.4"]),
            deny(
                "pair",
                "kubernetes",
                "our conformance run failed",
                range={"from": "v1.35.0", "to": "v1.35.9"},
                **{"with": {"component": "cilium", "range": {"from": "1.19.0", "to": "1.19.99"}}},
            ),
        ],
        "highestMinor": [
            {
                "name": "k8s",
                "component": "kubernetes",
                "minor": "1.36",
                "reason": "1.37 is not validated",
            }
        ],
    }
)
ON_113 = ClusterVersions("v1.13.2", "v1.34.1", "1.20.4", "cilium", policy=SITE)
TALOS_TAGS = ("v1.13.2", "v1.13.4", "v1.14.0", "v1.14.3", "v1.14.4")


def test_a_denied_target_is_refused_with_the_entry_and_the_reason_and_the_verb_passes_it() -> None:
    verdict = judge_target(component=TALOS, target="v1.14.4", cluster=ON_113)
    assert verdict.blocking is None
    (refusal,) = verdict.overridable
    assert refusal.rule is Rule.SITE_POLICY
    assert refusal.entry == "nic"
    assert refusal.message == (
        "Talos v1.14.4 is refused by this site's policy: IchorInstallation ichor, "
        "spec.policy.deny entry 'nic' denies Talos v1.14.4 (\"NIC regression on the R650s "
        '(INC-1234)"); choose another release, or change that entry.'
    )
    # the same target without the policy passes, and another patch passes with it
    assert judge_target(
        component=TALOS, target="v1.14.4", cluster=replace(ON_113, policy=policy.NO_POLICY)
    ).clean
    assert judge_target(component=TALOS, target="v1.14.3", cluster=ON_113).clean


def test_a_held_back_minor_and_a_pair_are_refused() -> None:
    on_136 = ClusterVersions("v1.14.3", "v1.36.6", None, "flannel", policy=SITE)
    held = judge_target(component=KUBERNETES, target="v1.37.1", cluster=on_136).refusal
    assert held is not None
    assert held.rule is Rule.SITE_POLICY
    assert "holds Kubernetes at 1.36" in held.message
    assert "choose Kubernetes 1.36 or older" in held.message
    on_119 = ClusterVersions("v1.14.3", "v1.34.5", "1.19.10", "cilium", policy=SITE)
    pair = judge_target(component=KUBERNETES, target="v1.35.4", cluster=on_119).refusal
    assert pair is not None
    assert pair.entry == "pair"
    assert "Kubernetes v1.35.4 with Cilium 1.19.10 is refused" in pair.message
    # the pair holds only together: with Cilium 1.20 the same Kubernetes passes
    on_120 = replace(on_119, cilium="1.20.4")
    assert judge_target(component=KUBERNETES, target="v1.35.4", cluster=on_120).clean
    # and the Cilium step that would make the pair is refused too (it moves Cilium)
    on_135 = ClusterVersions("v1.14.3", "v1.35.0", "1.18.7", "cilium", policy=SITE)
    assert judge_target(component=CNI, target="", cluster=on_135).clean  # chart 1.20.4


def test_an_entry_judges_only_a_step_that_moves_its_component() -> None:
    """A cluster that already runs what an entry denies may move something else."""
    on_denied = ClusterVersions("v1.14.4", "v1.36.2", None, "flannel", policy=SITE)
    assert judge_target(component=KUBERNETES, target="v1.36.6", cluster=on_denied).clean
    assert site.acting_entries(cluster=on_denied) == frozenset({"nic"})


def test_an_unknown_version_is_refused_whatever_the_policy_says() -> None:
    unknown = table.unknown_talos()
    for said in (SITE, policy.NO_POLICY, policy.SitePolicy(unreadable="x")):
        cluster = ClusterVersions("v1.14.3", "v1.36.2", None, "flannel", policy=said)
        verdict = judge_target(component=TALOS, target=unknown, cluster=cluster)
        assert verdict.blocking is not None
        assert verdict.blocking.rule is Rule.UNKNOWN_VERSION


def test_a_policy_that_cannot_be_read_refuses_every_target_and_no_override_passes() -> None:
    cluster = replace(
        ON_113,
        cilium="1.19.10",
        policy=policy.SitePolicy(unreadable="spec.policy is not an object"),
    )
    for component, target in ((TALOS, "v1.14.3"), (CNI, "")):
        verdict = judge_target(component=component, target=target, cluster=cluster)
        assert verdict.blocking is not None
        assert verdict.blocking.rule is Rule.SITE_POLICY_UNREADABLE
    assert choices.talos_choices(cluster=cluster, releases=TALOS_TAGS).offered == []


def test_a_denied_patch_is_not_offered_and_the_default_moves_to_the_next() -> None:
    on_143 = ClusterVersions("v1.14.2", "v1.36.2", None, "flannel")
    tags = ("v1.14.2", "v1.14.3", "v1.14.4")
    without = choices.talos_choices(cluster=on_143, releases=tags, recommended="v1.14.4")
    assert (without.default, without.recommended) == (parse("v1.14.4"), parse("v1.14.4"))
    found = choices.talos_choices(
        cluster=replace(on_143, policy=SITE), releases=tags, recommended="v1.14.4"
    )
    assert found.patch == [parse("v1.14.3")]
    assert found.recommended is None
    assert found.default == parse("v1.14.3")


def test_the_blocked_lines_say_denied_by_this_site_with_its_reason() -> None:
    on_143 = ClusterVersions("v1.14.2", "v1.36.2", None, "flannel", policy=SITE)
    (line,) = blocked.blocked_releases(
        component=TALOS, cluster=on_143, releases=("v1.14.3", "v1.14.4")
    )
    assert line.blocker is blocked.Blocker.SITE_POLICY
    assert line.overridable
    assert not line.needs_newer_ichor
    assert line.message.startswith(
        "Talos v1.14.4: denied by this site: NIC regression on the R650s (INC-1234); choose "
        "another release (IchorInstallation ichor, spec.policy.deny entry 'nic' denies Talos "
        "v1.14.4); the override verb passes it (--override)"
    )
    on_136 = ClusterVersions("v1.14.3", "v1.36.6", None, "flannel", policy=SITE)
    (held,) = blocked.blocked_releases(
        component=KUBERNETES, cluster=on_136, releases=("v1.36.7", "v1.37.0", "v1.37.1")
    )
    assert held.message.startswith(
        "Kubernetes v1.37.1: denied by this site: 1.37 is not validated; choose Kubernetes "
        "1.36 or older"
    )
    assert held.not_offered == 2


def test_the_path_plan_routes_around_a_denied_patch() -> None:
    """From Talos 1.12 to 1.14.3 the tested path goes through the newest 1.13 patch; the
    site denies it, so the plan takes the one before it."""
    site_113 = policy.read({"deny": [deny("bad-113", "talos", versions=["v1.13.5"])]})
    start = ClusterVersions("v1.12.4", "v1.33.1", None, "flannel")
    tags = ("v1.13.4", "v1.13.5", "v1.14.3")
    plain = path_plan.plan_path(
        cluster=start, talos_releases=tags, kubernetes_releases=(), talos="v1.14.3"
    )
    assert plain.commands == (
        "ichor upgrade talos CLUSTER v1.13.5",
        "ichor upgrade talos CLUSTER v1.14.3",
    )
    routed = path_plan.plan_path(
        cluster=replace(start, policy=site_113),
        talos_releases=tags,
        kubernetes_releases=(),
        talos="v1.14.3",
    )
    assert routed.reachable
    assert routed.commands == (
        "ichor upgrade talos CLUSTER v1.13.4",
        "ichor upgrade talos CLUSTER v1.14.3",
    )
    assert routed.steps[0].why == (
        "the path the Talos docs test goes through the newest patch of each minor; v1.13.5 "
        "of that minor denied by this site's policy"
    )
    assert ";" not in plain.steps[0].why


def test_a_denied_goal_is_not_reachable_under_this_sites_policy() -> None:
    start = ClusterVersions("v1.14.2", "v1.36.2", None, "flannel", policy=SITE)
    result = path_plan.plan_path(
        cluster=start, talos_releases=("v1.14.4",), kubernetes_releases=(), talos="v1.14.4"
    )
    assert result.outcome is path_plan.PlanOutcome.UNREACHABLE
    assert result.reason is not None
    assert result.reason.startswith(
        "Talos v1.14.4 is not reachable under this site's policy: denied by this site: NIC "
        "regression on the R650s (INC-1234)"
    )


@pytest.mark.parametrize(
    ("cluster", "acting"),
    [
        (ClusterVersions("v1.14.2", "v1.36.2", None, "flannel", policy=SITE), {"nic", "k8s"}),
        (ClusterVersions("v1.14.5", "v1.36.2", None, "flannel", policy=SITE), {"k8s"}),
        # the pair with its Cilium, and 1.37 among the recorded releases
        (ClusterVersions("v1.14.5", "v1.34.2", "1.19.10", "cilium", policy=SITE), {"pair", "k8s"}),
        (ClusterVersions("v1.14.5", "v1.34.2", "1.20.4", "cilium", policy=SITE), {"k8s"}),
        (ClusterVersions("v1.14.5", "v1.37.2", None, "flannel", policy=SITE), {"k8s"}),  # runs it
        (ClusterVersions("v1.14.5", "v1.36.2", None, "flannel"), set()),
    ],
)
def test_the_entries_that_act_on_a_cluster(cluster: ClusterVersions, acting: set[str]) -> None:
    found = site.acting_entries(
        cluster=cluster,
        talos_releases=("v1.14.4", "v1.14.5"),
        kubernetes_releases=("v1.35.4", "v1.36.6", "v1.37.1"),
    )
    assert found == acting
