"""The reasons of every Event Ichor posts, one enum per part that posts them.

Events say what happened (conditions say what is, ``ichor.api.conditions``). A reason is
a CamelCase word a program or a person's alert may match on, so, like the condition
reasons, each is a str enum member and all of them live here: a reader finds every
reason Ichor can post in one file. One enum per poster rather than one for all: the
parts name different happenings alike (an operation's ``Started`` and auto-patch's
``AutoPatchStarted``), and a poster's enum says which reasons it may post.
"""

from __future__ import annotations

from enum import StrEnum


class ClusterEventReason(StrEnum):
    """Posted on a TalosCluster by its controller (``ichor.controller.taloscluster``)."""

    #: Normal: the workload cluster was read for the first time, or again after a failure. Step:
    #: none.
    OBSERVED = "Observed"
    #: Normal: the Nodes now run another Talos or Kubernetes version. Step: none.
    VERSION_CHANGED = "VersionChanged"
    #: Normal: the Nodes started to report different versions. Step: as the ``NodesDiffer``
    #: condition reason.
    NODES_DIFFER = "NodesDiffer"
    #: Warning: the workload's Kubernetes API stopped answering. Step: as the
    #: ``WorkloadUnreachable`` condition reason.
    UNREACHABLE = "WorkloadUnreachable"
    #: Warning: the kubeconfig Secret became unusable. Step: as the ``KubeconfigUnusable`` condition
    #: reason.
    KUBECONFIG_UNUSABLE = "KubeconfigUnusable"
    #: Warning: a Node's version could not be read. Step: as the ``NodeVersionUnreadable`` condition
    #: reason.
    NODE_VERSION_UNREADABLE = "NodeVersionUnreadable"
    #: Warning: the spec cannot be read by any rule. Step: correct the field the message names.
    INVALID_SPEC = "InvalidSpec"
    #: Warning: the versions stopped holding together in the compatibility table. Step: ``ichor
    #: upgrade plan CLUSTER``.
    INCOMPATIBLE = "VersionsIncompatible"
    #: Normal: the versions hold together again. Step: none.
    COMPATIBLE = "VersionsCompatible"
    #: Normal: a new default Talos upgrade is offered. Step: ``ichor upgrade talos CLUSTER`` when
    #: you choose to.
    TALOS_UPGRADE = "TalosUpgradeAvailable"
    #: Normal: a new default Kubernetes upgrade is offered. Step: ``ichor upgrade kubernetes
    #: CLUSTER`` when you choose to.
    KUBERNETES_UPGRADE = "KubernetesUpgradeAvailable"
    #: Normal: the embedded Cilium chart is newer than the running Cilium. Step: ``ichor cni upgrade
    #: CLUSTER`` when you choose to.
    CILIUM_UPGRADE = "CiliumUpgradeAvailable"
    #: Warning, Declarative: the start of the operation the spec asks for was refused. Step: as the
    #: ``Refused`` reason of ``SpecReached``.
    UPGRADE_REFUSED = "UpgradeRefused"
    #: Warning, Declarative: the spec cannot be reached without a person's step. Step: the one
    #: ``SpecReached``'s message names.
    SPEC_NOT_REACHED = "SpecNotReached"
    #: Normal, Declarative: the Nodes run the spec's versions (again). Step: none.
    SPEC_REACHED = "SpecReached"
    #: Warning: no ServiceAccount may read the cluster the operator runs in for the TalosCluster.
    #: Step: as the ``ServiceAccountUnusable`` condition reason.
    SERVICE_ACCOUNT_UNUSABLE = "ServiceAccountUnusable"
    #: Cilium is seen but its release cannot be read: every Kubernetes step is refused.
    #: Step: as the ``CiliumVersionUnreadable`` condition reason.
    CILIUM_VERSION_UNREADABLE = "CiliumVersionUnreadable"
    #: Cilium is seen on a cluster whose spec.cni.preset is unmanaged (rule skipped). Step:
    #: as the ``UnmanagedCilium`` condition reason.
    UNMANAGED_CILIUM = "UnmanagedCilium"


