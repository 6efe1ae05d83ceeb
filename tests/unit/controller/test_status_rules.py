"""The TalosCluster status rules, without a cluster: conditions, choices and Events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import ClusterReason as Reason
from ichor.api.conditions import Condition, ConditionStatus
from ichor.api.events import ClusterEventReason
from ichor.api.ichorinstallation import UpgradeTargets
from ichor.api.taloscluster import CNIStatus, TalosClusterStatus
from ichor.controller.observe import CNIObservation, NodesObservation, Observation
from ichor.controller.taloscluster.status import (
    Failure,
    Installation,
    Outcome,
    evaluate,
)
from ichor.kube.bodies import EventType
from tests.support import table

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)

# each list ends with a release of the first minor this build does not know
TALOS = ("v1.13.2", "v1.14.3", "v1.14.4", "v1.14.5", table.unknown_talos())
KUBERNETES = ("v1.35.2", "v1.36.6", "v1.36.7", "v1.37.1", table.unknown_kubernetes())
LISTED = Installation(
    present=True,
    targets=UpgradeTargets(checked_at=NOW, talos=TALOS, kubernetes=KUBERNETES),
)


def spec(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "talosVersion": "v1.14.3",
        "kubernetesVersion": "v1.36.6",
        "versionContract": "v1.14",
        "cni": {"preset": "cilium"},
    }
    base.update(overrides)
    return base


def seen(
    *,
    talos: tuple[str, ...] = ("v1.14.3",),
    kubernetes: tuple[str, ...] = ("v1.36.6",),
    cni: str | None = "cilium",
    cni_version: str | None = "1.20.4",
    count: int = 3,
    unreadable: tuple[str, ...] = (),
) -> Observation:
    return Observation(
        nodes=NodesObservation(
            count=count, talos_versions=talos, kubernetes_versions=kubernetes, unreadable=unreadable
        ),
        cni=CNIObservation(detected=cni, version=cni_version),
    )


def run(
    *,
    cluster: dict[str, Any] | None = None,
    observation: Observation | None = None,
    failure: Failure | None = None,
    installation: Installation = LISTED,
    previous: TalosClusterStatus | None = None,
    now: datetime = NOW,
) -> Outcome:
    return evaluate(
        spec=cluster if cluster is not None else spec(),
        generation=1,
        previous=previous or TalosClusterStatus(),
        observation=observation if observation is not None or failure else seen(),
        failure=failure,
        installation=installation,
        now=now,
    )


def condition(outcome: Outcome, type_: Type) -> Condition:
    found = next((c for c in outcome.status.conditions if c.type == type_), None)
    assert found is not None, f"no {type_} condition"
    return found


def test_observed_versions_and_ready() -> None:
    outcome = run()
    status = outcome.status
    assert (status.talos_version, status.kubernetes_version) == ("v1.14.3", "v1.36.6")
    assert status.cni == CNIStatus(detected="cilium", detected_version="1.20.4")
    ready = condition(outcome, Type.READY)
    assert (ready.status, ready.reason) == (ConditionStatus.TRUE, Reason.OBSERVED)
    assert ready.observed_generation == 1
    assert status.observed_generation == 1
    compatible = condition(outcome, Type.VERSIONS_COMPATIBLE)
    assert compatible.status == ConditionStatus.TRUE


def test_mixed_nodes_report_the_lowest_and_that_nodes_differ() -> None:
    outcome = run(observation=seen(talos=("v1.13.2", "v1.14.3")))
    assert outcome.status.talos_version == "v1.13.2"
    assert outcome.status.nodes is not None
    assert outcome.status.nodes.differ is True
    ready = condition(outcome, Type.READY)
    assert ready.reason == Reason.NODES_DIFFER
    assert "v1.13.2, v1.14.3" in ready.message


def test_an_unreadable_node_is_named() -> None:
    outcome = run(observation=seen(unreadable=('Node n1 runs osImage "Ubuntu"',)))
    ready = condition(outcome, Type.READY)
    assert (ready.status, ready.reason) == (ConditionStatus.FALSE, Reason.NODE_VERSION_UNREADABLE)
    assert "n1" in ready.message


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"talosVersion": "banana"}, "spec.talosVersion"),
        ({"kubernetesVersion": "1.36.6"}, "spec.kubernetesVersion"),
        ({"versionContract": "v1.14.0"}, "spec.versionContract"),
        ({"cni": {"preset": "weave"}}, "spec.cni.preset"),
        ({"talosVersion": None}, "spec.talosVersion"),
    ],
)
def test_a_malformed_spec_gets_invalid_spec_conditions_and_no_choices(
    overrides: dict[str, Any], names: str
) -> None:
    outcome = run(cluster=spec(**overrides))
    compatible = condition(outcome, Type.VERSIONS_COMPATIBLE)
    assert (compatible.status, compatible.reason) == (ConditionStatus.FALSE, Reason.INVALID_SPEC)
    assert names in compatible.message
    for type_ in (Type.TALOS_UPGRADE_AVAILABLE, Type.KUBERNETES_UPGRADE_AVAILABLE):
        assert condition(outcome, type_).reason == Reason.INVALID_SPEC
    assert outcome.status.upgrade_choices is None
    assert any(e.reason == ClusterEventReason.INVALID_SPEC for e in outcome.events)


@pytest.mark.parametrize(
    ("cluster", "cni_version", "reason"),
    [
        (spec(kubernetesVersion="v1.31.9"), "1.20.4", Reason.TALOS_KUBERNETES_INCOMPATIBLE),
        (spec(talosVersion="v1.99.0"), "1.20.4", Reason.UNKNOWN_VERSION),
        (spec(), "1.18.5", Reason.CILIUM_KUBERNETES_INCOMPATIBLE),
        (spec(), "1.99.0", Reason.UNKNOWN_VERSION),
        # the pair refuses first, and the Cilium is unknown: the unknown version is named
        (spec(kubernetesVersion="v1.32.0"), table.unknown_cilium(), Reason.UNKNOWN_VERSION),
    ],
)
def test_an_incompatible_set_names_the_rule(
    cluster: dict[str, Any], cni_version: str, reason: Reason
) -> None:
    outcome = run(cluster=cluster, observation=seen(cni_version=cni_version))
    compatible = condition(outcome, Type.VERSIONS_COMPATIBLE)
    assert (compatible.status, compatible.reason) == (ConditionStatus.FALSE, reason)
    assert "refused" in compatible.message
    assert any(e.reason == ClusterEventReason.INCOMPATIBLE for e in outcome.events)


def test_choices_group_the_listed_releases() -> None:
    choices = run().status.upgrade_choices
    assert choices is not None
    assert choices.talos is not None
    assert choices.kubernetes is not None
    assert choices.talos.patch == ("v1.14.5", "v1.14.4")
    assert choices.talos.default == "v1.14.5"
    assert choices.talos.available is True
    assert choices.kubernetes.patch == ("v1.36.7",)
    # Cilium 1.20 runs Kubernetes up to 1.36, so 1.37 is not offered.
    assert choices.kubernetes.next_minor == ()


def test_the_pinned_version_is_recommended_when_listed_newer_and_valid() -> None:
    outcome = run(
        cluster=spec(talosVersion="v1.13.2", versionContract="v1.13"),
        observation=seen(talos=("v1.13.2",)),
    )
    talos = outcome.status.upgrade_choices.talos  # type: ignore[union-attr]
    assert talos is not None
    assert (talos.recommended, talos.default) == ("v1.14.3", "v1.14.3")
    assert condition(outcome, Type.TALOS_UPGRADE_AVAILABLE).status == ConditionStatus.TRUE


def test_a_non_cilium_cni_skips_the_cilium_rule() -> None:
    outcome = run(observation=seen(cni="flannel", cni_version="0.26.4"))
    kubernetes = outcome.status.upgrade_choices.kubernetes  # type: ignore[union-attr]
    assert kubernetes is not None
    assert kubernetes.next_minor == ("v1.37.1",)
    assert condition(outcome, Type.VERSIONS_COMPATIBLE).status == ConditionStatus.TRUE
    cilium = condition(outcome, Type.CILIUM_UPGRADE_AVAILABLE)
    assert (cilium.status, cilium.reason) == (ConditionStatus.FALSE, Reason.NOT_CILIUM)


# A Cilium seen with no readable release was CNINotObserved here; it is observed, and its
# own reason says what holds Kubernetes back (CiliumVersionUnreadable).
@pytest.mark.parametrize(
    ("cni", "cni_version", "reason"),
    [(None, None, Reason.CNI_NOT_OBSERVED), ("cilium", None, Reason.CILIUM_VERSION_UNREADABLE)],
)
def test_an_unobserved_cni_or_cilium_release_offers_no_kubernetes(
    cni: str | None, cni_version: str | None, reason: Reason
) -> None:
    outcome = run(observation=seen(cni=cni, cni_version=cni_version))
    kubernetes = outcome.status.upgrade_choices.kubernetes  # type: ignore[union-attr]
    assert kubernetes is not None
    assert (kubernetes.patch, kubernetes.next_minor, kubernetes.default) == ((), (), None)
    offered = condition(outcome, Type.KUBERNETES_UPGRADE_AVAILABLE)
    assert (offered.status, offered.reason) == (ConditionStatus.UNKNOWN, reason)
    # Talos is still offered: Cilium is not part of the Talos rule.
    assert condition(outcome, Type.TALOS_UPGRADE_AVAILABLE).status == ConditionStatus.TRUE


DIGEST_ONLY = (
    "Cilium is running (DaemonSet kube-system/cilium) but its release cannot be read: "
    "the image is pinned by digest only and no deployed Helm release names its chart"
)


def test_a_cilium_whose_release_cannot_be_read_is_shown_as_it_is_and_holds_everything() -> None:
    observation = Observation(
        nodes=seen().nodes,
        cni=CNIObservation(detected="cilium", version=None, unreadable=DIGEST_ONLY),
    )
    outcome = run(observation=observation)
    # Honest: Cilium detected, no version, and the sentence of why.
    assert outcome.status.cni == CNIStatus(detected="cilium", unreadable=DIGEST_ONLY)
    compatible = condition(outcome, Type.VERSIONS_COMPATIBLE)
    assert (compatible.status, compatible.reason) == (
        ConditionStatus.UNKNOWN,
        Reason.CILIUM_VERSION_UNREADABLE,
    )
    assert compatible.message.startswith(DIGEST_ONLY + ", so whether it runs Kubernetes v1.36.6")
    assert "no override passes it" in compatible.message
    cilium = condition(outcome, Type.CILIUM_UPGRADE_AVAILABLE)
    assert (cilium.status, cilium.reason) == (
        ConditionStatus.UNKNOWN,
        Reason.CILIUM_VERSION_UNREADABLE,
    )
    assert DIGEST_ONLY in cilium.message
    offered = condition(outcome, Type.KUBERNETES_UPGRADE_AVAILABLE)
    assert DIGEST_ONLY in offered.message
    # Posted once, when it starts: a Warning naming what could not be read.
    warnings = [
        e for e in outcome.events if e.reason == ClusterEventReason.CILIUM_VERSION_UNREADABLE
    ]
    assert len(warnings) == 1
    assert warnings[0].type is EventType.WARNING
    again = run(observation=observation, previous=outcome.status)
    assert not [e for e in again.events if e.reason == ClusterEventReason.CILIUM_VERSION_UNREADABLE]
    # The sentence goes with the release: once it can be read, the field is cleared.
    readable = run(observation=seen(), previous=outcome.status)
    assert readable.status.cni == CNIStatus(detected="cilium", detected_version="1.20.4")


def test_nodes_whose_versions_cannot_be_read_are_listed_in_the_status() -> None:
    said = ('Node n2 runs osImage "Ubuntu 24.04", not "Talos (vX.Y.Z)"',)
    outcome = run(observation=seen(unreadable=said))
    assert outcome.status.nodes is not None
    assert outcome.status.nodes.unreadable == said
    assert run().status.nodes.unreadable is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("installation", "available", "words"),
    [
        (Installation(), False, "no IchorInstallation"),
        (Installation(present=True), False, "no release list has been recorded"),
        (
            Installation(present=True, check_enabled=False, targets=LISTED.targets),
            False,
            "check is off",
        ),
        (
            Installation(
                present=True,
                targets=UpgradeTargets(talos=TALOS, kubernetes=KUBERNETES, talos_error="timeout"),
            ),
            True,
            "may be stale",
        ),
    ],
)
def test_availability_of_the_lists_is_explained(
    installation: Installation, available: bool, words: str
) -> None:
    talos = run(installation=installation).status.upgrade_choices.talos  # type: ignore[union-attr]
    assert talos is not None
    assert talos.available is available
    assert words in (talos.unavailable_reason or "")


def test_a_listing_error_of_one_kind_leaves_the_other_fresh() -> None:
    installation = Installation(
        present=True,
        targets=UpgradeTargets(talos=TALOS, kubernetes=KUBERNETES, talos_error="timeout"),
    )
    choices = run(installation=installation).status.upgrade_choices
    assert choices is not None
    assert choices.kubernetes is not None
    assert choices.kubernetes.unavailable_reason is None


@pytest.mark.parametrize(
    ("running", "status", "reason"),
    [
        ("1.19.3", ConditionStatus.TRUE, Reason.CHART_NEWER),
        ("1.20.4", ConditionStatus.FALSE, Reason.UP_TO_DATE),
        ("1.20.5", ConditionStatus.FALSE, Reason.UP_TO_DATE),
    ],
)
def test_cilium_upgrade_is_offered_when_the_chart_is_newer(
    running: str, status: ConditionStatus, reason: Reason
) -> None:
    cilium = condition(run(observation=seen(cni_version=running)), Type.CILIUM_UPGRADE_AVAILABLE)
    assert (cilium.status, cilium.reason) == (status, reason)


def test_a_recorded_patch_newer_than_the_chart_is_kept_and_shown() -> None:
    previous = TalosClusterStatus(cni=CNIStatus(image_override="1.20.5"))
    outcome = run(observation=seen(cni_version="1.20.5"), previous=previous)
    assert outcome.status.cni is not None
    assert outcome.status.cni.image_override == "1.20.5"
    message = condition(outcome, Type.CILIUM_UPGRADE_AVAILABLE).message
    assert (
        "Cilium runs patch 1.20.5 over chart 1.20.4 (set by an earlier Ichor); "
        "it stays until an Ichor embedding 1.20.5 or newer"
    ) in message


@pytest.mark.parametrize("override", ["1.20.4", "1.20.3"])
def test_a_recorded_patch_the_chart_reached_is_cleared(override: str) -> None:
    previous = TalosClusterStatus(cni=CNIStatus(image_override=override))
    outcome = run(previous=previous)
    assert outcome.status.cni is not None
    assert outcome.status.cni.image_override is None
    # No Event: a cleared patch posts none (docs/design/decisions.md); the status
    # field and the CiliumUpgradeAvailable condition say what is.
    assert not any("patch" in e.message.lower() for e in outcome.events)
    assert all(e.reason != "CiliumPatchCleared" for e in outcome.events)


def test_an_unreachable_cluster_keeps_what_was_seen_and_says_why() -> None:
    first = run()
    outcome = run(
        observation=None,
        failure=Failure(Reason.WORKLOAD_UNREACHABLE, "connection refused"),
        previous=first.status,
        now=LATER,
    )
    assert outcome.status.talos_version == "v1.14.3"
    ready = condition(outcome, Type.READY)
    assert (ready.status, ready.reason) == (ConditionStatus.FALSE, Reason.WORKLOAD_UNREACHABLE)
    assert ready.last_transition_time == LATER
    assert [e.reason for e in outcome.events] == [ClusterEventReason.UNREACHABLE]


def test_an_unchanged_status_keeps_its_transition_times_and_posts_nothing() -> None:
    first = run()
    again = run(previous=first.status, now=LATER)
    assert again.status == first.status
    assert again.events == ()
    assert {e.reason for e in first.events} >= {
        ClusterEventReason.OBSERVED,
        ClusterEventReason.TALOS_UPGRADE,
    }


def test_a_node_upgrade_is_an_event() -> None:
    first = run(observation=seen(talos=("v1.14.3",)))
    outcome = run(observation=seen(talos=("v1.14.4",)), previous=first.status, now=LATER)
    changed = [e for e in outcome.events if e.reason == ClusterEventReason.VERSION_CHANGED]
    assert [e.message for e in changed] == ["the cluster now runs Talos v1.14.4 (was v1.14.3)"]


@pytest.mark.parametrize(
    ("installation", "expected", "reason", "message"),
    [
        pytest.param(
            Installation(
                present=True,
                targets=UpgradeTargets(
                    checked_at=NOW,
                    talos=("v1.14.3", "v1.14.4"),
                    kubernetes=("v1.36.6", "v1.36.7", "v1.37.0", "v1.37.1"),
                ),
            ),
            ConditionStatus.TRUE,
            Reason.RELEASES_NOT_OFFERED,
            "2 recorded newer releases are not offered; nearest: Kubernetes v1.37.1: Cilium "
            "1.20.4 runs Kubernetes 1.33 to 1.36; a newer Ichor release is needed.",
            id="kubernetes-blocked-by-cilium",
        ),
        pytest.param(
            Installation(
                present=True,
                targets=UpgradeTargets(checked_at=NOW, talos=("v1.14.4",), kubernetes=("v1.36.7",)),
            ),
            ConditionStatus.FALSE,
            Reason.ALL_OFFERED,
            "Every recorded newer release is offered.",
            id="all-offered",
        ),
        pytest.param(
            Installation(),
            ConditionStatus.UNKNOWN,
            Reason.LIST_UNAVAILABLE,
            "no release list can be used, so no blocked release is known",
            id="no-list",
        ),
    ],
)
def test_blocked_releases_are_summarised_in_a_condition(
    installation: Installation, expected: ConditionStatus, reason: Reason, message: str
) -> None:
    outcome = run(installation=installation)
    found = condition(outcome, Type.UPGRADES_BLOCKED)
    assert (found.status, found.reason, found.message) == (expected, reason, message)
    summary = outcome.status.blocked_releases
    if expected is ConditionStatus.UNKNOWN:
        assert summary is None
    else:
        assert summary is not None
        assert summary.count == (1 if expected is ConditionStatus.TRUE else 0)
        assert [line.blocker for line in summary.nearest] == (
            ["Cilium"] if expected is ConditionStatus.TRUE else []
        )


def test_a_spec_no_rule_reads_leaves_blocked_releases_unknown() -> None:
    outcome = run(cluster=spec(talosVersion="latest"))
    found = condition(outcome, Type.UPGRADES_BLOCKED)
    assert (found.status, found.reason) == (ConditionStatus.UNKNOWN, Reason.INVALID_SPEC)
    assert outcome.status.blocked_releases is None


def test_an_unmanaged_cni_with_a_detected_cilium_is_not_judged_by_the_cilium_table() -> None:
    """spec.cni.preset unmanaged: Cilium 1.20 runs up to Kubernetes 1.36, and still 1.37 is
    offered and the pair counts as compatible, because Ichor does not run that Cilium."""
    outcome = run(
        cluster=spec(kubernetesVersion="v1.36.6", cni={"preset": "unmanaged"}),
        observation=seen(cni_version="1.20.4"),
    )
    assert condition(outcome, Type.VERSIONS_COMPATIBLE).status == ConditionStatus.TRUE
    kubernetes = outcome.status.upgrade_choices.kubernetes  # type: ignore[union-attr]
    assert kubernetes is not None
    assert kubernetes.next_minor == ("v1.37.1",)
    # the managed cluster is held back by its Cilium
    managed = run(observation=seen(cni_version="1.20.4")).status.upgrade_choices
    assert managed is not None
    assert managed.kubernetes is not None
    assert managed.kubernetes.next_minor == ()


def test_cilium_on_an_unmanaged_cluster_is_shown_in_versions_compatible() -> None:
    unmanaged = spec(cni={"preset": "unmanaged"})
    outcome = run(cluster=unmanaged)
    compatible = condition(outcome, Type.VERSIONS_COMPATIBLE)
    assert (compatible.status, compatible.reason) == (ConditionStatus.TRUE, Reason.UNMANAGED_CILIUM)
    assert compatible.message == (
        "Talos v1.14.3 runs Kubernetes v1.36.6; Cilium 1.20.4 runs on the cluster, and "
        "spec.cni.preset is unmanaged, so Ichor does not judge it: the Cilium rule would "
        "accept Kubernetes v1.36.6; every Kubernetes step it would refuse is recorded as a "
        "Warning Event CiliumRuleSkipped naming the user"
    )
    (seen_event,) = [e for e in outcome.events if e.reason == ClusterEventReason.UNMANAGED_CILIUM]
    assert seen_event.type is EventType.NORMAL
    # The spec's Kubernetes beyond what that Cilium runs: the rule's sentence is shown.
    ahead = run(cluster=spec(cni={"preset": "unmanaged"}, kubernetesVersion="v1.37.2"))
    compatible = condition(ahead, Type.VERSIONS_COMPATIBLE)
    assert compatible.reason == Reason.UNMANAGED_CILIUM
    assert "the Cilium rule would refuse Kubernetes v1.37.2" in compatible.message
    assert "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36" in compatible.message
    # Another CNI, or none, on an unmanaged cluster: as before.
    flannel = run(cluster=unmanaged, observation=seen(cni="flannel", cni_version="0.26.4"))
    assert condition(flannel, Type.VERSIONS_COMPATIBLE).reason == Reason.COMPATIBLE
