"""Spec and status of a TalosOperation (crds/talosoperations.ichor.dev.yaml).

An operation is one upgrade of one component; its spec never changes after creation (the
CRD refuses an edit). The status moves Pending -> Running -> Succeeded or Failed.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from ichor.api._base import ApiModel
from ichor.api.conditions import Condition


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
