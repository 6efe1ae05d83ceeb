"""Spec and status of a TalosOperation (crds/talosoperations.ichor.dev.yaml).

An operation is one upgrade of one component; its spec never changes after creation (the
CRD refuses an edit). The status moves Pending -> Running -> Succeeded or Failed.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from ichor.api._base import ApiModel
from ichor.api.conditions import Condition

#: Label on an operation the controller started by itself, naming who (``StartedBy``).
#: Only the operator's identity may set, change or remove it: the webhook refuses it from
#: anyone else, so the controller may take it as its own mark.
STARTED_BY_LABEL = "ichor.dev/started-by"


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


class TalosOperationStatus(ApiModel):
    observed_generation: int | None = None
    phase: Phase | None = None
    conditions: tuple[Condition, ...] = ()
    started_at: datetime | None = None
    finished_at: datetime | None = None
    job_name: str | None = None
    message: str | None = None
