"""Blocked releases: every recorded newer release not offered says which rule or component
blocks it and the step that unblocks it, one line per minor, newest first."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from ichor.release import observed, policy
from ichor.release.refusals import Rule
from ichor.release.release_set import PINNED
from ichor.release.versions import Version, parse
from ichor.upgrade.blocked import (
    NEWER_ICHOR,
    BlockedRelease,
    BlockedSummary,
    Blocker,
    blocked_releases,
    explain,
    summarize,
)
from ichor.upgrade.choices import finals, kubernetes_choices, talos_choices
from ichor.upgrade.rule import ClusterVersions, Component, check_target_version
from tests.support import table
from tests.unit.plan.lists import KUBERNETES_TAGS, TALOS_TAGS

TALOS = Component.TALOS
KUBERNETES = Component.KUBERNETES

#: The newest Talos and the newest Kubernetes minor it runs; the next Kubernetes minor no
#: Talos this build knows runs.
NEWEST = table.newest_talos(3)
NEWEST_RUNS = table.NEWEST_TALOS_KUBERNETES_MINOR
PAST_NEWEST = table.release(table.after(NEWEST_RUNS))


def messages(component: Component, cluster: ClusterVersions, tags: tuple[str, ...]) -> list[str]:
    return [
        line.message
        for line in blocked_releases(component=component, cluster=cluster, releases=tags)
    ]


@pytest.mark.parametrize(
    ("component", "cluster", "tags", "expected"),
    [
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "cilium"),
            ("v1.36.6", "v1.37.0", "v1.37.1"),
            [
                "Kubernetes v1.37.1: Cilium 1.20.4 runs Kubernetes 1.33 to 1.36; "
                "a newer Ichor release is needed"
            ],
            id="the-embedded-cilium-ends-at-1-36",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions(NEWEST, table.release(NEWEST_RUNS), None, "flannel"),
            (table.release(NEWEST_RUNS, 1), PAST_NEWEST),
            [
                f"Kubernetes {PAST_NEWEST}: Talos {NEWEST} supports Kubernetes up to "
                f"{NEWEST_RUNS[0]}.{NEWEST_RUNS[1]}; "
                "upgrade Talos first (no Talos known to this build supports it)"
            ],
            id="no-talos-known-runs-the-next-kubernetes",
        ),
        pytest.param(
            TALOS,
            ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "cilium"),
            ("v1.14.4", table.unknown_talos()),
            [
                f"Talos {table.unknown_talos()}: unknown to this build; a newer Ichor release "
                "is needed"
            ],
            id="an-unknown-talos",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.14.3", "v1.36.2", None, "flannel"),
            ("v1.37.0", "v1.38.0", "v1.38.2"),
            ["Kubernetes v1.38.2: two minors up; move to the newest v1.37 first"],
            id="two-minors-up",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.12.4", "v1.35.2", "1.19.10", "cilium"),
            ("v1.35.6", "v1.36.1", "v1.36.7"),
            [
                "Kubernetes v1.36.7: Talos v1.12.4 supports Kubernetes up to 1.35; "
                "upgrade Talos to 1.13 first"
            ],
            id="a-newer-talos-runs-it",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.13.4", "v1.35.2", "1.19.10", "cilium"),
            ("v1.36.7",),
            [
                "Kubernetes v1.36.7: Cilium 1.19.10 runs Kubernetes 1.32 to 1.35; upgrade "
                "Cilium to 1.20.4 first (ichor cni upgrade), the chart this Ichor embeds"
            ],
            id="the-embedded-cilium-runs-it",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.14.3", "v1.36.2", "1.19.10", "cilium"),
            ("v1.37.1",),
            [
                "Kubernetes v1.37.1: Cilium 1.19.10 runs Kubernetes 1.32 to 1.35; a newer Ichor "
                "release is needed (this Ichor ships Cilium 1.20.4, which does not run it)"
            ],
            id="neither-the-running-nor-the-embedded-cilium-runs-it",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.14.3", "v1.35.2", "1.17.3", "cilium"),
            ("v1.35.4",),
            [
                "Kubernetes v1.35.4: Cilium 1.17.3 is unknown to this build; upgrade Cilium to "
                "1.20.4 first (ichor cni upgrade), the chart this Ichor embeds"
            ],
            id="an-unknown-cilium",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.14.1", "v1.32.1", "1.17.2", "cilium"),
            ("v1.33.3",),
            [
                "Kubernetes v1.33.3: Cilium 1.17.2 is unknown to this build; Cilium 1.20.4, the "
                "chart this Ichor embeds, runs it but not Kubernetes v1.32.1, which the cluster "
                "runs, so no Cilium step reaches it"
            ],
            id="the-embedded-cilium-runs-the-target-but-not-what-runs",
        ),
        pytest.param(
            TALOS,
            ClusterVersions("v1.13.1", "v1.32.5", "1.19.10", "cilium"),
            ("v1.13.5", "v1.14.0", "v1.14.4"),
            [
                "Talos v1.14.4: Talos 1.14 runs Kubernetes 1.33 to 1.37 and the cluster runs "
                "Kubernetes v1.32.5; upgrade Kubernetes to 1.33 first"
            ],
            id="talos-1-14-needs-kubernetes-1-33",
        ),
        pytest.param(
            TALOS,
            ClusterVersions("v1.10.4", "v1.32.5", "1.18.10", "cilium"),
            ("v1.11.6", "v1.12.7", "v1.13.5", "v1.14.4"),
            [
                "Talos v1.14.4: Talos 1.14 installs over Talos 1.12 or newer; upgrade Talos to "
                "1.12 or newer first",
                "Talos v1.13.5: Talos 1.13 installs over Talos 1.11 or newer; upgrade Talos to "
                "1.11 or newer first",
                "Talos v1.12.7: two minors up, and the choices offer the adjacent minor only "
                "(the path the Talos docs test); upgrade Talos to the newest v1.11 first; a "
                "typed v1.12.7 passes the rule too",
            ],
            id="machinery-path-and-tested-path",
        ),
        pytest.param(
            TALOS,
            ClusterVersions("v1.12.4", "v1.33.5", "1.19.10", "cilium"),
            ("v1.13.5", "v1.14.3", "v1.14.4"),
            [
                "Talos v1.14.4: two minors up, and of Talos 1.14 the choices offer only the "
                "release set's v1.14.3 (the path the Talos docs test goes through each minor); "
                "upgrade Talos to the newest v1.13 first; a typed v1.14.4 passes the rule too"
            ],
            id="the-release-set-is-offered-two-minors-up-but-not-its-newer-patch",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.14.3", "v1.36.2", None, None),
            ("v1.36.6",),
            [
                "Kubernetes v1.36.6: no CNI is observed on the cluster yet, and the CNI decides "
                "which Kubernetes can run; wait until the controller observes it "
                "(status.cni.detected)"
            ],
            id="no-cni-observed",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions("v1.14.3", "v1.36.2", None, "cilium"),
            ("v1.36.6",),
            [
                "Kubernetes v1.36.6: the cluster runs Cilium and its release is not observed "
                "yet; wait until the controller observes it (status.cni.detectedVersion)"
            ],
            id="no-cilium-release-observed",
        ),
        pytest.param(
            KUBERNETES,
            ClusterVersions(table.unknown_talos(), "v1.36.2", "1.20.4", "cilium"),
            ("v1.36.6",),
            [
                f"Kubernetes v1.36.6: the cluster's Talos {table.unknown_talos()} is unknown to "
                "this build; a newer Ichor release is needed"
            ],
            id="the-cluster-runs-an-unknown-talos",
        ),
        pytest.param(
            TALOS,
            ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "cilium"),
            ("v1.14.3", "v1.14.4", "v1.13.5", "v1.14.5-rc.0"),
            [],
            id="everything-newer-is-offered",
        ),
    ],
)
def test_each_blocked_minor_says_why_and_the_step(
    component: Component, cluster: ClusterVersions, tags: tuple[str, ...], expected: list[str]
) -> None:
    assert messages(component, cluster, tags) == expected


@pytest.mark.parametrize(
    ("version", "blocker", "newer_ichor", "overridable"),
    [
        ("v1.37.1", Blocker.CILIUM, True, True),
        ("v1.38.0", Blocker.KUBERNETES_SKEW, False, False),
    ],
)
def test_a_line_carries_its_blocker_the_refusal_and_whether_this_build_can_unblock_it(
    version: str, blocker: Blocker, newer_ichor: bool, overridable: bool
) -> None:
    cluster = ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "cilium")
    line = explain(component=KUBERNETES, version=parse(version), cluster=cluster)
    assert line is not None
    assert line.blocker is blocker
    assert line.needs_newer_ichor is newer_ichor
    assert line.overridable is overridable
    assert line.refusal == check_target_version(
        component=KUBERNETES, target=parse(version), cluster=cluster
    )
    assert str(line) == line.message


def test_an_offered_release_has_no_line() -> None:
    cluster = ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "cilium")
    assert explain(component=KUBERNETES, version=parse("v1.36.6"), cluster=cluster) is None
    assert explain(component=TALOS, version=parse("v1.14.4"), cluster=cluster) is None


def test_the_cni_has_no_list_and_an_unreadable_spec_has_no_lines() -> None:
    cluster = ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "cilium")
    assert blocked_releases(component=Component.CNI, cluster=cluster, releases=["v1.0.0"]) == []
    unreadable = ClusterVersions("v1.x", "v1.36.2", "1.20.4", "cilium")
    assert blocked_releases(component=TALOS, cluster=unreadable, releases=TALOS_TAGS) == []
    with pytest.raises(ValueError, match="the CNI has no recorded releases"):
        explain(component=Component.CNI, version=parse("1.20.4"), cluster=cluster)


ON_1_12 = ClusterVersions("v1.12.4", "v1.33.5", "1.19.10", "cilium")
AFTER_THE_PLAN = ClusterVersions("v1.14.4", "v1.36.7", "1.20.4", "cilium")


def test_acceptance_kubernetes_1_37_is_explained_before_and_after_the_plan() -> None:
    before = messages(KUBERNETES, ON_1_12, KUBERNETES_TAGS)
    assert before == [
        "Kubernetes v1.37.2: four minors up; move to the newest v1.34 first",
        "Kubernetes v1.36.7: three minors up; move to the newest v1.34 first",
        "Kubernetes v1.35.6: two minors up; move to the newest v1.34 first",
    ]
    assert messages(KUBERNETES, AFTER_THE_PLAN, KUBERNETES_TAGS) == [
        "Kubernetes v1.37.2: Cilium 1.20.4 runs Kubernetes 1.33 to 1.36; "
        "a newer Ichor release is needed"
    ]
    assert messages(TALOS, ON_1_12, TALOS_TAGS) == [
        "Talos v1.14.4: two minors up, and of Talos 1.14 the choices offer only the release "
        "set's v1.14.3 (the path the Talos docs test goes through each minor); upgrade Talos "
        "to the newest v1.13 first; a typed v1.14.4 passes the rule too"
    ]
    assert messages(TALOS, AFTER_THE_PLAN, TALOS_TAGS) == []


def test_the_summary_counts_the_releases_and_names_the_nearest_blocker_of_each_component() -> None:
    lines = [
        *blocked_releases(component=TALOS, cluster=ON_1_12, releases=TALOS_TAGS),
        *blocked_releases(component=KUBERNETES, cluster=ON_1_12, releases=KUBERNETES_TAGS),
    ]
    summary = summarize(lines)
    assert summary.count == 4
    # Talos 1.14: v1.14.0..v1.14.4 less the offered v1.14.3; Kubernetes 1.35 to 1.37: 7+8+3.
    assert summary.releases == 4 + 18
    assert [(line.component, line.version.tag) for line in summary.nearest] == [
        (TALOS, "v1.14.4"),
        (KUBERNETES, "v1.35.6"),
    ]
    assert summary.message.startswith("22 recorded newer releases are not offered; nearest: ")
    assert summary.message.endswith(
        "Kubernetes v1.35.6: two minors up; move to the newest v1.34 first."
    )
    assert summarize([]) == BlockedSummary(count=0, releases=0, nearest=())
    assert str(summarize([])) == "Every recorded newer release is offered."


# Over a grid of clusters: the lines agree with the choices and the target rule, and each
# step, taken, removes the blocker it names.
# Talos from 1.10 and Kubernetes from 1.29, each up to the first minor this build does not
# know, so the grid meets an unknown version of each.
_TALOS_GRID = range(10, table.UNKNOWN_TALOS_MINOR[1] + 1)
_KUBERNETES_GRID = range(29, table.UNKNOWN_KUBERNETES_MINOR[1] + 1)
GRID_TALOS = tuple(f"v1.{minor}.{patch}" for minor in _TALOS_GRID for patch in (0, 2, 5))
GRID_KUBERNETES = tuple(f"v1.{minor}.{patch}" for minor in _KUBERNETES_GRID for patch in (0, 3))
# A site's policy over part of the grid: a denied Talos patch, Kubernetes held at 1.34, a
# pair its tests failed; and one that cannot be read.
SITE = policy.read(
    {
        "deny": [
            {"name": "nic", "component": "talos", "versions": ["v1.13.5"], "reason": "NIC"},
            {
                "name": "pair",
                "component": "kubernetes",
                "range": {"from": "v1.33.0", "to": "v1.33.3"},
                "with": {"component": "cilium", "range": {"from": "1.20.0"}},
                "reason": "conformance",
            },
        ],
        "highestMinor": [
            {"name": "hold", "component": "kubernetes", "minor": "1.34", "reason": "validation"}
        ],
    }
)
UNREADABLE_SITE = policy.SitePolicy(unreadable="spec.policy is not an object")
GRID = [
    ClusterVersions(f"v1.{talos}.1", f"v1.{kubernetes}.1", cilium, kind)
    for talos in _TALOS_GRID
    for kubernetes in _KUBERNETES_GRID
    for cilium, kind in (
        ("1.18.7", "cilium"),
        ("1.19.10", "cilium"),
        ("1.20.4", "cilium"),
        ("1.17.2", "cilium"),
        (observed.cilium(), "cilium"),  # seen, release unreadable
        (None, "flannel"),
        (None, None),
    )
] + [
    ClusterVersions(f"v1.{talos}.1", f"v1.{kubernetes}.1", cilium, "cilium", policy=site)
    for talos in (12, 13)
    for kubernetes in (32, 33)
    for cilium in ("1.19.10", "1.20.4")
    for site in (SITE, UNREADABLE_SITE)
]
_RULES = {
    Blocker.TALOS: {Rule.TALOS_KUBERNETES, Rule.UNKNOWN_VERSION},
    Blocker.KUBERNETES: {Rule.TALOS_KUBERNETES},
    Blocker.CILIUM: {Rule.CILIUM_KUBERNETES, Rule.UNKNOWN_VERSION},
    Blocker.TALOS_PATH: {Rule.TALOS_PATH},
    Blocker.KUBERNETES_SKEW: {Rule.KUBERNETES_SKEW},
    Blocker.UNKNOWN: {Rule.UNKNOWN_VERSION},
    Blocker.UNREADABLE: {Rule.UNREADABLE_VERSION},
    Blocker.SITE_POLICY: {Rule.SITE_POLICY},
    Blocker.SITE_POLICY_UNREADABLE: {Rule.SITE_POLICY_UNREADABLE},
}


def _taken(line: BlockedRelease, cluster: ClusterVersions) -> ClusterVersions | None:
    """The cluster after the step a line names, or None when the step is not an upgrade
    this build can run (a newer Ichor, an override, waiting, see the refusal)."""
    if line.needs_newer_ichor or line.step == "see the refusal":
        return None
    minor = re.search(r"(?:to|newest v)(\d+)\.(\d+)", line.step)
    if line.step.startswith("upgrade Cilium to"):
        return replace(cluster, cilium=PINNED.cilium_chart)
    if minor is None:
        return None
    target = Version(int(minor[1]), int(minor[2]), 0).tag
    if line.step.startswith("upgrade Kubernetes") or line.step.startswith("move to"):
        return replace(cluster, kubernetes=target)
    if line.step.startswith("upgrade Talos"):
        return replace(cluster, talos=target)
    return None


def test_over_a_grid_every_line_agrees_with_the_choices_and_the_rule_and_its_step_unblocks() -> (
    None
):
    lines_seen: set[Blocker] = set()
    for cluster in GRID:
        for component, tags, choices in (
            (TALOS, GRID_TALOS, talos_choices(cluster=cluster, releases=GRID_TALOS)),
            (
                KUBERNETES,
                GRID_KUBERNETES,
                kubernetes_choices(cluster=cluster, releases=GRID_KUBERNETES),
            ),
        ):
            running = parse(cluster.talos if component is TALOS else cluster.kubernetes)
            lines = blocked_releases(component=component, cluster=cluster, releases=tags)
            offered = set(choices.offered)
            # One line per minor whose newest newer release is not offered, newest first.
            newest: dict[tuple[int, int], Version] = {}
            for version in finals(tags):
                if version > running:
                    newest.setdefault(version.minor_key, version)
            assert [line.version for line in lines] == sorted(
                (v for v in newest.values() if v not in offered), reverse=True
            )
            for line in lines:
                lines_seen.add(line.blocker)
                assert line.component is component
                refusal = check_target_version(
                    component=component, target=line.version, cluster=cluster
                )
                assert line.refusal == refusal
                if line.blocker in (Blocker.TESTED_PATH, Blocker.CNI_NOT_OBSERVED):
                    assert refusal is None
                else:
                    assert refusal is not None
                    assert refusal.rule in _RULES[line.blocker], (line.message, refusal)
                if line.needs_newer_ichor:
                    assert (
                        line.step.startswith(NEWER_ICHOR)
                        or "no Talos known" in line.step
                        or "no Cilium step reaches it" in line.step
                    ), line.message
                after = _taken(line, cluster)
                if after is None:
                    continue
                again = explain(component=component, version=line.version, cluster=after)
                if line.blocker in (Blocker.KUBERNETES_SKEW, Blocker.TESTED_PATH):
                    # A step of one minor: the gap closes by one, the rest is the next line.
                    moved = parse(after.talos if component is TALOS else after.kubernetes)
                    assert moved.minor_key == (running.major, running.minor + 1)
                else:
                    assert again is None or again.blocker is not line.blocker, (
                        cluster,
                        line.message,
                        again.message,
                    )
    assert lines_seen == set(Blocker)


def test_a_release_blocked_by_an_unknown_cilium_behind_a_pair_is_not_overridable() -> None:
    unknown = table.unknown_cilium()
    cluster = ClusterVersions(talos="v1.14.3", kubernetes="v1.31.5", cilium=unknown, cni="cilium")
    line = explain(component=KUBERNETES, version=parse("v1.32.0"), cluster=cluster)
    assert line is not None
    assert line.refusal is not None
    assert line.refusal.rule is Rule.UNKNOWN_VERSION
    assert not line.overridable
    assert line.needs_newer_ichor
    assert f"Cilium {unknown} is unknown to this build" in line.message


def test_a_release_blocked_by_a_cilium_whose_release_cannot_be_read_names_it() -> None:
    said = (
        "Cilium is running (DaemonSet kube-system/cilium) but its release cannot be read: "
        "the image is pinned by digest only and no deployed Helm release names its chart"
    )
    cluster = ClusterVersions(
        talos="v1.14.3", kubernetes="v1.36.6", cilium=observed.cilium(said), cni="cilium"
    )
    line = explain(component=KUBERNETES, version=parse("v1.37.2"), cluster=cluster)
    assert line is not None
    assert line.blocker is Blocker.UNREADABLE
    assert line.refusal is not None
    assert line.refusal.rule is Rule.UNREADABLE_VERSION
    assert not line.overridable
    assert line.reason == said
    assert line.step == observed.CILIUM_STEP
