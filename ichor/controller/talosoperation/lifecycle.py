"""The TalosOperation lifecycle as pure decisions: which operation runs, may it run, how its
Job stands, and the status each step writes.

``executor`` (the I/O side) reads the objects and makes the calls; everything it decides
comes from here: ``run_order``, ``check_execution``, ``decide``, ``job_outcome`` and the
status of each step (``pending``, ``running``, ``succeeded``, ``failed``). Every version
judgement is ``ichor.upgrade``'s or ``ichor.release``'s; it invents no rule.

More in docs/design/notes.md, "ichor/controller/talosoperation/lifecycle.py".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import ValidationError

from ichor.api import owed, records, taloscluster
from ichor.api.conditions import (
    Condition,
    ConditionStatus,
    OperationConditionType,
    OperationReason,
)
from ichor.api.events import OperationEventReason
from ichor.api.reading import read_whole
from ichor.api.taloscluster import TalosClusterSpec, TalosClusterStatus, UpgradeStrategy
from ichor.api.talosoperation import (
    Failure,
    OperationNodes,
    OperationType,
    Phase,
    TalosOperationSpec,
    TalosOperationStatus,
)
from ichor.kube import bodies, conditions
from ichor.release import observed
from ichor.release.observed import Unreadable
from ichor.release.policy import NO_POLICY, SitePolicy
from ichor.release.refusals import Refusal, Rule, Verdict, judge, refuse
from ichor.release.release_set import PINNED
from ichor.release.versions import Version, VersionError, parse
from ichor.upgrade import rule as upgrade_target
from ichor.upgrade.rule import ClusterVersions, Component, judge_target

#: Set on an operation while its Job may run; removed when it ends. Deleting a Running
#: operation stops its Job first.
FINALIZER = "ichor.dev/stop-job"

Accepted = OperationConditionType.ACCEPTED
Complete = OperationConditionType.COMPLETE
Ready = OperationConditionType.READY
Reconciling = OperationConditionType.RECONCILING
Stalled = OperationConditionType.STALLED
T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN


COMPONENTS: Mapping[OperationType, Component] = {
    OperationType.TALOS: Component.TALOS,
    OperationType.KUBERNETES: Component.KUBERNETES,
    OperationType.CNI: Component.CNI,
}
_NAMES: Mapping[OperationType, str] = {
    OperationType.TALOS: "Talos",
    OperationType.KUBERNETES: "Kubernetes",
    OperationType.CNI: "Cilium",
}
#: The TalosCluster spec field each type moves on success (cni moves none).
SPEC_FIELDS: Mapping[OperationType, str] = {
    OperationType.TALOS: "talosVersion",
    OperationType.KUBERNETES: "kubernetesVersion",
}


@dataclass(frozen=True)
class Operation:
    """A TalosOperation as read: what the lifecycle needs of it, and its raw status."""

    namespace: str
    name: str
    uid: str
    created: str
    generation: int | None
    resource_version: str
    deleting: bool
    finalizers: tuple[str, ...]
    spec: TalosOperationSpec
    status: TalosOperationStatus
    raw_status: Mapping[str, Any]
    body: Mapping[str, Any]
    #: The user the webhook admitted ``override: true`` for (``ichor.dev/override-by``).
    override_by: str | None = None

    @property
    def override_admitted(self) -> bool:
        """``override: true`` and the webhook's stamp that its creator held the verb."""
        return self.spec.override and self.override_by is not None

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Operation:
        """Raises ``ValueError`` for a spec the model cannot read."""
        meta: Mapping[str, Any] = body.get("metadata") or {}
        try:
            spec = TalosOperationSpec.model_validate(body.get("spec") or {})
        except ValidationError as error:
            raise ValueError(str(error)) from error
        raw_status: Mapping[str, Any] = body.get("status") or {}
        status = read_whole(TalosOperationStatus, raw_status) or TalosOperationStatus()
        return cls(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            created=str(meta.get("creationTimestamp", "")),
            generation=bodies.generation(body),
            resource_version=str(meta.get("resourceVersion", "")),
            deleting=bool(meta.get("deletionTimestamp")),
            finalizers=tuple(meta.get("finalizers") or ()),
            spec=spec,
            status=status,
            raw_status=raw_status,
            body=body,
            override_by=_override_by(meta),
        )

    @property
    def phase(self) -> Phase | None:
        return self.status.phase

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.SUCCEEDED, Phase.FAILED)

    @property
    def what(self) -> str:
        """``talos to v1.14.4``, ``cni to chart 1.20.4``: for messages."""
        if self.spec.type is OperationType.CNI:
            return f"cni to chart {PINNED.cilium_chart}"
        return f"{self.spec.type.value} to {self.spec.version}"

    def __str__(self) -> str:
        return f"TalosOperation {self.namespace}/{self.name}"


