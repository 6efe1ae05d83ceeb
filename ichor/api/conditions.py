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
    #: Ready: the workload cluster was read and its versions written. Step: none.
    OBSERVED = "Observed"
    #: Ready and Reconciling: the Nodes report different versions, an upgrade half done or a node
    #: that booted its previous version back. Step: let the running operation finish; with none
    #: running, find the node (``kubectl get nodes -o wide`` on the workload) and upgrade it with a
    #: new operation.
    NODES_DIFFER = "NodesDiffer"
    #: Ready: the workload cluster answered but lists no Node. Step: check that the kubeconfig names
    #: the right cluster and that its nodes joined.
    NO_NODES = "NoNodes"
    #: Ready: a Node's ``osImage`` or ``kubeletVersion`` is not a version (the message names the
    #: Node), or the answer was too large or malformed to read; the version stays unknown. Step:
    #: check that the Node runs Talos (``osImage`` is ``Talos (vX.Y.Z)``).
    NODE_VERSION_UNREADABLE = "NodeVersionUnreadable"
    #: Ready: the workload's Kubernetes API did not answer, or answered an error; the read is
    #: retried with backoff. Step: check the kubeconfig's server address and the path from the
    #: operator to it (docs/adopt.md, network paths; ``networkPolicy.apiServer.cidrs``).
    WORKLOAD_UNREACHABLE = "WorkloadUnreachable"
    #: Ready: the kubeconfig Secret is missing, lacks its key, or is not a kubeconfig Ichor takes
    #: (inline credentials only: no exec plugin, no file). Step: fix the Secret
    #: ``spec.kubeconfigSecretRef`` names (docs/adopt.md).
    KUBECONFIG_UNUSABLE = "KubeconfigUnusable"
    # any condition, when the spec itself cannot be judged
    #: Any condition, and Stalled: the spec cannot be read by any rule (stored before the CRD
    #: checked it); nothing moves until it changes. Step: correct the field the message names.
    INVALID_SPEC = "InvalidSpec"
    # VersionsCompatible
    #: VersionsCompatible: the spec's Talos runs its Kubernetes, and the observed Cilium runs it
    #: too. Step: none.
    COMPATIBLE = "Compatible"
    #: VersionsCompatible: the spec's Talos does not run its Kubernetes (adopted as it runs, or
    #: passed by an override); the message gives the range. Step: ``ichor upgrade plan CLUSTER``
    #: names the upgrades to a compatible pair.
    TALOS_KUBERNETES_INCOMPATIBLE = "TalosKubernetesIncompatible"
    #: VersionsCompatible: the observed Cilium does not run the spec's Kubernetes. Step: ``ichor cni
    #: upgrade CLUSTER``, or a newer Ichor when the embedded chart does not run it either.
    CILIUM_KUBERNETES_INCOMPATIBLE = "CiliumKubernetesIncompatible"
    #: VersionsCompatible: a Talos, Kubernetes or Cilium version this build does not know; every
    #: step it would judge is refused. Step: upgrade Ichor (docs/upgrading.md).
    UNKNOWN_VERSION = "UnknownVersion"
    #: True: Cilium runs on a cluster whose spec.cni.preset is unmanaged, so the Cilium
    #: rule is skipped; the message says what it would say of the spec's Kubernetes. Step:
    #: none while you upgrade Cilium yourself; set ``cni.preset: cilium`` to have Ichor judge
    #: and upgrade it.
    UNMANAGED_CILIUM = "UnmanagedCilium"
    # *UpgradeAvailable
    #: TalosUpgradeAvailable, KubernetesUpgradeAvailable: newer releases are offered; the message
    #: names the default. Step: ``ichor upgrade talos|kubernetes CLUSTER`` takes the default.
    UPGRADE_AVAILABLE = "UpgradeAvailable"
    #: An *UpgradeAvailable condition: nothing newer is offered. Step: none; ``ichor upgrade
    #: talos|kubernetes CLUSTER --list`` says why a newer release is not offered.
    UP_TO_DATE = "UpToDate"
    #: An *UpgradeAvailable condition or UpgradesBlocked: no release list can be used (no
    #: IchorInstallation, the check off, nothing recorded yet, or the listing failed). Step: read
    #: ``ReleasesListed`` of the IchorInstallation (``kubectl describe ichorinstallation ichor``).
    LIST_UNAVAILABLE = "ListUnavailable"
    #: KubernetesUpgradeAvailable, CiliumUpgradeAvailable: no CNI, or no Cilium release, was seen,
    #: so no Kubernetes is offered. Step: check the CNI's DaemonSet runs in the workload; for a CNI
    #: Ichor does not run, set ``spec.cni.preset: unmanaged``.
    CNI_NOT_OBSERVED = "CNINotObserved"
    # CiliumUpgradeAvailable
    #: CiliumUpgradeAvailable: the Cilium chart this Ichor embeds is newer than the running Cilium.
    #: Step: ``ichor cni upgrade CLUSTER``.
    CHART_NEWER = "ChartNewer"
    #: CiliumUpgradeAvailable: the cluster runs another CNI, or ``cni.preset`` is ``unmanaged``;
    #: Ichor does not move it. Step: none.
    NOT_CILIUM = "NotCilium"
    #: CiliumUpgradeAvailable: Cilium runs but its version is not in the agent's image tag nor in a
    #: readable Helm release; every Kubernetes step is refused (``UnreadableVersion``). Step: run
    #: the agent from an image tagged with its version, or let the reader get Cilium's Helm
    #: release Secret.
    CILIUM_VERSION_UNREADABLE = "CiliumVersionUnreadable"
    # UpgradesBlocked
    #: UpgradesBlocked: a recorded newer Talos or Kubernetes is not offered; the message names the
    #: nearest, why, and the step. Step: the one in the message (``ichor upgrade plan CLUSTER``
    #: orders them).
    RELEASES_NOT_OFFERED = "ReleasesNotOffered"
    #: UpgradesBlocked: every recorded newer release is offered. Step: none.
    ALL_OFFERED = "AllOffered"
    # Reconciling
    #: Reconciling: a TalosOperation of the cluster is Pending or Running (the message names it).
    #: Step: none; ``kubectl get talosoperations`` follows it.
    OPERATION_ACTIVE = "OperationActive"
    # Ready, without a kubeconfig Secret: no ServiceAccount may read the cluster the
    # operator runs in for it (none named when one is required, missing, or refused)
    #: Ready: no ServiceAccount may read the cluster the operator runs in for this TalosCluster
    #: (none named where one is required, missing, or refused). Step: the grant the message names,
    #: usually binding ``ichor-tenant-reader`` to the account.
    SERVICE_ACCOUNT_UNUSABLE = "ServiceAccountUnusable"
    #: *UpgradeAvailable, Unknown: the site's policy (IchorInstallation ``spec.policy``)
    #: cannot be read, so what it denies is unknown and nothing is offered. Step: correct
    #: the IchorInstallation's ``spec.policy``.
    SITE_POLICY_UNREADABLE = "SitePolicyUnreadable"


