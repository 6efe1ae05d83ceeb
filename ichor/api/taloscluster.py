"""Spec and status of a TalosCluster (crds/talosclusters.ichor.dev.yaml).

The spec is the user's: the versions the cluster should run, its CNI, and where to find
its kubeconfig and talosconfig. The status is the controller's: what the nodes run, the
CNI it saw, the upgrade choices and the conditions. Versions stay strings here because a
stored object may hold one that no rule accepts (written before validation existed); the
controller judges them, the model only carries them.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from ichor.api._base import ApiModel
from ichor.api.autopatch import AutoPatchSpec, AutoPatchStatus
from ichor.api.conditions import Condition
from ichor.api.owed import OwedEvent
from ichor.release import steps
from ichor.release.policy import NO_POLICY, SitePolicy
from ichor.upgrade.rule import ClusterVersions


class CNIPreset(StrEnum):
    #: Ichor installs and upgrades the Cilium chart it embeds.
    CILIUM = "cilium"
    #: The user runs their own CNI; Ichor installs none.
    UNMANAGED = "unmanaged"


#: The CNI name the controller records in ``status.cni.detected`` when it sees Cilium.
DETECTED_CILIUM = "cilium"

DEFAULT_KUBECONFIG_KEY = "kubeconfig"
DEFAULT_TALOSCONFIG_KEY = "talosconfig"


class SecretKeyRef(ApiModel):
    """A key of a Secret in the object's own namespace."""

    name: str
    key: str | None = None


class UpgradeStrategy(StrEnum):
    """How a TalosCluster's versions move (``spec.upgradeStrategy``)."""

    #: A TalosOperation moves the Nodes; on success the executor records the version in
    #: the spec (the spec is what was last installed). The default.
    OPERATIONS = "Operations"
    #: The spec is the desired state: the controller starts the operation for a version
    #: the Nodes do not run yet, and never writes the spec (for git-managed clusters).
    DECLARATIVE = "Declarative"


class CNISpec(ApiModel):
    preset: CNIPreset = CNIPreset.CILIUM


class LabelSelector(ApiModel):
    """A Node label selector (the ``matchLabels`` of a Kubernetes LabelSelector)."""

    match_labels: dict[str, str]


class NodeSchematic(ApiModel):
    """``spec.nodeSchematics[]``: the Image Factory schematic of the Nodes a selector
    picks; the deliberate way to change their system extensions."""

    selector: LabelSelector
    schematic: str


class RebootMode(StrEnum):
    """talosctl's ``--reboot-mode`` (machine.RebootRequest_Mode): ``default`` lets the
    node kexec into the new kernel where it can; ``powercycle`` bypasses kexec."""

    DEFAULT = "default"
    POWERCYCLE = "powercycle"


class UpgradePolicy(ApiModel):
    """How a Talos upgrade moves through the nodes (``spec.upgradePolicy``; each field
    left unset is the IchorInstallation's, then talosctl's own default)."""

    #: Cordon and drain each node before its reboot (talosctl ``--drain``).
    drain: bool | None = None
    #: How long a drain may take (talosctl ``--drain-timeout``, a Go duration).
    drain_timeout: str | None = None
    reboot_mode: RebootMode | None = None
    #: Worker nodes upgraded at the same time; control plane nodes always go one by one.
    max_unavailable_workers: int | None = None


#: talosctl's own defaults (cmd/talosctl/cmd/talos/upgrade.go, v1.13.9: --drain true,
#: --drain-timeout nodedrain.DefaultDrainTimeout = 5m, --reboot-mode default), and one
#: worker at a time.
DEFAULT_UPGRADE_POLICY = UpgradePolicy(
    drain=True, drain_timeout="5m", reboot_mode=RebootMode.DEFAULT, max_unavailable_workers=1
)


def effective_policy(*layers: UpgradePolicy | None) -> UpgradePolicy:
    """Each field from the first layer that sets it (the cluster's, the fleet's), else
    the default."""
    found: dict[str, object] = {}
    for field in UpgradePolicy.model_fields:
        for layer in (*layers, DEFAULT_UPGRADE_POLICY):
            value = getattr(layer, field) if layer is not None else None
            if value is not None:
                found[field] = value
                break
    return UpgradePolicy.model_validate(found)