def _override_by(meta: Mapping[str, Any]) -> str | None:
    found = (meta.get("annotations") or {}).get(records.OVERRIDE_BY)
    return found if isinstance(found, str) and found else None


def run_order(operations: Iterable[Operation]) -> list[Operation]:
    """The operations that still have to run (or are running), oldest first.

    Creation time then name, so the order is the same on every read and after a restart.
    """
    live = [op for op in operations if not op.finished and not op.deleting]
    return sorted(live, key=lambda op: (op.created, op.name))


def waiting_message(op: Operation, *, ahead: Operation, head: bool = True) -> str:
    """What ``op`` waits for: the operation directly ahead of it (``head``: the one that
    runs or runs next). Naming that one, not the head, keeps the message of every other
    waiting operation unchanged when the head finishes: a change of the head rewrites
    the status of the one behind the new head only, not of the whole queue."""
    if ahead.phase is Phase.RUNNING:
        state = "Running"
    elif head:
        state = "created earlier, not yet started"
    else:
        state = "created earlier, waiting too"
    return (
        f"waits for {ahead} ({ahead.what}, {state}): one operation runs per TalosCluster "
        f"{op.namespace}/{op.spec.cluster_ref.name} at a time, oldest first"
    )


def waiting_behind(
    order: Sequence[Operation], *, head: Operation, ended: Iterable[str] = ()
) -> list[tuple[Operation, Operation]]:
    """Each operation of ``order`` that waits, with the one directly ahead of it: the
    head first, then the others oldest first (``ended``: uids that finished meanwhile)."""
    gone = set(ended)
    waiting = [
        op
        for op in order
        if op.uid != head.uid and op.uid not in gone and op.phase is not Phase.RUNNING
    ]
    # each with the one before it: the head for the first
    return list(zip(waiting, [head, *waiting], strict=False))


def past_queue(order: Sequence[Operation], *, most: int) -> list[Operation]:
    """The operations of ``order`` the executor refuses as past the most one cluster
    queues: of those it has not looked at yet (no phase), oldest first, the ones beyond
    the room the others leave under ``most``. Only creates that raced past the webhook's
    count are there. An operation already waiting or running keeps its place, even if
    the most was lowered since; one created in the same second that sorts before it
    does not push it out."""
    room = most - sum(1 for op in order if op.phase is not None)
    fresh = [op for op in order if op.phase is None]
    return fresh[max(room, 0) :]


@dataclass(frozen=True)
class ClusterState:
    """A TalosCluster as the executor judges it: its spec and what was last observed, with
    the site's policy (the IchorInstallation's ``spec.policy``, read at execution)."""

    name: str
    spec: TalosClusterSpec
    status: TalosClusterStatus
    policy: SitePolicy = NO_POLICY

    @classmethod
    def from_body(cls, body: Mapping[str, Any], *, policy: SitePolicy = NO_POLICY) -> ClusterState:
        """Raises ``ValueError`` for a spec the model cannot read."""
        try:
            spec = TalosClusterSpec.model_validate(body.get("spec") or {})
        except ValidationError as error:
            raise ValueError(str(error)) from error
        status = read_whole(TalosClusterStatus, body.get("status") or {}) or TalosClusterStatus()
        return cls(
            name=str((body.get("metadata") or {}).get("name", "")),
            spec=spec,
            status=status,
            policy=policy,
        )

    @property
    def versions(self) -> ClusterVersions:
        return taloscluster.cluster_versions(
            spec=self.spec, cni=self.status.cni, policy=self.policy
        )

    @property
    def declarative(self) -> bool:
        """The spec is the desired state: the executor never writes it."""
        return self.spec.upgrade_strategy is UpgradeStrategy.DECLARATIVE


def cni_version_refusal(op: Operation) -> Refusal:
    """The refusal of a cni operation that names a version or an image patch (Cilium
    moves only to the embedded chart); the webhook words its plan refusal the same way."""
    named = op.spec.cni.image_version if op.spec.cni and op.spec.cni.image_version else None
    return upgrade_target.cni_version_refusal(operation=str(op), named=named or op.spec.version)


def _observed(value: str | None, *, spec: str) -> str | None:
    """An observed version worth checking on its own: readable and not the spec's."""
    if value is None or value == spec:
        return None
    try:
        parse(value)
    except VersionError:
        return None
    return value