class SpecReachedReason(StrEnum):
    """Reasons of ``SpecReached`` (``upgradeStrategy: Declarative`` only)."""

    #: True: the Nodes run the spec's Talos and Kubernetes. Step: none.
    REACHED = "Reached"
    #: False, Reconciling: an operation the controller started runs. Step: none.
    UPGRADING = "Upgrading"
    #: False, Reconciling: another operation runs for the cluster; this one starts after. Step:
    #: none.
    WAITING = "Waiting"
    #: False, Reconciling: the Nodes were not read yet. Step: none; if it lasts, read the ``Ready``
    #: condition.
    NOT_OBSERVED = "NotObserved"
    #: False, Stalled: the webhook refused the start (the rule's sentence). Step: change the spec to
    #: a version the rule accepts, or have a holder of the override verb start the operation.
    REFUSED = "Refused"
    #: False, Stalled: the operation started for this spec failed. Step: read the operation's
    #: message, fix the cause, then delete the failed operation to retry.
    FAILED = "Failed"
    #: False, Stalled: the Nodes run a newer version than the spec (Ichor never downgrades). Step:
    #: set the spec to what the Nodes run.
    NODES_AHEAD = "NodesAhead"
    #: False, Stalled: a version cannot be compared. Step: correct the spec, or read ``Ready`` for a
    #: Node version that cannot be read.
    UNREADABLE = "Unreadable"


