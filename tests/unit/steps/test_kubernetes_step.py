"""A Kubernetes step checks the Talos pair, then the running Cilium, and names the order."""

from __future__ import annotations

import pytest

from ichor.release import observed
from ichor.release.observed import Unreadable
from ichor.release.refusals import Rule
from ichor.release.steps import check_kubernetes_step, cilium_release, kubernetes_step
from ichor.release.versions import VersionError
from tests.support import table

TALOS = "v1.14.3"


def test_check_kubernetes_step_names_the_order_when_the_embedded_chart_runs_the_target() -> None:
    refusal = check_kubernetes_step(talos=TALOS, kubernetes="v1.36.2", cilium="1.19.10")
    assert refusal is not None
    assert refusal.rule is Rule.CILIUM_KUBERNETES
    assert refusal.overridable
    assert refusal.message == (
        "Kubernetes v1.36.2 is refused: Cilium 1.19.10 runs Kubernetes 1.32 to 1.35 (Cilium CI "
        "matrix); upgrade Cilium to 1.20.4 first, the chart this Ichor embeds, which runs "
        "Kubernetes v1.36.2."
    )


def test_check_kubernetes_step_says_a_newer_ichor_is_needed_when_no_chart_runs_it() -> None:
    refusal = check_kubernetes_step(talos=TALOS, kubernetes="v1.37.1", cilium="1.20.4")
    assert refusal is not None
    assert refusal.rule is Rule.CILIUM_KUBERNETES
    assert refusal.message == (
        "Kubernetes v1.37.1 is refused: Cilium 1.20.4 runs Kubernetes 1.33 to 1.36 (Cilium CI "
        "matrix); this Ichor ships Cilium 1.20.4, which does not run Kubernetes v1.37.1: a "
        "newer Ichor release is needed."
    )


@pytest.mark.parametrize(
    ("cilium", "kubernetes"),
    [
        ("1.19.10", "v1.35.4"),  # a cluster on Cilium 1.19 may move Kubernetes to 1.35
        ("1.20.4", "v1.36.6"),
        ("1.18.16", "v1.33.1"),
        (None, "v1.37.1"),  # another CNI, or none observed: the Cilium half is skipped
    ],
)
def test_a_step_the_running_cilium_runs_is_allowed(cilium: str | None, kubernetes: str) -> None:
    assert check_kubernetes_step(talos=TALOS, kubernetes=kubernetes, cilium=cilium) is None


@pytest.mark.parametrize(
    ("kubernetes", "cilium"), [("v1.31.9", "1.20.4"), ("v1.32.0", "1.19.10"), ("v1.32.0", None)]
)
def test_the_talos_pair_is_judged_before_cilium(kubernetes: str, cilium: str | None) -> None:
    refusal = check_kubernetes_step(talos=TALOS, kubernetes=kubernetes, cilium=cilium)
    assert refusal is not None
    assert refusal.rule is Rule.TALOS_KUBERNETES
    assert refusal.overridable


def test_an_unknown_cilium_is_refused_with_no_override() -> None:
    refusal = check_kubernetes_step(talos=TALOS, kubernetes="v1.34.0", cilium="1.17.3")
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION
    assert not refusal.overridable


def test_a_flannel_cluster_skips_the_cilium_rule() -> None:
    # Regression of the hardware run: a flannel cluster was refused as "cilium 0.28.9".
    cilium = cilium_release(detected="flannel", version="0.28.9")
    assert cilium is None
    assert check_kubernetes_step(talos=TALOS, kubernetes="v1.37.1", cilium=cilium) is None


@pytest.mark.parametrize(
    ("detected", "version", "release"),
    [
        ("cilium", "1.19.10", "1.19.10"),
        ("Cilium", " 1.20.4 ", "1.20.4"),
        ("flannel", "0.28.9", None),
        ("calico", "3.30.1", None),
        (None, "1.20.4", None),
    ],
)
def test_cilium_release_is_a_release_only_for_a_cilium_cni(
    detected: str | None, version: str | None, release: str | None
) -> None:
    assert cilium_release(detected=detected, version=version) == release


# A Cilium seen with no release in the status was None here, as "no Cilium": the webhook,
# the plan and the executor then skipped the Cilium half (the digest-only escape).
@pytest.mark.parametrize("version", [None, "", "  "])
def test_a_cilium_seen_without_a_release_is_unreadable_not_absent(version: str | None) -> None:
    said = "Cilium is running (DaemonSet kube-system/cilium) but its release cannot be read"
    found = cilium_release(detected="cilium", version=version, unreadable=said)
    assert isinstance(found, Unreadable)
    assert found.what == said
    # Only where the Cilium half applies: another CNI, or an unmanaged cluster, is None.
    assert cilium_release(detected="flannel", version=version) is None
    assert cilium_release(detected="cilium", version=version, preset="unmanaged") is None


@pytest.mark.parametrize("kubernetes", ["v1.36.2", "v1.37.2", "v1.32.0", "v1.36.6"])
def test_an_unreadable_cilium_refuses_every_kubernetes_step_and_no_override_passes_it(
    kubernetes: str,
) -> None:
    unreadable = observed.cilium(
        "Cilium is running (DaemonSet kube-system/cilium) but its release cannot be read: "
        "the image is pinned by digest only and no deployed Helm release names its chart"
    )
    verdict = kubernetes_step(talos=TALOS, kubernetes=kubernetes, cilium=unreadable)
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.UNREADABLE_VERSION
    assert not verdict.blocking.overridable
    assert verdict.blocking.message == (
        f"Kubernetes {kubernetes} is refused: Cilium is running (DaemonSet kube-system/cilium) "
        "but its release cannot be read: the image is pinned by digest only and no deployed "
        "Helm release names its chart; tag the image with its release or deploy it with "
        "Helm, then try again; no override passes a release that cannot be read."
    )


def test_an_unreadable_cilium_behind_a_talos_pair_refusal_still_blocks() -> None:
    verdict = kubernetes_step(talos=TALOS, kubernetes="v1.32.0", cilium=observed.cilium())
    assert [r.rule for r in verdict.overridable] == [Rule.TALOS_KUBERNETES]
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.UNREADABLE_VERSION
    assert "status.cni.detectedVersion is empty" in verdict.blocking.message


def test_a_step_to_an_unparsable_kubernetes_raises_the_typed_error() -> None:
    with pytest.raises(VersionError):
        check_kubernetes_step(talos=TALOS, kubernetes="latest", cilium="1.20.4")


def test_an_unknown_cilium_is_refused_even_when_the_talos_pair_refuses_first() -> None:
    """The pair refusal is overridable; the unknown Cilium behind it must still be met."""
    unknown = table.unknown_cilium()
    refusal = check_kubernetes_step(talos=TALOS, kubernetes="v1.32.0", cilium=unknown)
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION
    assert not refusal.overridable
    assert f"Cilium {unknown} is refused" in refusal.message
    assert "no override passes an unknown version" in refusal.message