def _running(cluster: ClusterState) -> ClusterVersions | Unreadable | None:
    """What the Nodes were last seen running, when that differs from the spec;
    ``Unreadable`` while a Node's versions cannot be read (what runs is unknown)."""
    status, spec = cluster.status, cluster.spec
    if status.nodes is not None and status.nodes.unreadable:
        return observed.nodes(status.nodes.unreadable)
    talos = _observed(status.talos_version, spec=spec.talos_version)
    kubernetes = _observed(status.kubernetes_version, spec=spec.kubernetes_version)
    if talos is None and kubernetes is None:
        return None
    return replace(
        cluster.versions,
        talos=talos or spec.talos_version,
        kubernetes=kubernetes or spec.kubernetes_version,
    )


def check_execution(op: Operation, cluster: ClusterState) -> Refusal | None:
    """The refusal of ``judge_execution`` that matters: one no override passes, if any."""
    return judge_execution(op, cluster).refusal


def judge_execution(op: Operation, cluster: ClusterState) -> Verdict:
    """The target rule at execution; clean when the operation may run.

    The same target rule as the plan (``judge_target``), against the spec and, always,
    against what the nodes were last seen running when that differs from the spec: the
    path or skew from the version that really runs, the pair with the running other
    component, and for a ``cni`` operation the chart with the Kubernetes that runs. An
    overridable refusal of the spec does not end the judging, so a rule of the running
    versions that no override passes is never skipped.
    """
    spec = op.spec
    if spec.type is OperationType.CNI:
        if spec.version or (spec.cni is not None and spec.cni.image_version):
            return judge((cni_version_refusal(op),))
        target = ""  # the embedded chart: the rule knows it
    elif not spec.version:
        return judge(
            (refuse(Rule.FORM, f"{op} names no version: a {spec.type} operation needs one."),)
        )
    else:
        target = spec.version
    component = COMPONENTS[spec.type]
    running = _running(cluster)
    if isinstance(running, Unreadable):
        # Every step reads what the Nodes run (the path from it, the pair with it).
        return judge((running.refusal(f"{op} ({op.what})"),))

    def answers() -> Iterator[Verdict]:
        if cluster.declarative and running is not None:
            # The spec is the desired state, already the target: the rule judges the
            # step from what the Nodes run, as the webhook's plan did.
            yield judge_target(component=component, target=target, cluster=running)
            return
        yield judge_target(component=component, target=target, cluster=cluster.versions)
        if running is not None:
            yield judge_target(component=component, target=target, cluster=running)

    return judge(answers())


@dataclass(frozen=True)
class Decision:
    """Whether the operation runs; ``passed`` is the refusal an override passed."""

    refusal: Refusal | None = None
    passed: Refusal | None = None
    #: Every refusal the override passed (``passed`` is the first).
    overridden: tuple[Refusal, ...] = ()

    @property
    def runs(self) -> bool:
        return self.refusal is None

    @property
    def passing(self) -> str:
        """``passing <rule>: <message>`` for each refusal the override passed."""
        return "; ".join(f"passing {r.rule}: {r.message}" for r in self.overridden)


def decide(found: Refusal | Verdict | None, *, override: bool) -> Decision:
    """A refusal stands unless every refusal met is overridable and ``override`` is set."""
    verdict = judge((found,))
    if verdict.clean:
        return Decision()
    if verdict.blocking is None and override:
        return Decision(passed=verdict.overridable[0], overridden=verdict.overridable)
    return Decision(refusal=verdict.refusal)


def decide_execution(op: Operation, cluster: ClusterState) -> Decision:
    """Whether ``op`` runs now: the whole verdict at execution (``judge_execution``),
    passed only under an admitted override. Every refusal the override passes is in
    ``overridden``, so the Accepted condition and the Override Event name each one."""
    return decide(judge_execution(op, cluster), override=op.override_admitted)


def refusal_message(refusal: Refusal, *, override: bool, flag: bool = False) -> str:
    """The refusal, and the override's part in it, for the operation's status.

    ``override``: the override was admitted (flag and stamp); ``flag``: only
    ``override: true`` is set, without the webhook's stamp that its creator held the verb
    (created before this Ichor recorded it, or with the webhook not in place).
    """
    if not refusal.overridable:
        return f"Refused at execution ({refusal.rule}): {refusal.message}"
    if override:  # pragma: no cover - decide() passes these
        return refusal.message
    if flag:
        return (
            f"Refused at execution ({refusal.rule}): {refusal.message} `override: true` is "
            f"set, but the operation carries no record that the webhook admitted it for a "
            f"holder of the override verb ({records.OVERRIDE_BY}), so it passes nothing; "
            f"create a new operation with override: true."
        )
    return (
        f"Refused at execution ({refusal.rule}): {refusal.message} A new operation with "
        f"override: true, created by a holder of the override verb, would pass it."
    )