class OperationEventReason(StrEnum):
    """Posted by the TalosOperation executor (``ichor.controller.talosoperation``), on the
    operation and (the ``UPGRADE_*`` and ``STOPPED`` ones) on its TalosCluster."""

    #: Normal, on the operation: it waits for another operation of the cluster. Step: none.
    WAITING = "Waiting"
    #: Normal, on the operation: its Job was created. Step: none.
    STARTED = "Started"
    #: Normal, on the operation: it succeeded. Step: none.
    SUCCEEDED = "Succeeded"
    #: Warning, on the operation: it failed; the message says why. Step: as the reason of its
    #: ``Complete`` condition.
    FAILED = "Failed"
    #: Warning, on the operation: the executor refused it, no Job ran. Step: as the reason of its
    #: ``Accepted`` condition.
    REFUSED = "Refused"
    #: Warning, on the operation: it runs under ``override: true``, passing the refusal named. Step:
    #: none; it is the record of a passed refusal.
    OVERRIDE = "Override"
    #: Warning, on the TalosCluster: a Running operation was deleted and its Job stopped; nothing
    #: was rolled back. Step: check the nodes' versions before a new operation.
    STOPPED = "Stopped"
    #: Normal, on the TalosCluster: an operation's Job started. Step: none.
    UPGRADE_STARTED = "UpgradeStarted"
    #: Normal, on the TalosCluster: an operation succeeded. Step: none.
    UPGRADE_SUCCEEDED = "UpgradeSucceeded"
    #: Warning, on the TalosCluster: an operation failed. Step: read the operation (``kubectl
    #: describe talosoperation``).
    UPGRADE_FAILED = "UpgradeFailed"


class AutoPatchEventReason(StrEnum):
    """Posted on a TalosCluster by auto-patch (``ichor.controller.autopatch``)."""

    #: Normal: auto-patch started an operation in a window. Step: none.
    STARTED = "AutoPatchStarted"
    #: Warning: an operation auto-patch started failed; auto-patch is suspended for the cluster and
    #: the version halted for the fleet. Step: fix the cause, then ``ichor autopatch resume
    #: CLUSTER``.
    FAILED = "AutoPatchFailed"
    #: Normal: a person resumed auto-patch after a failure. Step: none.
    RESUMED = "AutoPatchResumed"
    #: Warning: a gate or a hold newly stops auto-patch's start (the message names it). Step: as the
    #: reason of ``AutoPatchReady``.
    BLOCKED = "AutoPatchBlocked"
    #: On the IchorInstallation: a person lifted halts early (``ichor autopatch unhalt``),
    #: posted by the recorder once the halts are lifted, naming that person. Step: none.
    UNHALTED = "AutoPatchUnhalted"


class ReleaseCheckEventReason(StrEnum):
    """Posted on the IchorInstallation by the release check
    (``ichor.controller.releasecheck``)."""

    #: Warning, on the IchorInstallation: a release list newly failed; its last good list is kept.
    #: Step: as the ``ListingFailed`` condition reason.
    LISTING_FAILED = "ReleaseListingFailed"
    #: Normal, on the IchorInstallation: a list that failed was read again. Step: none.
    LISTING_RECOVERED = "ReleaseListingRecovered"


class RecordEventReason(StrEnum):
    """Posted by the recorder (``ichor.controller.recorder``) for an admission record the
    webhook wrote into an object (``ichor.api.records``)."""

    #: Warning: a refusal passed by a holder of the override verb, or carried by the operator's spec
    #: write from such an operation; the message names the user and the refusal. Step: none; it is
    #: the audit record.
    OVERRIDE = "Override"
    #: Warning: a cluster adopted as it runs, with a pair the compatibility table refuses. Step:
    #: ``ichor upgrade plan CLUSTER`` to a compatible pair.
    ADOPTED_INCOMPATIBLE = "AdoptedIncompatible"
    #: A Kubernetes step on an unmanaged cluster past a Cilium the rule would refuse. Step:
    #: none; it records who took the step (upgrade Cilium to a release that runs it).
    CILIUM_RULE_SKIPPED = "CiliumRuleSkipped"