class TalosClusterSpec(ApiModel):
    talos_version: str
    kubernetes_version: str
    version_contract: str
    cni: CNISpec = CNISpec()
    #: The schematic every node installs (unset: each node keeps its own, read from it).
    schematic: str | None = None
    #: Schematics of the nodes label selectors pick, over ``schematic``; the first match
    #: wins (``ichor.upgrade.node_images``).
    node_schematics: tuple[NodeSchematic, ...] | None = None
    #: Without it, the workload cluster is the one the operator runs in.
    kubeconfig_secret_ref: SecretKeyRef | None = None
    talosconfig_secret_ref: SecretKeyRef | None = None
    #: The cluster's own auto-patch settings, over the fleet's (IchorInstallation).
    auto_patch: AutoPatchSpec | None = None
    upgrade_strategy: UpgradeStrategy = UpgradeStrategy.OPERATIONS
    #: How a Talos upgrade moves through the nodes, over the fleet's default.
    upgrade_policy: UpgradePolicy | None = None
    #: The ServiceAccount of this namespace the operator reads the cluster it runs in as,
    #: when there is no kubeconfig Secret (ichor.kube.accounts); unset: the fleet's default.
    service_account_name: str | None = None


class NodeVersions(ApiModel):
    """The versions seen across the Nodes; reported, never averaged."""

    count: int | None = None
    talos_versions: tuple[str, ...] | None = None
    kubernetes_versions: tuple[str, ...] | None = None
    differ: bool | None = None
    #: One sentence per Node whose versions cannot be read (the controller's own words):
    #: while any is listed, what the Nodes run is unknown (``ichor.release.observed``).
    unreadable: tuple[str, ...] | None = None


class NodeImageGroup(ApiModel):
    """Nodes that run the same image: schematic, factory, platform, SecureBoot and
    system extensions, as the Talos API says."""

    platform: str
    secure_boot: bool = False
    #: None: not built by an Image Factory.
    schematic: str | None = None
    factory: str | None = None
    extensions: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


class NodeImages(ApiModel):
    """What each node is built from, grouped by identical image so a large cluster's
    status stays small (``status.nodeImages``)."""

    #: When the Talos API was last read (a read Job of an operation).
    read_at: datetime | None = None
    #: ``1 image`` or ``3 images``: the printer column ``kubectl get tc -o wide`` shows.
    summary: str | None = None
    differ: bool | None = None
    groups: tuple[NodeImageGroup, ...] = ()
    #: One sentence per node whose image could not be read, or whose Node annotation
    #: disagrees with the Talos API.
    unreadable: tuple[str, ...] = ()


class CNIStatus(ApiModel):
    detected: str | None = None
    detected_version: str | None = None
    #: Deprecated: a Cilium image patch recorded by an earlier Ichor, none set any more.
    image_override: str | None = None
    #: Cilium is detected but its release cannot be read (``detected_version`` empty):
    #: what was seen and could not be read, in the controller's own words.
    unreadable: str | None = None


class ChoiceGroup(ApiModel):
    """Upgrade choices of one component, newest first (see ichor.upgrade.choices)."""

    recommended: str | None = None
    patch: tuple[str, ...] = ()
    next_minor: tuple[str, ...] = ()
    default: str | None = None
    available: bool = False
    unavailable_reason: str | None = None


class UpgradeChoices(ApiModel):
    talos: ChoiceGroup | None = None
    kubernetes: ChoiceGroup | None = None


class BlockedLine(ApiModel):
    """The nearest blocked release of one component (ichor.upgrade.blocked)."""

    component: str
    version: str
    blocker: str
    message: str


class BlockedReleases(ApiModel):
    """How many recorded newer releases are not offered, and the nearest blocker of each
    component: the short form of ``ichor upgrade ... --list``'s "Not offered"."""

    count: int = 0
    releases: int = 0
    nearest: tuple[BlockedLine, ...] = ()


class TalosClusterStatus(ApiModel):
    observed_generation: int | None = None
    talos_version: str | None = None
    kubernetes_version: str | None = None
    nodes: NodeVersions | None = None
    node_images: NodeImages | None = None
    cni: CNIStatus | None = None
    upgrade_choices: UpgradeChoices | None = None
    #: None when no list could be judged (no list recorded, or a spec no rule reads).
    blocked_releases: BlockedReleases | None = None
    #: Written by auto-patch; the rest of the status carries it over unchanged.
    auto_patch: AutoPatchStatus | None = None
    conditions: tuple[Condition, ...] = ()
    #: Events decided with this status and not posted yet (``ichor.api.owed``).
    pending_events: dict[str, OwedEvent] | None = None


def cluster_versions(
    *, spec: TalosClusterSpec, cni: CNIStatus | None, policy: SitePolicy = NO_POLICY
) -> ClusterVersions:
    """What the rules read of a cluster: the spec's versions, its CNI preset and the CNI
    the controller observed (the Cilium release only for a managed Cilium detected;
    ``Unreadable`` when its release cannot be read), with the site's ``policy``."""
    detected = cni.detected if cni else None
    preset = spec.cni.preset.value
    return ClusterVersions(
        talos=spec.talos_version,
        kubernetes=spec.kubernetes_version,
        cilium=steps.cilium_release(
            preset=preset,
            detected=detected,
            version=cni.detected_version if cni else None,
            unreadable=cni.unreadable if cni else None,
        ),
        cni=detected,
        preset=preset,
        policy=policy,
    )