class JobState(StrEnum):
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class JobOutcome:
    state: JobState
    #: For a failure: the Job's reason (BackoffLimitExceeded, DeadlineExceeded, ...).
    reason: str = ""
    message: str = ""


def _true(job: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_ and condition.get("status") == "True":
            return condition  # type: ignore[no-any-return]
    return None


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status: Mapping[str, Any] = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]


#: Characters of a failed container's last log lines quoted in the operation's status
#: at most (the end is kept: the error comes last). talosctl and helm ran in the tenant's
#: own Pod, with its own credentials, against its own cluster; what they print is still
#: another program's text, so it is cut to printable characters and this length.
MAX_LOG_DETAIL = 600


def _log_detail(text: str) -> str:
    lines = text.splitlines()[-5:]
    detail = " | ".join(line.strip() for line in lines if line.strip())
    detail = "".join(c for c in detail if c.isprintable())
    if len(detail) > MAX_LOG_DETAIL:
        detail = "..." + detail[-MAX_LOG_DETAIL:]
    return detail


def _failed_container(pods: Sequence[Mapping[str, Any]]) -> str | None:
    for pod in pods:
        for container in _containers(pod):
            terminated = (container.get("state") or {}).get("terminated") or (
                container.get("lastState") or {}
            ).get("terminated")
            if not terminated or terminated.get("exitCode", 0) == 0:
                continue
            detail = _log_detail(str(terminated.get("message") or "").strip())
            head = (
                f"container {container.get('name')} exited {terminated.get('exitCode')}"
                f" ({terminated.get('reason') or 'Error'})"
            )
            return f"{head}: {detail}" if detail else head
    return None


#: Waiting reasons of a container that will not start by itself soon: the kubelet retries
#: them (a missing tag may be pushed later), so the Job stays Running until its deadline,
#: and the operation says why meanwhile.
STUCK_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)


