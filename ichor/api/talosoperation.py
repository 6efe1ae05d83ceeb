"""Spec and status of a TalosOperation (crds/talosoperations.ichor.dev.yaml).

An operation is one upgrade of one component; its spec never changes after creation (the
CRD refuses an edit). The status moves Pending -> Running -> Succeeded or Failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from ichor.api._base import ApiModel
from ichor.api.conditions import Condition
from ichor.api.owed import OwedEvent

#: Label on an operation the controller started by itself, naming who (``StartedBy``).
#: Only the operator's identity may set, change or remove it: the webhook refuses it from
#: anyone else, so the controller may take it as its own mark.
STARTED_BY_LABEL = "ichor.dev/started-by"
#: Annotations on an operation the controller started: the attempt token its name was
#: made from, and why it was started. The operator's marks, like the label.
ATTEMPT_ANNOTATION = "ichor.dev/attempt"
STARTED_FOR_ANNOTATION = "ichor.dev/started-for"


class StartedBy(StrEnum):
    #: A maintenance window was open and a newer patch was due (auto-patch).
    AUTO_PATCH = "auto-patch"
    #: The TalosCluster's spec names a version the nodes do not run (declarative mode).
    DECLARATIVE = "declarative"


class OperationType(StrEnum):
    TALOS = "talos"
    KUBERNETES = "kubernetes"
    CNI = "cni"


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class Failure(StrEnum):
    """What kind of failure a Failed operation had (``status.failure``), written by the
    executor. Only ``UPGRADE_FAILED`` says something about the version: auto-patch halts
    a version for other clusters on it alone (docs/autopatch.md)."""

    #: The rules refused it at execution: nothing ran.
    REFUSED = "Refused"
    #: It never reached the nodes: no or unusable credentials, no Node to upgrade, the
    #: cluster gone, or its Job's upgrade step never started (an image that cannot be
    #: pulled, a deadline passed before it started, a Job deleted before it started).
    NOT_STARTED = "NotStarted"
    #: The upgrade step ran against the nodes and failed: the Job failed after its step
    #: started, or the Nodes did not report the target once the Job succeeded.
    UPGRADE_FAILED = "UpgradeFailed"
    #: Its step started but it ended for another reason than the upgrade failing: its Job
    #: was deleted, the cluster went, or the spec could not be moved after a success.
    INTERRUPTED = "Interrupted"


class ClusterRef(ApiModel):
    """A TalosCluster in the operation's namespace."""

    name: str


class OperationCNISpec(ApiModel):
    #: Deprecated, unused: an operation that sets it is refused by the executor.
    image_version: str | None = None


class TalosOperationSpec(ApiModel):
    cluster_ref: ClusterRef
    type: OperationType
    #: Required for talos and kubernetes; a cni operation takes none.
    version: str | None = None
    override: bool = False
    cni: OperationCNISpec | None = None


class PlannedNode(ApiModel):
    """A node a Talos operation upgrades, as ``talosctl --nodes`` reaches it."""

    name: str
    address: str
    control_plane: bool = False


class ImageNodes(ApiModel):
    """One installer image and the nodes that install it."""

    image: str
    nodes: tuple[str, ...] = ()


class NodeStage(StrEnum):
    """Where the nodes being upgraded (``current``) stand."""

    #: The checks before them run (etcd healthy with every member, before a control
    #: plane node).
    CHECKING = "Checking"
    #: Each has its own Job running ``talosctl upgrade``.
    UPGRADING = "Upgrading"
    #: Their Jobs succeeded; each must be Ready on the target, its etcd member back, and
    #: the cluster's health checks passing.
    VERIFYING = "Verifying"


class NodePolicy(ApiModel):
    """The upgrade policy the operation runs under, fixed when it starts."""

    drain: bool = True
    drain_timeout: str = "5m"
    reboot_mode: str = "default"
    max_unavailable_workers: int = 1
    #: A single-node cluster: never drained (nothing could take its Pods).
    single_node: bool = False


class OperationNodes(ApiModel):
    """A Talos operation's nodes, fixed when it starts: the order they go in, each
    node's own installer image (grouped by image), and the deliberate extension changes
    (one sentence per group of nodes, from what to what); then where it stands, node by
    node, written before each step so a restart resumes at the right node."""

    order: tuple[PlannedNode, ...] = ()
    images: tuple[ImageNodes, ...] = ()
    changes: tuple[str, ...] | None = None
    #: The nodes whose schematic the spec changes (a node already on the target but not
    #: on its new image is upgraded again).
    changing: tuple[str, ...] | None = None
    policy: NodePolicy | None = None
    #: Nodes upgraded and checked, in order.
    done: tuple[str, ...] | None = None
    #: Nodes whose upgrade Job was created (never created twice).
    started: tuple[str, ...] | None = None
    #: The nodes being upgraded now (one control plane node, or up to
    #: ``maxUnavailableWorkers`` workers), and their stage since ``since``.
    current: tuple[str, ...] | None = None
    stage: NodeStage | None = None
    since: datetime | None = None
    #: Counts the check Jobs, so each has a name of its own.
    attempt: int | None = None
    #: The checks passed so far, the latest last (at most 20 kept).
    checks: tuple[str, ...] | None = None

    def image_of(self) -> dict[str, str]:
        return {name: group.image for group in self.images for name in group.nodes}


class TalosOperationStatus(ApiModel):
    observed_generation: int | None = None
    phase: Phase | None = None
    conditions: tuple[Condition, ...] = ()
    started_at: datetime | None = None
    finished_at: datetime | None = None
    job_name: str | None = None
    message: str | None = None
    #: When a container of the Job's pod, an upgrade step, was first seen started: from
    #: then on the upgrade acted on the nodes.
    upgrade_started_at: datetime | None = None
    #: On a Failed operation: which kind of failure (None: written by an older Ichor).
    failure: Failure | None = None
    #: Events decided with this status and not posted yet (``ichor.api.owed``).
    pending_events: dict[str, OwedEvent] | None = None
    #: A Talos operation's nodes and their images, written when it is claimed.
    nodes: OperationNodes | None = None


# --- the queue of one cluster ---------------------------------------------------------------


def queued_on(body: object, cluster: str) -> bool:
    """Whether the stored operation ``body`` waits or runs on TalosCluster ``cluster`` (of
    its namespace): it names that cluster, is not being deleted, and has not finished.
    Read from what is stored, whoever wrote it; anything unreadable counts, so a broken
    object cannot make room in the queue."""
    if not isinstance(body, Mapping):
        return False
    spec = body.get("spec")
    ref = spec.get("clusterRef") if isinstance(spec, Mapping) else None
    if not isinstance(ref, Mapping) or ref.get("name") != cluster:
        return False
    meta = body.get("metadata")
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        return False
    status = body.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase not in (Phase.SUCCEEDED.value, Phase.FAILED.value)


def queue_full_message(*, namespace: str, name: str, cluster: str, most: int) -> str:
    """The refusal of an operation past the most one cluster queues (the webhook's at its
    create, the executor's for one that raced past it)."""
    return (
        f"TalosOperation {namespace}/{name} is refused: TalosCluster {namespace}/{cluster} "
        f"already has {most} operations not finished, the most one cluster queues "
        f"(ICHOR_MAX_QUEUED_OPERATIONS); wait for them to finish or delete the queued ones "
        f"you no longer need, then create it again."
    )
