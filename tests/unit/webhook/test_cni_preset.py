"""spec.cni.preset decides whether the Cilium table holds a cluster's Kubernetes; a write of
it is judged like a write of a version.

The Cilium half applies to a Cilium Ichor runs, managed (``preset: cilium``) and observed
(docs/design/decisions.md, "The Cilium rule applies to a Cilium CNI only"). The preset
is in the spec, so a user could take a cluster out from under the table with one write
and run a Kubernetes step its Cilium refuses. The webhook therefore judges a
TalosCluster write with the Cilium half whenever the old *or* the new preset is
``cilium``, and a write that releases an observed Cilium from the table (``cilium`` to
``unmanaged``) is a ``CniPreset`` refusal only the override verb passes, recorded like
every override; a Cilium the table does not know is never released (its UnknownVersion
stands behind it).
"""

from __future__ import annotations

import dataclasses

import pytest

from ichor.release.refusals import Rule
from ichor.webhook import decisions
from ichor.webhook.reviews import ClusterObject, NamespacedName, Requester
from tests.support import table

REF = NamespacedName("team-a", "prod")
MALLORY = Requester(username="mallory", groups=("dev",))
OLIVIA = Requester(username="olivia", groups=("ops",))


def cluster(
    kubernetes: str = "v1.36.6",
    *,
    preset: str = "cilium",
    cilium: str | None = "1.20.4",
    detected: str = "cilium",
    talos: str = "v1.14.3",
) -> ClusterObject:
    return ClusterObject(
        ref=REF,
        talos=talos,
        kubernetes=kubernetes,
        contract="v1.14",
        cni_preset=preset,
        detected_cni=detected if cilium is not None else None,
        detected_cni_version=cilium,
    )


def _answer(
    new: ClusterObject, old: ClusterObject, *, who: Requester, holders: set[str]
) -> decisions.Answer:
    verdict = decisions.review_cluster(new=new, old=old)
    holds = None
    if decisions.needs_access_review(verdict, override_requested=bool(verdict.overridable)):
        holds = who.username in holders
    return decisions.answer_cluster(
        verdict, requester=who, cluster=REF, holds_verb=holds, operation="UPDATE"
    )


def test_releasing_an_observed_cilium_needs_the_verb() -> None:
    """cilium -> unmanaged alone, with Cilium 1.20.4 observed: refused for a non-holder."""
    old = cluster()
    new = dataclasses.replace(old, cni_preset="unmanaged")
    verdict = decisions.review_cluster(new=new, old=old)
    assert verdict.blocking is None
    assert [r.rule for r in verdict.overridable] == [Rule.CNI_PRESET]
    assert "spec.cni.preset" in verdict.overridable[0].message
    assert "Cilium 1.20.4" in verdict.overridable[0].message
    refused = _answer(new, old, who=MALLORY, holders={"olivia"})
    assert not refused.allowed
    assert "'mallory' does not" in refused.message
    passed = _answer(new, old, who=OLIVIA, holders={"olivia"})
    assert passed.allowed
    assert passed.record is not None
    assert "olivia" in passed.record
    assert "CniPreset" in passed.record


def test_an_unknown_cilium_is_never_released() -> None:
    """A Cilium in no table: releasing it would pass UnknownVersion in two writes."""
    old = cluster(cilium=table.unknown_cilium())
    new = dataclasses.replace(old, cni_preset="unmanaged")
    verdict = decisions.review_cluster(new=new, old=old)
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.UNKNOWN_VERSION
    assert not _answer(new, old, who=OLIVIA, holders={"olivia"}).allowed


@pytest.mark.parametrize(
    ("old_preset", "new_preset"),
    [("cilium", "unmanaged"), ("unmanaged", "cilium")],
    ids=["release", "take-over"],
)
@pytest.mark.parametrize("cilium", ["1.20.4", table.unknown_cilium()])
def test_a_flip_with_a_kubernetes_move_is_judged_with_the_cilium_half(
    old_preset: str, new_preset: str, cilium: str
) -> None:
    """One update flips the preset and moves Kubernetes to v1.37.1 (Cilium 1.20 runs up to
    1.36, the other is unknown): the Cilium half judges the move whichever side is managed."""
    old = cluster(preset=old_preset, cilium=cilium)
    new = cluster("v1.37.1", preset=new_preset, cilium=cilium)
    verdict = decisions.review_cluster(new=new, old=old)
    rules = {r.rule for r in verdict.refusals}
    assert rules & {Rule.CILIUM_KUBERNETES, Rule.UNKNOWN_VERSION}, verdict
    assert not _answer(new, old, who=MALLORY, holders=set()).allowed


def test_taking_over_an_observed_cilium_is_judged_against_the_kubernetes_it_runs() -> None:
    """unmanaged -> cilium puts the cluster under the table: its Kubernetes must be one the
    Cilium runs (an incompatible pair is the usual overridable refusal), and a Cilium the
    table does not know is never taken over."""
    fits = cluster(preset="unmanaged")
    assert decisions.review_cluster(
        new=dataclasses.replace(fits, cni_preset="cilium"), old=fits
    ).clean
    beyond = cluster("v1.37.1", preset="unmanaged")
    verdict = decisions.review_cluster(
        new=dataclasses.replace(beyond, cni_preset="cilium"), old=beyond
    )
    assert [r.rule for r in verdict.overridable] == [Rule.CILIUM_KUBERNETES]
    unknown = cluster(preset="unmanaged", cilium=table.unknown_cilium())
    verdict = decisions.review_cluster(
        new=dataclasses.replace(unknown, cni_preset="cilium"), old=unknown
    )
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.UNKNOWN_VERSION


@pytest.mark.parametrize(
    "old",
    [
        cluster(cilium=None),  # nothing observed yet
        cluster(cilium="0.28.9", detected="flannel"),  # another CNI
    ],
    ids=["not-observed", "flannel"],
)
def test_the_preset_moves_freely_when_no_cilium_is_observed(old: ClusterObject) -> None:
    new = dataclasses.replace(old, cni_preset="unmanaged")
    assert decisions.review_cluster(new=new, old=old).clean
    assert decisions.review_cluster(new=old, old=new).clean


def test_the_operators_carried_write_never_carries_a_preset_change() -> None:
    """The executor's spec write moves one version field; a write that also flips the
    preset is not the one a succeeded operation carries."""
    from ichor.api.talosoperation import OperationType
    from ichor.webhook.reviews import StoredOperation

    old = cluster()
    new = cluster("v1.37.1", preset="unmanaged")
    stored = StoredOperation(
        name="k8s",
        cluster="prod",
        type=OperationType.KUBERNETES,
        version="v1.37.1",
        override=True,
        job_succeeded=True,
        override_by="olivia",
    )
    assert decisions.carried_override(new=new, old=old, operations=[stored]) is None
    assert (
        decisions.carried_override(
            new=dataclasses.replace(new, cni_preset="cilium"), old=old, operations=[stored]
        )
        == stored
    )