def _stuck(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """What keeps a Job's pod from running: it cannot be scheduled, or a container of it
    cannot start."""
    for pod in pods:
        said = _unschedulable(pod) or _cannot_start(pod)
        if said is not None:
            return said
    return None


def _unschedulable(pod: Mapping[str, Any]) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if (
            isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            said = " ".join(str(condition.get("message") or "").split())[:300]
            head = "its Pod cannot be scheduled"
            return f"{head}: {said}" if said else head
    return None


def _cannot_start(pod: Mapping[str, Any]) -> str | None:
    for container in _containers(pod):
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in STUCK_REASONS:
            head = f"container {container.get('name')} cannot start ({reason})"
            detail = " ".join(str(waiting.get("message") or "").split())
            return f"{head}: {detail}" if detail else head
    return None


def _progress(pods: Sequence[Mapping[str, Any]]) -> str | None:
    for pod in pods:
        inits = (pod.get("status") or {}).get("initContainerStatuses") or ()
        total = len(inits)
        for index, container in enumerate(inits):
            if "running" in (container.get("state") or {}):
                return f"step {index + 1} of {total} ({container.get('name')}) runs"
    return None


#: Terminated reasons of a container that never ran: the runtime could not start it (its
#: ``startedAt`` is then the epoch, or absent).
NEVER_RAN = frozenset({"StartError", "ContainerCannotRun"})


def _moment(raw: object) -> datetime | None:
    if isinstance(raw, datetime):
        return raw
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def step_started(pods: Sequence[Mapping[str, Any]]) -> datetime | None:
    """When the first upgrade step of a Job's pod started, or None while none has.

    Every container of an operation's Job is an upgrade step against the nodes (the
    Talos Job's per-node ``talosctl upgrade``, ``upgrade-k8s``, ``helm upgrade``; none
    prepares anything), so the first container seen running, or terminated after it
    ran, is the upgrade acting on the nodes. A container waiting (an image that cannot
    be pulled, a Secret that cannot be mounted) or one the runtime could not start
    (``StartError``, its ``startedAt`` the epoch) never ran.
    """
    found: list[datetime] = []
    for pod in pods:
        for container in _containers(pod):
            state = container.get("state") or {}
            running = state.get("running")
            terminated = state.get("terminated")
            if isinstance(running, Mapping):
                moment = _moment(running.get("startedAt"))
            elif isinstance(terminated, Mapping) and terminated.get("reason") not in NEVER_RAN:
                moment = _moment(terminated.get("startedAt"))
            else:
                continue
            if moment is not None and moment.year > 1970:
                found.append(moment)
    return min(found) if found else None


def failure_kind(reason: str, *, started: bool) -> Failure:
    """The kind of failure of an operation that failed for ``reason`` (an
    ``OperationReason``) after its upgrade step ``started`` on the nodes, or not.

    Only an upgrade that ran and failed says something about the version: the Job
    failing after its step started, or the Nodes not reporting the target after the Job
    succeeded (its step ran, by definition). A Job that failed before its step started
    (an image pull, a deadline) never reached the nodes; a deleted Job, a cluster gone
    or a spec that could not be moved interrupted it.
    """
    if reason == OperationReason.NODES_NOT_UPGRADED:
        return Failure.UPGRADE_FAILED
    if reason == OperationReason.DRAIN_TIMED_OUT:
        # a PodDisruptionBudget held it: says nothing about the version
        return Failure.INTERRUPTED
    if reason == OperationReason.CHECK_FAILED:
        # a check before any node was upgraded says nothing about the version
        return Failure.UPGRADE_FAILED if started else Failure.NOT_STARTED
    if reason == OperationReason.JOB_FAILED:
        return Failure.UPGRADE_FAILED if started else Failure.NOT_STARTED
    if reason == OperationReason.SPEC_NOT_UPDATED:
        return Failure.INTERRUPTED
    return Failure.INTERRUPTED if started else Failure.NOT_STARTED


def job_outcome(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] = ()) -> JobOutcome:
    """The Job's state from its conditions; a failure says why, with the failed
    container's exit code and last log lines when its pod is still there."""
    if _true(job, "Complete") is not None:
        return JobOutcome(JobState.SUCCEEDED, reason="Complete", message="the Job completed")
    failed = _true(job, "Failed")
    if failed is not None:
        reason = str(failed.get("reason") or "Failed")
        parts = [f"the Job failed ({reason})"]
        if failed.get("message"):
            parts.append(str(failed["message"]).rstrip("."))
        container = _failed_container(pods)
        if container:
            parts.append(container)
        return JobOutcome(JobState.FAILED, reason=reason, message="; ".join(parts))
    progress = _stuck(pods) or _progress(pods)
    return JobOutcome(JobState.RUNNING, message=progress or "")


# --- after the Job: the Nodes report the target ----------------------------------------

#: Nodes named one by one in a message about Nodes behind; the rest are counted.
MAX_NODES_NAMED = 5


def job_finished_at(job: Mapping[str, Any]) -> datetime | None:
    """When the Job completed: ``status.completionTime``, else its ``Complete``
    condition's transition time; None when neither can be read."""
    status: Mapping[str, Any] = job.get("status") or {}
    complete = _true(job, "Complete") or {}
    for value in (status.get("completionTime"), complete.get("lastTransitionTime")):
        if isinstance(value, datetime):
            return value
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
    return None


def nodes_behind(
    op: Operation,
    reported: Mapping[str, Version | None],
    *,
    upgraded: Sequence[str] = (),
) -> tuple[str, ...]:
    """One sentence per Node that does not report the operation's target yet.

    ``reported``: each Node's name and the version it reports of what the operation
    upgrades (Talos from ``osImage`` for ``talos``, ``kubeletVersion`` for
    ``kubernetes``; None when it cannot be read). ``upgraded``: the Nodes the Job
    upgraded (``talos``: the Job's nodes); empty means every Node reported. A ``cni``
    operation, or a target that is not a version, has no Node to wait for.
    """
    component = {OperationType.TALOS: "Talos", OperationType.KUBERNETES: "kubelet"}.get(
        op.spec.type
    )
    if component is None or not op.spec.version:
        return ()
    try:
        target = parse(op.spec.version)
    except VersionError:
        return ()
    names = list(upgraded) or sorted(reported)
    behind: list[str] = []
    for name in names:
        if name not in reported:
            behind.append(f"Node {name} is no longer in the workload cluster")
            continue
        version = reported[name]
        if version is None:
            behind.append(f"Node {name} reports no readable {component} version")
        elif version != target:
            behind.append(f"Node {name} reports {component} {version.tag}")
    if len(behind) > MAX_NODES_NAMED:
        rest = len(behind) - MAX_NODES_NAMED
        behind[MAX_NODES_NAMED:] = [f"and {rest:,} more Nodes"]
    return tuple(behind)


@dataclass(frozen=True)
class NodesVerdict:
    """After a successful Job: ``done`` (every Node moved), else ``failed`` (the deadline
    passed) or still waiting; ``message`` says which Nodes and until when."""

    done: bool
    failed: bool = False
    message: str = ""


def follow_nodes(
    op: Operation,
    behind: Sequence[str],
    *,
    job_name: str,
    finished_at: datetime | None,
    now: datetime,
    deadline: float,
) -> NodesVerdict:
    """Whether the operation may succeed now that its Job did.

    ``talosctl upgrade --wait`` returns once a node booted again and its machine is up;
    a node that booted its previous version back (Talos does when the new one does not
    come up) passes that wait too. Only the Node's own report tells, so the operation
    succeeds once every Node reports the target, and fails when one still does not
    ``deadline`` seconds after the Job completed (counted from the operation's start
    when the Job's completion time cannot be read).
    """
    if not behind:
        return NodesVerdict(done=True)
    start = finished_at or op.status.started_at or now
    until = start + timedelta(seconds=deadline)
    what = "; ".join(behind)
    if now >= until:
        message = (
            f"{op.what}: Job {job_name} succeeded, but {deadline:.0f} s later {what}: the "
            f"node may have booted its previous version back (Talos does when the new one "
            f"does not come up) or its kubelet did not restart; look at the node "
            f"(talosctl dmesg, talosctl version) and create a new operation; the "
            f"TalosCluster spec is unchanged"
        )
        return NodesVerdict(done=False, failed=True, message=message)
    message = (
        f"Job {job_name} succeeded; waiting until every Node reports "
        f"{op.spec.version}: {what} (gives up at {until.isoformat()})"
    )
    return NodesVerdict(done=False, message=message)


# --- the status of each step ------------------------------------------------------------


def _condition(
    type_: str, status: ConditionStatus, reason: str, message: str, generation: int | None
) -> Condition:
    return Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
        last_transition_time=datetime.min,  # merge sets the real one
    )


