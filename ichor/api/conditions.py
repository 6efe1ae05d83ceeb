"""Condition types and reasons of the three kinds, and the Condition shape.

Conditions say what *is* (Events say what happened). Reasons are CamelCase words a
program may match on; the message is a sentence for a person. Types and reasons are str
enums so a typo is a type error, not a condition nobody reads.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from ichor.api._base import ApiModel


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class SummaryType(StrEnum):
    """The conditions every kind carries for the tools that wait on objects (kstatus,
    ``kubectl wait``, Flux's health checks, Argo CD's health assessment).

    ``Ready`` is always there ("normal-true"); ``Reconciling`` and ``Stalled`` are
    "abnormal-true": present only while True, removed once they no longer hold, so a
    reader never has to tell an old False from a current one. Each carries its own
    ``observedGeneration``.
    """

    READY = "Ready"
    #: The controller is moving the object towards its spec (kstatus: InProgress).
    RECONCILING = "Reconciling"
    #: The object cannot reach its spec without a person's step (kstatus: Failed).
    STALLED = "Stalled"


class ClusterConditionType(StrEnum):
    """TalosCluster conditions."""

    #: The workload cluster was reached and its versions read.
    READY = "Ready"
    #: Present only while True: an operation for the cluster is Pending or Running, its
    #: Nodes differ, or (Declarative) the Nodes are being moved to the spec.
    RECONCILING = "Reconciling"
    #: Present only while True: the spec cannot be read by any rule, or (Declarative)
    #: the spec cannot be reached without a person's step.
    STALLED = "Stalled"
    #: Only under ``upgradeStrategy: Declarative``: the Nodes run the spec's versions.
    SPEC_REACHED = "SpecReached"
    #: Talos, Kubernetes and the observed Cilium hold together in the compatibility table.
    VERSIONS_COMPATIBLE = "VersionsCompatible"
    TALOS_UPGRADE_AVAILABLE = "TalosUpgradeAvailable"
    KUBERNETES_UPGRADE_AVAILABLE = "KubernetesUpgradeAvailable"
    #: The Cilium chart this Ichor embeds is newer than what the cluster runs.
    CILIUM_UPGRADE_AVAILABLE = "CiliumUpgradeAvailable"
    #: A recorded newer Talos or Kubernetes is not offered; the message names the nearest
    #: one of each, why, and the step that unblocks it (``status.blockedReleases``).
    UPGRADES_BLOCKED = "UpgradesBlocked"
    #: Auto-patch is on and nothing it checks stops it (set only where auto-patch is
    #: configured); False names what stops it: a failed patch, a gate, a halt.
    AUTO_PATCH_READY = "AutoPatchReady"


class ClusterReason(StrEnum):
    """Reasons of the TalosCluster conditions."""

    # Ready
    OBSERVED = "Observed"
    NODES_DIFFER = "NodesDiffer"
    NO_NODES = "NoNodes"
    NODE_VERSION_UNREADABLE = "NodeVersionUnreadable"
    WORKLOAD_UNREACHABLE = "WorkloadUnreachable"
    KUBECONFIG_UNUSABLE = "KubeconfigUnusable"
    # any condition, when the spec itself cannot be judged
    INVALID_SPEC = "InvalidSpec"
    # VersionsCompatible
    COMPATIBLE = "Compatible"
    TALOS_KUBERNETES_INCOMPATIBLE = "TalosKubernetesIncompatible"
    CILIUM_KUBERNETES_INCOMPATIBLE = "CiliumKubernetesIncompatible"
    UNKNOWN_VERSION = "UnknownVersion"
    # *UpgradeAvailable
    UPGRADE_AVAILABLE = "UpgradeAvailable"
    UP_TO_DATE = "UpToDate"
    LIST_UNAVAILABLE = "ListUnavailable"
    CNI_NOT_OBSERVED = "CNINotObserved"
    # CiliumUpgradeAvailable
    CHART_NEWER = "ChartNewer"
    NOT_CILIUM = "NotCilium"
    CILIUM_VERSION_UNREADABLE = "CiliumVersionUnreadable"
    # UpgradesBlocked
    RELEASES_NOT_OFFERED = "ReleasesNotOffered"
    ALL_OFFERED = "AllOffered"
    # Reconciling
    OPERATION_ACTIVE = "OperationActive"


class AutoPatchReason(StrEnum):
    """Reasons of ``AutoPatchReady`` (also ``status.autoPatch.reason``)."""

    # True: on, and waiting for nothing a person must do
    WINDOW_CLOSED = "WindowClosed"
    UP_TO_DATE = "UpToDate"
    WAITING_FOR_RELEASE_AGE = "WaitingForReleaseAge"
    OPERATION_RUNNING = "OperationRunning"
    FLEET_BUSY = "FleetBusy"
    STARTED = "Started"
    # False: stopped
    DISABLED = "Disabled"
    INVALID_SETTINGS = "InvalidSettings"
    SUSPENDED = "Suspended"
    FAILED = "PatchFailed"
    HALTED = "Halted"
    START_REFUSED = "StartRefused"
    # False: a health gate (the reason is the gate's name)
    CLUSTER_NOT_READY = "ClusterNotReady"
    NODES_NOT_READY = "NodesNotReady"
    NODES_DIFFER = "NodesDiffer"
    VERSIONS_INCOMPATIBLE = "VersionsIncompatible"
    RELEASE_LIST_STALE = "ReleaseListStale"
    WORKLOAD_NOT_READY = "WorkloadNotReady"
    #: A health check of ``spec.autoPatch.healthChecks`` (the message names it).
    HEALTH_CHECK_FAILED = "HealthCheckFailed"


class OperationConditionType(StrEnum):
    """TalosOperation conditions (set by the executors)."""

    #: The executor's checks passed (or were overridden) and the Job may run.
    ACCEPTED = "Accepted"
    #: The Job finished, successfully or not.
    COMPLETE = "Complete"
    #: True once Succeeded, False once Failed, Unknown while Pending or Running.
    READY = "Ready"
    #: Present only while True: Pending or Running.
    RECONCILING = "Reconciling"
    #: Present only while True: Failed (an operation never runs again).
    STALLED = "Stalled"


class OperationReason(StrEnum):
    ACCEPTED = "Accepted"
    OVERRIDDEN = "Overridden"
    REFUSED = "Refused"
    JOB_RUNNING = "JobRunning"
    JOB_SUCCEEDED = "JobSucceeded"
    JOB_FAILED = "JobFailed"
    #: ``Complete=False``: the Job succeeded and the executor moves the cluster's spec
    #: next. The webhook reads it (status is the operator's alone) to let the operator's
    #: spec write carry an override this operation was admitted under.
    SPEC_UPDATING = "SpecUpdating"


class InstallationConditionType(StrEnum):
    #: The last release check listed every repository.
    RELEASES_LISTED = "ReleasesListed"
    #: The chart repository holds a final Ichor release newer than the running one.
    ICHOR_UPGRADE_AVAILABLE = "IchorUpgradeAvailable"
    #: True when the last check listed every repository, False when one failed (the
    #: next check retries; the last good lists are kept).
    READY = "Ready"


class InstallationReason(StrEnum):
    """Reasons of the IchorInstallation conditions."""

    # ReleasesListed
    LISTED = "Listed"
    LISTING_FAILED = "ListingFailed"
    # IchorUpgradeAvailable
    UPGRADE_AVAILABLE = "UpgradeAvailable"
    UP_TO_DATE = "UpToDate"
    LIST_UNAVAILABLE = "ListUnavailable"


class Condition(ApiModel):
    """One entry of ``status.conditions`` (the shape of metav1.Condition)."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: datetime
