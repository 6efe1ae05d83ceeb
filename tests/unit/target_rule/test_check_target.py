"""The one target rule the plan, the executors and the choices share."""

from __future__ import annotations

import pytest

from ichor.release.refusals import Rule
from ichor.upgrade.rule import ClusterVersions, Component, check_target
from tests.support import table

PINNED_CLUSTER = ClusterVersions(
    talos="v1.14.3", kubernetes="v1.36.2", cilium="1.20.4", cni="cilium"
)
FLANNEL = ClusterVersions(talos="v1.14.3", kubernetes="v1.36.2", cilium=None, cni="flannel")
CILIUM_119 = ClusterVersions(talos="v1.14.3", kubernetes="v1.35.1", cilium="1.19.10", cni="cilium")
OLD_TALOS = ClusterVersions(talos="v1.13.2", kubernetes="v1.32.3", cilium="1.19.10", cni="cilium")
SKIPPER = ClusterVersions(talos="v1.12.4", kubernetes="v1.33.1", cilium="1.20.4", cni="cilium")
LOW = ClusterVersions(talos="v1.11.5", kubernetes="v1.33.0", cilium="1.20.4", cni="cilium")
K8S_135 = ClusterVersions(talos="v1.14.3", kubernetes="v1.35.0", cilium="1.20.4", cni="cilium")
# on the newest Kubernetes minor this build knows: the next one is unknown
K8S_NEWEST = ClusterVersions(
    talos="v1.14.3", kubernetes=table.newest_kubernetes(1), cilium=None, cni="flannel"
)

CASES = [
    # form and final
    (Component.TALOS, "v1.14.4-rc.1", PINNED_CLUSTER, Rule.FINAL),
    (Component.TALOS, "v1.14", PINNED_CLUSTER, Rule.FINAL),
    (Component.KUBERNETES, "v1.37.1+build.1", PINNED_CLUSTER, Rule.FINAL),
    (Component.TALOS, "1.14.4", PINNED_CLUSTER, Rule.FORM),
    (Component.TALOS, "latest", PINNED_CLUSTER, Rule.FORM),
    (Component.KUBERNETES, "", PINNED_CLUSTER, Rule.FORM),
    # newer than what runs
    (Component.TALOS, "v1.14.3", PINNED_CLUSTER, Rule.NOT_NEWER),
    (Component.TALOS, "v1.13.9", PINNED_CLUSTER, Rule.NOT_NEWER),
    (Component.KUBERNETES, "v1.36.2", PINNED_CLUSTER, Rule.NOT_NEWER),
    # Talos paths: below the minimum host, adjacent minor, a skipped minor, a patch, unknown
    (Component.TALOS, "v1.14.3", LOW, Rule.TALOS_PATH),
    (Component.TALOS, "v1.14.3", ClusterVersions("v1.13.2", "v1.34.1", None, "flannel"), None),
    (Component.TALOS, "v1.14.3", SKIPPER, None),
    (Component.TALOS, "v1.14.4", PINNED_CLUSTER, None),
    (Component.TALOS, table.unknown_talos(), PINNED_CLUSTER, Rule.UNKNOWN_VERSION),
    # the Kubernetes pairing of a Talos target
    (Component.TALOS, "v1.14.3", OLD_TALOS, Rule.TALOS_KUBERNETES),
    # Kubernetes skew and pairing on the pinned Talos
    (Component.KUBERNETES, "v1.37.1", FLANNEL, None),
    (Component.KUBERNETES, "v1.37.1", K8S_135, Rule.KUBERNETES_SKEW),
    (Component.KUBERNETES, table.unknown_kubernetes(), K8S_NEWEST, Rule.UNKNOWN_VERSION),
    # the Cilium step, for a Cilium CNI only
    (Component.KUBERNETES, "v1.37.1", PINNED_CLUSTER, Rule.CILIUM_KUBERNETES),
    (Component.KUBERNETES, "v1.36.6", PINNED_CLUSTER, None),
    (Component.KUBERNETES, "v1.36.0", CILIUM_119, Rule.CILIUM_KUBERNETES),
    (Component.KUBERNETES, "v1.35.4", CILIUM_119, None),
    (Component.KUBERNETES, "v1.33.0", OLD_TALOS, None),
    (
        Component.KUBERNETES,
        "v1.37.0",
        ClusterVersions("v1.13.2", "v1.36.1", None, "flannel"),
        Rule.TALOS_KUBERNETES,
    ),
    # a Cilium CNI whose release is not seen yet: the plan checks Cilium only when observed
    (
        Component.KUBERNETES,
        "v1.37.1",
        ClusterVersions("v1.14.3", "v1.36.2", None, "cilium"),
        None,
    ),
    # the CNI moves only to the embedded chart
    (Component.CNI, "1.20.5", CILIUM_119, Rule.CNI_VERSION),
    (Component.CNI, "", CILIUM_119, None),
    (Component.CNI, "1.20.4", CILIUM_119, None),
    (Component.CNI, "", PINNED_CLUSTER, Rule.NOT_NEWER),
    (Component.CNI, "", OLD_TALOS, Rule.CILIUM_KUBERNETES),
    # a cluster spec that does not parse is a refusal, not an exception
    (Component.TALOS, "v1.14.4", ClusterVersions("latest", "v1.36.2"), Rule.FORM),
    (Component.KUBERNETES, "v1.37.1", ClusterVersions("v1.14.3", "x"), Rule.FORM),
    (Component.CNI, "", ClusterVersions("v1.14.3", "x", "1.19.0", "cilium"), Rule.FORM),
]


