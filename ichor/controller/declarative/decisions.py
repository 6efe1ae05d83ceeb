"""What the declarative mode does for one cluster, as pure decisions.

Under ``spec.upgradeStrategy: Declarative`` the spec is the desired state: when its Talos
or Kubernetes is newer than what the Nodes run and nothing else runs, the controller
starts that operation (Talos first), judged by the webhook as a person's. ``decide`` says
what to do now; ``condition`` words it as ``SpecReached``. A refused start is remembered
for its spec generation: no retry loop.

More in docs/design/notes.md, "ichor/controller/declarative/decisions.py".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ichor.api.conditions import ConditionStatus, SpecReachedReason
from ichor.api.taloscluster import TalosClusterSpec, UpgradeStrategy
from ichor.api.talosoperation import STARTED_BY_LABEL, OperationType, StartedBy
from ichor.release.versions import VersionError, parse


@dataclass(frozen=True)
class ActiveOperation:
    """A TalosOperation of the cluster that is Pending or Running (read from its watch)."""

    name: str
    what: str
    phase: str
    #: Started by the declarative mode (the operator's own label; the webhook refuses
    #: it from anyone else).
    declarative: bool = False

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> tuple[str, ActiveOperation] | None:
        """The cluster it is for and the operation, or None when it is not active (no
        phase yet counts as Pending: the executor has not seen it)."""
        spec = body.get("spec")
        status = body.get("status")
        spec = spec if isinstance(spec, Mapping) else {}
        status = status if isinstance(status, Mapping) else {}
        ref = spec.get("clusterRef")
        cluster = ref.get("name") if isinstance(ref, Mapping) else None
        phase = status.get("phase") or "Pending"
        if not isinstance(cluster, str) or phase not in ("Pending", "Running"):
            return None
        what = " ".join(str(part) for part in (spec.get("type"), spec.get("version")) if part)
        meta = body.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        labels = meta.get("labels")
        started_by = labels.get(STARTED_BY_LABEL) if isinstance(labels, Mapping) else None
        return cluster, cls(
            name=str(meta.get("name", "")),
            what=what or "an upgrade",
            phase=str(phase),
            declarative=started_by == StartedBy.DECLARATIVE.value,
        )


@dataclass(frozen=True)
class Declared:
    """Where a ``Declarative`` cluster stands against its spec (``SpecReached``), as the
    declarative mode decided it (``ichor.controller.declarative``)."""

    reached: bool
    #: A person's step is needed (the start was refused, the operation failed, ...).
    stalled: bool
    reason: str
    message: str


#: Reasons under which the cluster is Stalled (a person's step is needed); the others
#: of a False ``SpecReached`` make it Reconciling.
STALLED = frozenset(
    {
        SpecReachedReason.REFUSED,
        SpecReachedReason.FAILED,
        SpecReachedReason.NODES_AHEAD,
        SpecReachedReason.UNREADABLE,
    }
)

NAMES = {OperationType.TALOS: "Talos", OperationType.KUBERNETES: "Kubernetes"}


@dataclass(frozen=True)
class Target:
    """The component the spec moves next, and why (for the operation's annotation)."""

    type: OperationType
    version: str
    running: str

    @property
    def sentence(self) -> str:
        name = NAMES[self.type]
        field = "talosVersion" if self.type is OperationType.TALOS else "kubernetesVersion"
        return f"spec.{field} is {name} {self.version}, the Nodes run {self.running}"


@dataclass(frozen=True)
class Decision:
    """``start`` set: start that operation now. Otherwise ``reason``/``message`` say why
    not (``Reached`` when there is nothing to do)."""

    reason: SpecReachedReason
    message: str
    start: Target | None = None
    status: ConditionStatus = ConditionStatus.FALSE
    #: A refusal that is no rule's (a namesake, RBAC, the schema): shown, but tried again
    #: at the next check rather than remembered for the spec generation.
    retry: bool = False

    def declared(self) -> Declared:
        """What the cluster's status shows of it."""
        return Declared(
            reached=self.status is ConditionStatus.TRUE,
            stalled=self.reason in STALLED,
            reason=self.reason.value,
            message=self.message,
        )


def _behind(
    type_: OperationType, *, spec: str, nodes: Sequence[str]
) -> tuple[Target | None, str | None]:
    """The target when some Node runs less than ``spec``; or a problem sentence."""
    name = NAMES[type_]
    try:
        wanted = parse(spec)
        running = [(parse(v), v) for v in nodes]
    except VersionError as error:
        return None, f"{name} cannot be compared: {error}"
    if not running:
        return None, None
    lowest_parsed, lowest = min(running)
    highest_parsed, highest = max(running)
    if highest_parsed > wanted:
        return None, (
            f"the Nodes run {name} {highest}, newer than the spec's {spec}; Ichor never "
            f"downgrades: set the spec to what runs"
        )
    if lowest_parsed < wanted:
        return Target(type=type_, version=spec, running=lowest), None
    return None, None


def decide(
    *,
    spec: TalosClusterSpec,
    talos_nodes: Sequence[str] | None,
    kubernetes_nodes: Sequence[str] | None,
    active: Sequence[ActiveOperation],
) -> Decision | None:
    """What to do for a cluster now; None when it is not in the declarative mode.

    ``*_nodes``: the distinct versions the Nodes were last seen running (None: not read).
    """
    if spec.upgrade_strategy is not UpgradeStrategy.DECLARATIVE:
        return None
    if not talos_nodes or not kubernetes_nodes:
        return Decision(SpecReachedReason.NOT_OBSERVED, "the Nodes have not been read yet")
    target: Target | None = None
    for type_, wanted, nodes in (
        (OperationType.TALOS, spec.talos_version, talos_nodes),
        (OperationType.KUBERNETES, spec.kubernetes_version, kubernetes_nodes),
    ):
        found, problem = _behind(type_, spec=wanted, nodes=nodes)
        if problem is not None:
            reason = (
                SpecReachedReason.UNREADABLE
                if "compared" in problem
                else SpecReachedReason.NODES_AHEAD
            )
            return Decision(reason, problem)
        if found is not None:
            target = found  # Talos first: it is checked first and ends the loop
            break
    if active:
        first = sorted(active, key=lambda op: (op.phase != "Running", op.name))[0]
        running = f"TalosOperation {first.name} ({first.what}) is {first.phase}"
        if first.declarative:
            return Decision(SpecReachedReason.UPGRADING, running)
        later = f"; {target.sentence}: it starts after" if target else ""
        return Decision(SpecReachedReason.WAITING, running + later)
    if target is None:
        message = (
            f"the Nodes run the spec's Talos {spec.talos_version} and Kubernetes "
            f"{spec.kubernetes_version}"
        )
        return Decision(SpecReachedReason.REACHED, message, status=ConditionStatus.TRUE)
    return Decision(
        SpecReachedReason.UPGRADING, f"{target.sentence}: starting the upgrade", start=target
    )