def _status(
    op: Operation,
    *,
    now: datetime,
    updates: Sequence[Condition],
    **fields: Any,
) -> TalosOperationStatus:
    merged = conditions.merge(op.status.conditions, updates, now=now)
    phase = fields.get("phase", op.status.phase)
    if isinstance(phase, Phase):
        ready, reconciling, stalled = summary(phase, merged, generation=op.generation)
        merged = conditions.merge(merged, [ready], now=now)
        merged = conditions.while_true(merged, Reconciling, reconciling, now=now)
        merged = conditions.while_true(merged, Stalled, stalled, now=now)
    return op.status.model_copy(
        update={"observed_generation": op.generation, "conditions": merged, **fields}
    )


def _complete(
    op: Operation,
    status: ConditionStatus,
    reason: str,
    *,
    message: str,
    now: datetime,
    **fields: Any,
) -> TalosOperationStatus:
    """The status whose only new condition is Complete ``status`` for ``reason``."""
    return _status(
        op,
        now=now,
        updates=[_condition(Complete, status, reason, message, op.generation)],
        message=message,
        **fields,
    )


def summary(
    phase: Phase, merged: Sequence[Condition], *, generation: int | None
) -> tuple[Condition, Condition | None, Condition | None]:
    """``Ready``, ``Reconciling`` and ``Stalled`` (None: absent) of an operation in
    ``phase``, worded from the executor's own conditions.

    Pending and Running: Reconciling, Ready Unknown (Accepted's or Complete's reason).
    Succeeded: Ready True. Failed: Stalled and Ready False with Complete's reason, or
    the rule's when the executor refused it (an operation never runs again: a person
    creates a new one).
    """
    source = conditions.find(merged, Complete if phase is not Phase.PENDING else Accepted)
    accepted = conditions.find(merged, Accepted)
    if phase is Phase.FAILED and accepted is not None and accepted.status == F:
        source = accepted  # refused at execution: the rule's name is the reason
    reason = source.reason if source is not None else phase.value
    message = source.message if source is not None else phase.value
    if phase is Phase.SUCCEEDED:
        return _condition(Ready, T, OperationReason.SUCCEEDED, message, generation), None, None
    if phase is Phase.FAILED:
        return (
            _condition(Ready, F, reason, message, generation),
            None,
            _condition(Stalled, T, reason, message, generation),
        )
    return (
        _condition(Ready, U, reason, message, generation),
        _condition(Reconciling, T, reason, message, generation),
        None,
    )


def pending(op: Operation, *, reason: str, message: str, now: datetime) -> TalosOperationStatus:
    return _status(
        op,
        now=now,
        updates=[_condition(Accepted, U, reason, message, op.generation)],
        phase=Phase.PENDING,
        message=message,
    )