class AutoPatchReason(StrEnum):
    """Reasons of ``AutoPatchReady`` (also ``status.autoPatch.reason``)."""

    # True: on, and waiting for nothing a person must do
    #: True: no maintenance window is open; the message gives the next one. Step: none.
    WINDOW_CLOSED = "WindowClosed"
    #: True: no newer patch of the running minor is offered. Step: none.
    UP_TO_DATE = "UpToDate"
    #: True: the newer patch is younger than ``minReleaseAge``; the message says when it comes of
    #: age. Step: none, or lower ``minReleaseAge``.
    WAITING_FOR_RELEASE_AGE = "WaitingForReleaseAge"
    #: True: an operation of the cluster is Pending or Running. Step: none.
    OPERATION_RUNNING = "OperationRunning"
    #: True: ``maxConcurrentClusters`` clusters already run an auto-patch operation. Step: none, or
    #: raise ``maxConcurrentClusters``.
    FLEET_BUSY = "FleetBusy"
    #: True: auto-patch started an operation (the message names it). Step: none.
    STARTED = "Started"
    # False: stopped
    #: False: auto-patch is off, for want of a component or a window. Step: set ``components`` and
    #: ``windows`` to turn it on (docs/autopatch.md).
    DISABLED = "Disabled"
    #: False: a setting does not read (a time zone, a schedule, a health check); the message quotes
    #: it. Step: correct it.
    INVALID_SETTINGS = "InvalidSettings"
    #: False: ``spec.autoPatch.suspended`` is true. Step: ``ichor autopatch resume CLUSTER``.
    SUSPENDED = "Suspended"
    #: False: the last operation auto-patch started failed; auto-patch is suspended for the cluster
    #: and the version halted for the fleet. Step: read the operation's message, fix the cause, then
    #: ``ichor autopatch resume CLUSTER``.
    FAILED = "PatchFailed"
    #: False: the offered patch failed on another cluster and is halted for the fleet until the end
    #: of that window. Step: none; see ``status.autoPatch.halts`` of the IchorInstallation.
    HALTED = "Halted"
    #: False: the webhook refused the operation auto-patch started (the rule's sentence). Step:
    #: follow the refusal's step; auto-patch tries again at the next look.
    START_REFUSED = "StartRefused"
    # False: a health gate (the reason is the gate's name)
    #: False, a gate: the cluster's ``Ready`` is not True. Step: see ``Ready``'s reason.
    CLUSTER_NOT_READY = "ClusterNotReady"
    #: False, a gate: a Node's ``Ready`` condition is not True. Step: bring the Node back (``kubectl
    #: describe node`` on the workload).
    NODES_NOT_READY = "NodesNotReady"
    #: False, a gate: the Nodes do not all run the spec's version. Step: finish the half-done
    #: upgrade first (``NodesDiffer`` of ``Ready``).
    NODES_DIFFER = "NodesDiffer"
    #: False, a gate: ``VersionsCompatible`` is not True. Step: see that condition's reason.
    VERSIONS_INCOMPATIBLE = "VersionsIncompatible"
    #: False, a gate: the component's release list is not current (its last listing failed). Step:
    #: see ``ReleasesListed`` of the IchorInstallation.
    RELEASE_LIST_STALE = "ReleaseListStale"
    #: False, a gate: the workload's ``/readyz`` did not answer 2xx within 5 s; the message gives
    #: the answer's last line. Step: fix what ``/readyz`` reports on the workload.
    WORKLOAD_NOT_READY = "WorkloadNotReady"
    #: False, a gate: a health check of ``spec.autoPatch.healthChecks`` is not true (the message
    #: names it and why). Step: fix what the check watches, or the check.
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
    #: Accepted: the target rule accepts the operation at execution. Step: none.
    ACCEPTED = "Accepted"
    #: Accepted: ``override: true`` passed a compatibility refusal, named in the message. Step:
    #: none.
    OVERRIDDEN = "Overridden"
    #: Complete: the executor refused the operation (Accepted names the rule); no Job ran. Step:
    #: read Accepted's message and create a new operation the rule accepts.
    REFUSED = "Refused"
    #: Accepted, Pending: another operation of the cluster runs first (the message names it). Step:
    #: none.
    WAITING = "Waiting"
    #: Accepted, Pending: the executor checks the operation against its TalosCluster. Step: none.
    CHECKING = "Checking"
    # Complete
    #: Complete, Running: the Job is being created (a restart creates it if it is not there). Step:
    #: none.
    JOB_CREATING = "JobCreating"
    #: Complete, Running: the Job runs; the message names the step. Step: none; ``kubectl logs
    #: job/<status.jobName> --all-containers`` shows it.
    JOB_RUNNING = "JobRunning"
    #: Complete: the Job succeeded. Step: none.
    JOB_SUCCEEDED = "JobSucceeded"
    #: Complete, Failed: the Job failed; the message has its reason, the failed container's exit
    #: code and last log lines, and the spec is unchanged. Step: fix the cause, then create a new
    #: operation (docs/operations.md).
    JOB_FAILED = "JobFailed"
    #: Complete, Failed: the Job was deleted before it finished; the upgrade may be half done. Step:
    #: check the nodes' versions, then create a new operation.
    JOB_DELETED = "JobDeleted"
    #: Complete, Running: the Job succeeded and the executor moves the cluster's spec next. Step:
    #: none.
    SPEC_UPDATING = "SpecUpdating"
    # why an operation cannot run, or did not end well
    #: Accepted or Complete, Failed: the TalosCluster the operation names does not exist (or was
    #: deleted). Step: create the cluster, then the operation again.
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    #: Accepted, Failed: the talosconfig or kubeconfig the Job needs is not named, missing or not
    #: usable. Step: fix the Secret the message names (docs/adopt.md), then create the operation
    #: again.
    CREDENTIALS_UNUSABLE = "CredentialsUnusable"
    #: Accepted, Failed: the workload lists no Node (or no control-plane Node) to upgrade. Step:
    #: check the kubeconfig names the right cluster and the control-plane label is set.
    NO_NODES = "NoNodes"
    #: Accepted, Pending: the workload's Nodes cannot be read, so no Job is made; retried. Step: see
    #: the cluster's ``Ready`` reason.
    WORKLOAD_UNREACHABLE = "WorkloadUnreachable"
    #: Complete, Failed: the Job succeeded but the spec write was refused (the refusal's text).
    #: Step: set the TalosCluster's spec to the new version by hand.
    SPEC_NOT_UPDATED = "SpecNotUpdated"
    #: Accepted or Complete, Failed: the operation cannot run as written: its cluster's spec cannot
    #: be read, or a Job of its name exists that is not its own. Step: fix or delete what the
    #: message names, then create the operation again.
    INVALID_OPERATION = "InvalidOperation"
    #: Ready: the upgrade is installed, and the spec moved for talos and kubernetes. Step: none.
    SUCCEEDED = "Succeeded"
    #: Complete, Failed: the Job succeeded but a Node still reports the old version at the deadline
    #: (``ICHOR_NODE_VERSION_DEADLINE``), often a node that booted its previous Talos back. Step:
    #: look at the node (``talosctl dmesg``, ``talosctl version``), then create a new operation.
    NODES_NOT_UPGRADED = "NodesNotUpgraded"
    #: Refused: the cluster already has ``ICHOR_MAX_QUEUED_OPERATIONS`` not finished. Step:
    #: wait for them, or delete the ones no longer wanted, then create the operation again.
    QUEUE_FULL = "QueueFull"
    #: Pending: a short Job of talosctl reads each node's schematic, platform and
    #: SecureBoot through the Talos API, to build each node's own installer image.
    #: Step: none; if it stays, look at the read Job's Pod.
    NODES_READING = "NodesReading"
    #: Refused before any upgrade Job: a node's image cannot be read, its schematic
    #: annotation disagrees with the Talos API, its extensions come from no schematic, or
    #: the spec's cluster-wide schematic would drop an extension it runs. The message
    #: names the nodes; the override verb does not pass it, the spec does. Step: the
    #: one the message names (spec.nodeSchematics, or make the node answer).
    NODE_IMAGE_REFUSED = "NodeImageRefused"
    #: ``Complete=False``: a Talos operation goes node by node, one Job per node, with
    #: checks between nodes; ``status.nodes`` says which are done, which run, which next.
    #: Step: none.
    NODES_UPGRADING = "NodesUpgrading"
    #: ``Complete=False``: a node's upgrade Job is being created (``status.nodes.started``
    #: names it); a restart creates it if it is not there. Step: none.
    NODE_JOB_CREATING = "NodeJobCreating"
    #: A check between nodes failed (etcd not healthy with every member before a control
    #: plane node; after a node, the Node not Ready on the target, its etcd member not
    #: back, or a health check of the cluster failing): the operation stops before the
    #: next node, and the message names the check and the node reached. Step: make the
    #: check pass, then create a new operation (the nodes done keep the new Talos).
    CHECK_FAILED = "CheckFailed"
    #: A node's drain did not finish within the policy's drainTimeout: the image is
    #: staged on the node and the node is cordoned, not rebooted; the message names the
    #: node and the image. Step: the message's commands finish or undo it, or allow the
    #: disruption and create a new operation.
    DRAIN_TIMED_OUT = "DrainTimedOut"
    #: Refused before any node is touched: the talosconfig's client certificate expires
    #: before the operation's deadline, or its role cannot upgrade. Step: put a
    #: talosconfig with a valid os:admin certificate in the Secret, then create it again.
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
    #: ReleasesListed, Ready: the last check listed every repository. Step: none.
    LISTED = "Listed"
    #: ReleasesListed, Ready: a listing failed (the message names the repository and the cause); the
    #: last good list is kept and the next check retries. Step: check the egress to the registry
    #: (docs/release-check.md) and ``pullSecretRef`` for a private mirror.
    LISTING_FAILED = "ListingFailed"
    # IchorUpgradeAvailable
    #: IchorUpgradeAvailable: a final Ichor release newer than this one is published. Step: upgrade
    #: Ichor (docs/upgrading.md).
    UPGRADE_AVAILABLE = "UpgradeAvailable"
    #: IchorUpgradeAvailable: this Ichor is the newest release. Step: none.
    UP_TO_DATE = "UpToDate"
    #: IchorUpgradeAvailable: the chart repository could not be listed. Step: see
    #: ``ReleasesListed``.
    LIST_UNAVAILABLE = "ListUnavailable"


class Condition(ApiModel):
    """One entry of ``status.conditions`` (the shape of metav1.Condition)."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: datetime
