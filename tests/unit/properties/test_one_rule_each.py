"""Each small rule has one function, and every place that applies it agrees with it.

- the Kubernetes hold: no Kubernetes is offered or planned until the CNI (and, for a
  Cilium Ichor runs, its release) is observed (``upgrade_choices.kubernetes_hold``): the choices,
  the status condition, the CLI's ``--list`` note, the blocked lines and the path plan;
- "the CNI is Cilium" (``steps.is_cilium``), however the controller wrote it;
- "the running Cilium is older than the chart" (``steps.cilium_behind_chart``): the
  ``CiliumUpgradeAvailable`` condition and the cni target rule;
- the frozen patch (``steps.frozen_patch``): the status keeps a recorded image patch
  exactly when the Helm Job renders it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import ClusterReason as Reason
from ichor.api.conditions import ConditionStatus
from ichor.api.ichorinstallation import UpgradeTargets
from ichor.api.taloscluster import CNIStatus, TalosClusterStatus
from ichor.cli import views
from ichor.controller.observe import CNIObservation, NodesObservation, Observation
from ichor.controller.taloscluster import status
from ichor.controller.talosoperation import jobs
from ichor.release import steps
from ichor.release.refusals import Rule
from ichor.release.release_set import PINNED
from ichor.release.versions import VersionError, parse
from ichor.upgrade import blocked, path_plan
from ichor.upgrade import choices as upgrade_choices
from ichor.upgrade.rule import ClusterVersions, Component, judge_target

pure = settings(
    database=None, deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
TALOS = ("v1.14.3", "v1.14.4", "v1.14.5")
KUBERNETES = ("v1.35.2", "v1.36.6", "v1.36.7", "v1.37.1")

detected_cni = st.sampled_from([None, "cilium", "Cilium", " CILIUM ", "flannel", "calico", ""])
release = st.one_of(
    st.none(),
    st.sampled_from(["1.19.10", "1.20.4", "1.20.5", "1.18.16", "unknown", " ", "v1.20.3"]),
)
preset = st.sampled_from(["cilium", "unmanaged"])


def _run(
    *, preset: str, detected: str | None, version: str | None, override: str | None = None
) -> status.Outcome:
    return status.evaluate(
        spec={
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
            "cni": {"preset": preset},
        },
        generation=1,
        previous=TalosClusterStatus(cni=CNIStatus(image_override=override)),
        observation=Observation(
            nodes=NodesObservation(
                count=1,
                talos_versions=("v1.14.3",),
                kubernetes_versions=("v1.36.6",),
                unreadable=(),
            ),
            cni=CNIObservation(detected=detected, version=version),
        ),
        failure=None,
        installation=status.Installation(
            present=True,
            targets=UpgradeTargets(checked_at=NOW, talos=TALOS, kubernetes=KUBERNETES),
        ),
        now=NOW,
    )


def _condition(outcome: status.Outcome, type_: Type) -> Any:
    (found,) = [c for c in outcome.status.conditions if c.type == type_]
    return found


def _body(*, preset: str, detected: str | None, version: str | None) -> dict[str, Any]:
    cni: dict[str, Any] = {}
    if detected is not None:
        cni["detected"] = detected
    if version is not None:
        cni["detectedVersion"] = version
    return {
        "metadata": {"name": "prod", "namespace": "team-a"},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
            "cni": {"preset": preset},
        },
        "status": {"cni": cni},
    }


@pure
@given(preset, detected_cni, release)
def test_every_place_holds_kubernetes_back_exactly_when_the_one_rule_does(
    preset: str, detected: str | None, version: str | None
) -> None:
    cluster = views.Cluster.of(_body(preset=preset, detected=detected, version=version))
    versions = cluster.versions
    hold = upgrade_choices.kubernetes_hold(versions)
    # the choices
    choices = upgrade_choices.kubernetes_choices(cluster=versions, releases=KUBERNETES)
    if hold is not None:
        assert choices == upgrade_choices.Choices()
    # the status condition
    offered = _condition(
        _run(preset=preset, detected=detected, version=version), Type.KUBERNETES_UPGRADE_AVAILABLE
    )
    held_reasons = (Reason.CNI_NOT_OBSERVED, Reason.CILIUM_VERSION_UNREADABLE)
    assert (offered.reason in held_reasons) is (hold is not None), offered
    if hold is not None:
        assert hold.reason in offered.message
    # the CLI's --list
    listed = views.choice_list(
        cluster,
        Component.KUBERNETES,
        views.ReleaseList(
            tags=KUBERNETES, availability=upgrade_choices.Availability(available=True)
        ),
    )
    assert (listed.note is not None) is (hold is not None)
    # the blocked lines
    lines = blocked.blocked_releases(
        component=Component.KUBERNETES, cluster=versions, releases=KUBERNETES
    )
    held = [line for line in lines if line.blocker is blocked.Blocker.CNI_NOT_OBSERVED]
    assert bool(held) is (hold is not None and any(line.refusal is None for line in lines))
    for line in held:
        assert hold is not None
        assert line.reason == hold.reason
        assert line.step == hold.step
    # the path plan
    planned = path_plan.plan_path(
        cluster=versions, talos_releases=TALOS, kubernetes_releases=KUBERNETES, kubernetes="v1.36.7"
    )
    assert (planned.outcome is path_plan.PlanOutcome.UNAVAILABLE) is (hold is not None), planned
    if hold is not None:
        assert planned.reason is not None
        assert hold.reason in planned.reason


def test_a_cilium_the_controller_wrote_with_capitals_is_cilium() -> None:
    """A detected ``Cilium`` read "the cluster runs Cilium, not Cilium" in the status."""
    cilium = _condition(
        _run(preset="cilium", detected="Cilium", version="1.19.10"), Type.CILIUM_UPGRADE_AVAILABLE
    )
    assert (cilium.status, cilium.reason) == (ConditionStatus.TRUE, Reason.CHART_NEWER)
    assert "not Cilium" not in cilium.message
    row = views.status_row(
        views.Cluster.of(_body(preset="cilium", detected="Cilium", version="1.19.10"))
    )
    assert row.cilium == "1.19.10"


@pure
@given(detected_cni)
def test_the_cni_is_cilium_in_one_place(detected: str | None) -> None:
    expected = detected is not None and detected.strip().lower() == "cilium"
    assert steps.is_cilium(detected) is expected
    row = views.status_row(views.Cluster.of(_body(preset="cilium", detected=detected, version="1")))
    if detected:
        assert (row.cilium == "1") is expected
    cilium = _condition(
        _run(preset="cilium", detected=detected, version="1.19.10"), Type.CILIUM_UPGRADE_AVAILABLE
    )
    if detected:
        assert (cilium.reason == Reason.NOT_CILIUM) is not expected


@pure
@given(release.filter(lambda v: v is not None))
def test_the_chart_upgrade_is_offered_exactly_when_the_running_cilium_is_behind_it(
    version: str,
) -> None:
    try:
        behind: bool | None = steps.cilium_behind_chart(version.strip())
    except VersionError:
        behind = None
    cilium = _condition(
        _run(preset="cilium", detected="cilium", version=version), Type.CILIUM_UPGRADE_AVAILABLE
    )
    if behind is None:
        assert cilium.reason in (Reason.CILIUM_VERSION_UNREADABLE, Reason.CNI_NOT_OBSERVED)
        return
    assert (cilium.reason == Reason.CHART_NEWER) is behind
    cluster = ClusterVersions(
        talos="v1.14.3", kubernetes="v1.36.6", cilium=version.strip(), cni="cilium"
    )
    refused = judge_target(component=Component.CNI, target="", cluster=cluster).refusal
    assert (refused is not None and refused.rule is Rule.NOT_NEWER) is (not behind)


@pure
@given(
    st.one_of(
        st.none(),
        st.sampled_from(["", "1.20.3", "1.20.4", "1.20.5", "v1.20.6", "1.21.0", "garbage"]),
    )
)
def test_the_status_keeps_a_recorded_patch_exactly_when_the_job_renders_it(
    override: str | None,
) -> None:
    try:
        frozen = steps.frozen_patch(override)
    except VersionError:
        frozen = None
    outcome = _run(preset="cilium", detected="cilium", version="1.20.4", override=override)
    kept = outcome.status.cni.image_override if outcome.status.cni else None
    rendered = jobs.cilium_values(image_override=kept, chart=PINNED.cilium_chart)
    assert bool(rendered) is (frozen is not None)
    if frozen is not None:
        assert kept == frozen
        assert f"it stays until an Ichor embedding {frozen} or newer" in (
            _condition(outcome, Type.CILIUM_UPGRADE_AVAILABLE).message
        )
    elif override and _readable(override):
        assert kept is None  # at or below the chart: cleared


def _readable(text: str) -> bool:
    try:
        parse(text)
    except VersionError:
        return False
    return True