def running(
    op: Operation,
    *,
    job_name: str,
    decision: Decision,
    job_created: bool,
    message: str,
    now: datetime,
    nodes: OperationNodes | None = None,
    reason: str | None = None,
) -> TalosOperationStatus:
    """Running; ``nodes``: a Talos operation's nodes and images, recorded at the claim
    (a restart builds the Job from them, never from a new read); ``reason``: Complete's
    (default JobCreating or JobRunning)."""
    updates = []
    if op.phase is not Phase.RUNNING:
        if decision.passed is not None:
            accepted = _condition(
                Accepted,
                T,
                OperationReason.OVERRIDDEN,
                f"runs under override: true, {decision.passing}",
                op.generation,
            )
        else:
            accepted = _condition(
                Accepted,
                T,
                OperationReason.ACCEPTED,
                f"the target rule accepts {op.what} at execution",
                op.generation,
            )
        updates.append(accepted)
    reason = reason or (
        OperationReason.JOB_RUNNING if job_created else OperationReason.JOB_CREATING
    )
    updates.append(_condition(Complete, F, reason, message, op.generation))
    return _status(
        op,
        now=now,
        updates=updates,
        phase=Phase.RUNNING,
        job_name=job_name,
        started_at=op.status.started_at or now,
        message=message,
        nodes=nodes or op.status.nodes,
    )


def spec_updating(op: Operation, *, message: str, now: datetime) -> TalosOperationStatus:
    """The Job succeeded; the cluster's spec moves next (still Running until it has).

    Written before the spec write: the webhook lets the operator's spec write carry the
    override this operation was admitted under only once the operator recorded its Job
    as succeeded, and the executor resumes from here after a restart even when the Job
    is gone by then.
    """
    return _complete(
        op, F, OperationReason.SPEC_UPDATING, message=message, now=now, phase=Phase.RUNNING
    )


def job_succeeded(op: Operation) -> bool:
    """Whether the executor already recorded this operation's Job as succeeded."""
    complete = next((c for c in op.status.conditions if c.type == Complete), None)
    return (
        op.phase is Phase.RUNNING
        and complete is not None
        and complete.reason == OperationReason.SPEC_UPDATING
    )


def succeeded(op: Operation, *, message: str, now: datetime) -> TalosOperationStatus:
    return _complete(
        op,
        T,
        OperationReason.JOB_SUCCEEDED,
        message=message,
        now=now,
        phase=Phase.SUCCEEDED,
        finished_at=now,
    )


def failed(
    op: Operation,
    *,
    reason: str,
    message: str,
    now: datetime,
    refused: bool = False,
    kind: Failure | None = None,
) -> TalosOperationStatus:
    """Failed; ``refused``: the executor refused to start it (Accepted False, by rule),
    before anything ran (``Failure.REFUSED``). ``kind``: which failure it was (default:
    read from ``reason`` and whether the upgrade step was seen started,
    ``failure_kind``)."""
    updates = []
    if refused:
        updates.append(_condition(Accepted, F, reason, message, op.generation))
        updates.append(_condition(Complete, T, OperationReason.REFUSED, message, op.generation))
    else:
        updates.append(_condition(Complete, T, reason, message, op.generation))
    if kind is None:
        kind = (
            Failure.REFUSED
            if refused and op.status.upgrade_started_at is None
            else failure_kind(reason, started=op.status.upgrade_started_at is not None)
        )
    return _status(
        op,
        now=now,
        updates=updates,
        phase=Phase.FAILED,
        finished_at=now,
        message=message,
        failure=kind,
    )


def step_seen(op: Operation, started: datetime) -> TalosOperationStatus:
    """The operation's status once its upgrade step was seen started at ``started``."""
    return op.status.model_copy(update={"upgrade_started_at": started})


def success_message(op: Operation, *, spec_note: str) -> str:
    name = _NAMES[op.spec.type]
    if op.spec.type is OperationType.CNI:
        return f"Cilium chart {PINNED.cilium_chart} is installed{spec_note}"
    return f"{name} {op.spec.version} is installed{spec_note}"


def declarative(cluster: Mapping[str, Any]) -> bool:
    """Whether a stored TalosCluster's spec is its desired state (``upgradeStrategy:
    Declarative``): then no executor writes it. Anything but that exact value is the
    default, ``Operations``."""
    spec = cluster.get("spec")
    return isinstance(spec, Mapping) and spec.get("upgradeStrategy") == (
        UpgradeStrategy.DECLARATIVE.value
    )


