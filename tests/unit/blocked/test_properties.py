"""For any cluster and release list: the lines are the minors the choices leave out, each
explained by the target rule's own refusal, and nothing raises."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ichor.release.versions import VersionError, parse
from ichor.upgrade.blocked import Blocker, blocked_releases, summarize
from ichor.upgrade.choices import finals, kubernetes_choices, talos_choices
from ichor.upgrade.rule import ClusterVersions, Component, check_target_version
from tests.unit.plan.test_properties import clusters, kubernetes_tags, talos_tags

pure = settings(
    database=None, deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
odd_clusters = st.builds(
    ClusterVersions,
    st.sampled_from(["v1.14.3", "1.14", "v1.x", ""]),
    st.sampled_from(["v1.36.2", "v1.36", "bad"]),
    st.one_of(st.none(), st.sampled_from(["1.20.4", "x", " 1.19.2 "])),
    st.sampled_from([None, "cilium", "Cilium ", "flannel"]),
)


@pure
@given(st.one_of(clusters(), odd_clusters), talos_tags, kubernetes_tags)
def test_the_lines_are_the_minors_the_choices_leave_out_each_with_the_rule_refusal(
    cluster: ClusterVersions, talos: list[str], kubernetes: list[str]
) -> None:
    lines = []
    for component, tags, choices in (
        (Component.TALOS, talos, talos_choices(cluster=cluster, releases=talos)),
        (
            Component.KUBERNETES,
            kubernetes,
            kubernetes_choices(cluster=cluster, releases=kubernetes),
        ),
    ):
        own = blocked_releases(component=component, cluster=cluster, releases=tags)
        lines += own
        try:
            running = parse(cluster.talos if component is Component.TALOS else cluster.kubernetes)
            parse(cluster.kubernetes if component is Component.TALOS else cluster.talos)
        except VersionError:
            assert own == []
            continue
        newest: dict[tuple[int, int], object] = {}
        for version in finals(tags):
            if version > running:
                newest.setdefault(version.minor_key, version)
        offered = set(choices.offered)
        assert [line.version for line in own] == sorted(
            (
                v
                for v in finals(tags)
                if v > running and newest[v.minor_key] == v and v not in offered
            ),
            reverse=True,
        )
        for line in own:
            refusal = check_target_version(
                component=component, target=line.version, cluster=cluster
            )
            assert line.refusal == refusal
            assert (refusal is None) == (
                line.blocker in (Blocker.TESTED_PATH, Blocker.CNI_NOT_OBSERVED)
            )
            assert line.reason
            assert line.step
            assert line.not_offered >= 1
    summary = summarize(lines)
    assert summary.count == len(lines)
    assert summary.message
