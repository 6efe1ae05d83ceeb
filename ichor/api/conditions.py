"""Condition types and reasons of the three kinds, and the Condition shape.

Every reason Ichor writes into a condition is a member of one enum here (the Event
reasons are ``ichor.api.events``'), so a reader finds them all in one file.

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
    #: True: Cilium runs on a cluster whose spec.cni.preset is unmanaged, so the Cilium
    #: rule is skipped; the message says what it would say of the spec's Kubernetes.
    UNMANAGED_CILIUM = "UnmanagedCilium"
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
    # Ready, without a kubeconfig Secret: no ServiceAccount may read the cluster the
    # operator runs in for it (none named when one is required, missing, or refused)
    SERVICE_ACCOUNT_UNUSABLE = "ServiceAccountUnusable"
    #: *UpgradeAvailable, Unknown: the site's policy (IchorInstallation ``spec.policy``)
    #: cannot be read, so what it denies is unknown and nothing is offered; correct it.
    SITE_POLICY_UNREADABLE = "SitePolicyUnreadable"


class SpecReachedReason(StrEnum):
    """Reasons of ``SpecReached`` (``upgradeStrategy: Declarative`` only)."""

    #: True: the Nodes run the spec's Talos and Kubernetes.
    REACHED = "Reached"
    #: False, Reconciling: an operation the controller started runs.
    UPGRADING = "Upgrading"
    #: False, Reconciling: another operation runs for the cluster; this one starts after.
    WAITING = "Waiting"
    #: False, Reconciling: the Nodes were not read yet.
    NOT_OBSERVED = "NotObserved"
    #: False, Stalled: the webhook refused the start (the rule's sentence).
    REFUSED = "Refused"
    #: False, Stalled: the operation started for this spec failed.
    FAILED = "Failed"
    #: False, Stalled: the Nodes run a newer version than the spec (Ichor never downgrades).
    NODES_AHEAD = "NodesAhead"
    #: False, Stalled: a version cannot be compared.
    UNREADABLE = "Unreadable"


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
    """Reasons of the TalosOperation conditions (a refusal's reason is the name of the
    rule that refused it, ``ichor.release.refusals.Rule``, rather than one of these)."""

    # Accepted
    ACCEPTED = "Accepted"
    OVERRIDDEN = "Overridden"
    REFUSED = "Refused"
    #: Pending: another operation of the cluster runs first.
    WAITING = "Waiting"
    #: Pending: the executor checks the operation against its TalosCluster.
    CHECKING = "Checking"
    # Complete
    #: Claimed: the Job is being created (a restart creates it if it is not there).
    JOB_CREATING = "JobCreating"
    JOB_RUNNING = "JobRunning"
    JOB_SUCCEEDED = "JobSucceeded"
    JOB_FAILED = "JobFailed"
    #: The Job was deleted before it finished.
    JOB_DELETED = "JobDeleted"
    #: ``Complete=False``: the Job succeeded and the executor moves the cluster's spec
    #: next. The webhook reads it (status is the operator's alone) to let the operator's
    #: spec write carry an override this operation was admitted under.
    SPEC_UPDATING = "SpecUpdating"
    # why an operation cannot run, or did not end well
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    CREDENTIALS_UNUSABLE = "CredentialsUnusable"
    NO_NODES = "NoNodes"
    WORKLOAD_UNREACHABLE = "WorkloadUnreachable"
    SPEC_NOT_UPDATED = "SpecNotUpdated"
    INVALID_OPERATION = "InvalidOperation"
    #: ``Ready=True``: the upgrade is installed (and the spec moved, for talos/kubernetes).
    SUCCEEDED = "Succeeded"
    #: The Job succeeded but a Node still reports the old version at the deadline.
    NODES_NOT_UPGRADED = "NodesNotUpgraded"
    #: Refused: the cluster already has ``ICHOR_MAX_QUEUED_OPERATIONS`` not finished.
    QUEUE_FULL = "QueueFull"
    #: Pending: a short Job of talosctl reads each node's schematic, platform and
    #: SecureBoot through the Talos API, to build each node's own installer image.
    NODES_READING = "NodesReading"
    #: Refused before any upgrade Job: a node's image cannot be read, its schematic
    #: annotation disagrees with the Talos API, its extensions come from no schematic, or
    #: the spec's cluster-wide schematic would drop an extension it runs. The message
    #: names the nodes and the step; the override verb does not pass it, the spec does.
    NODE_IMAGE_REFUSED = "NodeImageRefused"
    #: ``Complete=False``: a Talos operation goes node by node, one Job per node, with
    #: checks between nodes; ``status.nodes`` says which are done, which run, which next.
    NODES_UPGRADING = "NodesUpgrading"
    #: A check between nodes failed (etcd not healthy with every member before a control
    #: plane node; after a node, the Node not Ready on the target, its etcd member not
    #: back, or a health check of the cluster failing): the operation stops before the
    #: next node, and the message names the check, the node reached and the step.
    CHECK_FAILED = "CheckFailed"
    #: A node's drain did not finish within the policy's drainTimeout: the image is
    #: staged on the node and the node is cordoned, not rebooted; the message names the
    #: node, the image and the commands that finish or undo it.
    DRAIN_TIMED_OUT = "DrainTimedOut"
    #: Refused before any node is touched: the talosconfig's client certificate expires
    #: before the operation's deadline, or its role cannot upgrade.
    PREFLIGHT_FAILED = "PreflightFailed"


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