def spec_record(
    cluster: Mapping[str, Any], *, spec_field: str, target: str
) -> dict[str, Any] | None:
    """The spec patch the executor writes once an operation moved the Nodes to
    ``target``, or None when the spec stays as it is: a ``Declarative`` cluster's spec is
    the desired state and is never written, not even by an operation newer than it (a
    hand-made one, a holder's override: the cluster then shows the Nodes ahead); an
    ``Operations`` spec already at or past the target never moves back."""
    if declarative(cluster):
        return None
    spec = cluster.get("spec")
    current = str((spec if isinstance(spec, Mapping) else {}).get(spec_field, ""))
    if not needs_spec_update(current=current, target=target):
        return None
    return {"spec": {spec_field: target}}


def needs_spec_update(*, current: str, target: str) -> bool:
    """Whether the spec must move to ``target``: only forward, never back."""
    try:
        return parse(current) < parse(target)
    except VersionError:
        return current != target


# --- the Events each step owes ----------------------------------------------------------


def _started(status: TalosOperationStatus) -> bool:
    """Running and past creating its Job: the work was handed to the cluster."""
    complete = conditions.find(status.conditions, Complete)
    return (
        status.phase is Phase.RUNNING
        and complete is not None
        and complete.reason != OperationReason.JOB_CREATING
    )


def owed_events(
    op: Operation, status: TalosOperationStatus, *, now: datetime
) -> dict[str, owed.OwedEvent]:
    """The Events the step from ``op.status`` to ``status`` owes, by key: written with the
    status, posted after it (``ichor.api.owed``). Each key is the operation's uid and the
    reason (and for ``Waiting`` its message), so one step posted twice is one Event.

    Override when ``Accepted`` turns ``Overridden`` (the claim, before the Job exists);
    Started and the cluster's UpgradeStarted when the work first runs; Succeeded, Failed
    or Refused (and the cluster's UpgradeSucceeded, UpgradeFailed) when it ends; Waiting
    when the operation it waits for changes.
    """
    before = op.status
    found: dict[str, owed.OwedEvent] = {}

    def add(
        type_: Literal["Normal", "Warning"],
        reason: str,
        message: str,
        *,
        cluster: bool = False,
        part: str = "",
    ) -> None:
        about: owed.About | None = owed.CLUSTER if cluster else None
        found[owed.key(op.uid, reason, part)] = owed.owe(
            type_, reason, message, at=now, about=about
        )

    message = status.message or ""
    accepted = conditions.find(status.conditions, Accepted)
    was = conditions.find(before.conditions, Accepted)
    if accepted is not None and _newly(accepted, was, OperationReason.OVERRIDDEN):
        add("Warning", OperationEventReason.OVERRIDE, f"{op} {accepted.message}")
    if _started(status) and not _started(before):
        add("Normal", OperationEventReason.STARTED, message)
        add("Normal", OperationEventReason.UPGRADE_STARTED, f"{op} started: {message}",
            cluster=True)  # fmt: skip
    if status.phase is Phase.SUCCEEDED and before.phase is not Phase.SUCCEEDED:
        add("Normal", OperationEventReason.SUCCEEDED, message)
        add("Normal", OperationEventReason.UPGRADE_SUCCEEDED, f"{op} succeeded: {message}",
            cluster=True)  # fmt: skip
    if status.phase is Phase.FAILED and before.phase is not Phase.FAILED:
        if accepted is not None and accepted.status == F:
            add("Warning", OperationEventReason.REFUSED, message)
        else:
            add("Warning", OperationEventReason.FAILED, message)
            add("Warning", OperationEventReason.UPGRADE_FAILED, f"{op} failed: {message}",
                cluster=True)  # fmt: skip
    if _waits_anew(status, before, accepted):
        add("Normal", OperationEventReason.WAITING, message, part=message)
    return found


def _newly(accepted: Condition, was: Condition | None, reason: OperationReason) -> bool:
    """``Accepted`` has ``reason`` now and did not before."""
    return accepted.reason == reason and (was is None or was.reason != reason)


def _waits_anew(
    status: TalosOperationStatus, before: TalosOperationStatus, accepted: Condition | None
) -> bool:
    """Pending behind another operation, and the one it waits for changed (its message)."""
    return (
        status.phase is Phase.PENDING
        and accepted is not None
        and accepted.reason == OperationReason.WAITING
        and (status.message or "") != (before.message or "")
    )


def stopped(op: Operation, *, message: str, now: datetime) -> TalosOperationStatus:
    """The status of an operation deleted while Running, once its Job is stopped: it owes
    the cluster's Stopped Event (its finalizer goes once that is posted)."""
    event = owed.owe("Warning", OperationEventReason.STOPPED, message, at=now, about=owed.CLUSTER)
    entries = owed.merged(
        op.status.pending_events, {owed.key(op.uid, OperationEventReason.STOPPED): event}
    )
    return op.status.model_copy(update={"message": message, "pending_events": entries})
