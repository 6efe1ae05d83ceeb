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

    OBSERVED = "Observed"
    VERSION_CHANGED = "VersionChanged"
    NODES_DIFFER = "NodesDiffer"
    UNREACHABLE = "WorkloadUnreachable"
    KUBECONFIG_UNUSABLE = "KubeconfigUnusable"
    NODE_VERSION_UNREADABLE = "NodeVersionUnreadable"
    INVALID_SPEC = "InvalidSpec"
    INCOMPATIBLE = "VersionsIncompatible"
    COMPATIBLE = "VersionsCompatible"
    TALOS_UPGRADE = "TalosUpgradeAvailable"
    KUBERNETES_UPGRADE = "KubernetesUpgradeAvailable"
    CILIUM_UPGRADE = "CiliumUpgradeAvailable"
    #: Declarative: the start of the operation the spec asks for was refused.
    UPGRADE_REFUSED = "UpgradeRefused"
    #: Declarative: the spec cannot be reached without a person's step.
    SPEC_NOT_REACHED = "SpecNotReached"
    #: Declarative: the Nodes run the spec's versions (again).
    SPEC_REACHED = "SpecReached"
    #: No ServiceAccount may read the cluster the operator runs in for the TalosCluster.
    SERVICE_ACCOUNT_UNUSABLE = "ServiceAccountUnusable"
    #: Cilium is seen but its release cannot be read: every Kubernetes step is refused.
    CILIUM_VERSION_UNREADABLE = "CiliumVersionUnreadable"
    #: Cilium is seen on a cluster whose spec.cni.preset is unmanaged (rule skipped).
    UNMANAGED_CILIUM = "UnmanagedCilium"


class OperationEventReason(StrEnum):
    """Posted by the TalosOperation executor (``ichor.controller.talosoperation``), on the
    operation and (the ``UPGRADE_*`` and ``STOPPED`` ones) on its TalosCluster."""

    WAITING = "Waiting"
    STARTED = "Started"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    REFUSED = "Refused"
    OVERRIDE = "Override"
    STOPPED = "Stopped"
    UPGRADE_STARTED = "UpgradeStarted"
    UPGRADE_SUCCEEDED = "UpgradeSucceeded"
    UPGRADE_FAILED = "UpgradeFailed"


class AutoPatchEventReason(StrEnum):
    """Posted on a TalosCluster by auto-patch (``ichor.controller.autopatch``)."""

    STARTED = "AutoPatchStarted"
    FAILED = "AutoPatchFailed"
    RESUMED = "AutoPatchResumed"
    BLOCKED = "AutoPatchBlocked"
    #: On the IchorInstallation: a person lifted halts early (``ichor autopatch unhalt``),
    #: posted by the recorder once the halts are lifted, naming that person.
    UNHALTED = "AutoPatchUnhalted"


class ReleaseCheckEventReason(StrEnum):
    """Posted on the IchorInstallation by the release check
    (``ichor.controller.releasecheck``)."""

    LISTING_FAILED = "ReleaseListingFailed"
    LISTING_RECOVERED = "ReleaseListingRecovered"


class RecordEventReason(StrEnum):
    """Posted by the recorder (``ichor.controller.recorder``) for an admission record the
    webhook wrote into an object (``ichor.api.records``)."""

    #: A refusal passed by a holder of the override verb, or carried by the operator's
    #: spec write from such an operation.
    OVERRIDE = "Override"
    #: A cluster adopted as it runs, with a pair the compatibility table refuses.
    ADOPTED_INCOMPATIBLE = "AdoptedIncompatible"
    #: A Kubernetes step on an unmanaged cluster past a Cilium the rule would refuse.
    CILIUM_RULE_SKIPPED = "CiliumRuleSkipped"