@pytest.mark.parametrize(("component", "target", "cluster", "rule"), CASES)
def test_the_target_rule_refuses_with_the_first_rule_that_matters(
    component: Component, target: str, cluster: ClusterVersions, rule: Rule | None
) -> None:
    refusal = check_target(component=component, target=target, cluster=cluster)
    assert (refusal.rule if refusal else None) is rule


@pytest.mark.parametrize(("component", "target", "cluster", "rule"), CASES)
def test_only_a_compatibility_refusal_of_the_target_rule_is_overridable(
    component: Component, target: str, cluster: ClusterVersions, rule: Rule | None
) -> None:
    refusal = check_target(component=component, target=target, cluster=cluster)
    if refusal is not None:
        assert refusal.overridable is (rule in {Rule.TALOS_KUBERNETES, Rule.CILIUM_KUBERNETES})


def test_the_talos_pairing_of_a_talos_target_names_the_kubernetes_range() -> None:
    refusal = check_target(component=Component.TALOS, target="v1.14.3", cluster=OLD_TALOS)
    assert refusal is not None
    assert refusal.message.startswith(
        "Kubernetes v1.32.3 is refused with Talos v1.14.3: Talos 1.14 runs Kubernetes 1.33 to 1.37"
    )


def test_a_cilium_version_names_the_command_to_run() -> None:
    refusal = check_target(component=Component.CNI, target="1.20.5", cluster=CILIUM_119)
    assert refusal is not None
    assert refusal.message == (
        "Cilium 1.20.5 is refused: Cilium moves only to 1.20.4, the chart this Ichor embeds, so "
        "remove the version and run ichor cni upgrade."
    )


def test_a_chart_the_cluster_kubernetes_is_too_old_for_says_to_upgrade_kubernetes_first() -> None:
    refusal = check_target(component=Component.CNI, target="", cluster=OLD_TALOS)
    assert refusal is not None
    assert refusal.message == (
        "Cilium 1.20.4 is refused: it runs Kubernetes 1.33 to 1.36 (Cilium CI matrix) and the "
        "cluster runs Kubernetes v1.32.3, so upgrade Kubernetes to 1.33 first."
    )


def test_a_cluster_on_an_unmanaged_flannel_is_never_judged_by_cilium() -> None:
    assert check_target(component=Component.KUBERNETES, target="v1.37.1", cluster=FLANNEL) is None
    on_cilium = ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "flannel")
    assert check_target(component=Component.KUBERNETES, target="v1.37.1", cluster=on_cilium) is None


def test_an_unknown_cilium_is_refused_behind_an_overridable_talos_pair() -> None:
    """Talos v1.14.3, Kubernetes v1.31.5 -> v1.32.0 under a Cilium no table knows: the plan
    of an admin with the override verb must not pass it, because no override passes it."""
    unknown = table.unknown_cilium()
    cluster = ClusterVersions(talos="v1.14.3", kubernetes="v1.31.5", cilium=unknown, cni="cilium")
    refusal = check_target(component=Component.KUBERNETES, target="v1.32.0", cluster=cluster)
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION
    assert not refusal.overridable
    assert f"Cilium {unknown}" in refusal.message
