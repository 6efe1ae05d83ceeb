"""A Talos operation node by node, as pure decisions: which nodes go next, the status of
each step, and what a failure between nodes says.

The executor (``executor._drive_nodes``) runs one Job per node, as tuppr does, and checks
the cluster between nodes: before a control plane node, etcd healthy with every member;
after each node, the Node Ready on the target, its etcd member back, and the cluster's
own health checks passing. Every step is written to ``status.nodes`` before the next
side effect (``done``, ``started``, ``current``, ``stage``, ``attempt``), so an operator
restarted at any point resumes at the right node and never creates a node's Job twice.
Pure: it reads the status and what was found, and returns the status to write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ichor.api.conditions import OperationReason
from ichor.api.taloscluster import UpgradePolicy
from ichor.api.talosoperation import (
    ImageNodes,
    NodePolicy,
    NodeStage,
    OperationNodes,
    PlannedNode,
    TalosOperationStatus,
)
from ichor.controller import observe
from ichor.controller.talosoperation import jobs, lifecycle
from ichor.controller.talosoperation.lifecycle import Operation
from ichor.upgrade.node_images import ImagePlan
from ichor.upgrade.node_images import single_node_statement as single_node_statement

#: Passed checks kept in the status, the latest last.
MAX_CHECKS = 20


def policy_for(effective: UpgradePolicy, *, nodes: int) -> NodePolicy:
    """The policy an operation runs under: a single-node cluster is never drained (no
    other node could take its Pods, and a PodDisruptionBudget would hold the drain until
    its timeout, with the image staged and the node cordoned)."""
    single = nodes == 1
    return NodePolicy(
        drain=bool(effective.drain) and not single,
        drain_timeout=effective.drain_timeout or "5m",
        reboot_mode=(effective.reboot_mode or "default").__str__(),
        max_unavailable_workers=effective.max_unavailable_workers or 1,
        single_node=single,
    )


def next_batch(nodes: OperationNodes) -> tuple[PlannedNode, ...]:
    """The next nodes to upgrade: the first control plane node not done, alone; else up
    to ``maxUnavailableWorkers`` workers not done, in order."""
    done = set(nodes.done or ())
    remaining = [n for n in nodes.order if n.name not in done]
    if not remaining:
        return ()
    if remaining[0].control_plane:
        return (remaining[0],)
    most = (nodes.policy or NodePolicy()).max_unavailable_workers
    return tuple(n for n in remaining if not n.control_plane)[: max(most, 1)]


def planned(nodes: OperationNodes, names: Iterable[str]) -> tuple[PlannedNode, ...]:
    wanted = set(names)
    return tuple(n for n in nodes.order if n.name in wanted)


def control_plane(nodes: OperationNodes) -> dict[str, str]:
    """Each control plane node's address -> name."""
    return {n.address: n.name for n in nodes.order if n.control_plane}


def named(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def _checks(nodes: OperationNodes, more: Sequence[str]) -> tuple[str, ...] | None:
    found = list(dict.fromkeys([*(nodes.checks or ()), *more]))[-MAX_CHECKS:]
    return tuple(found) or None


def progress(nodes: OperationNodes) -> str:
    """Where the operation stands, node by node: for its message."""
    done = list(nodes.done or ())
    total = len(nodes.order)
    current = list(nodes.current or ())
    said = f"{len(done)} of {total} node(s) done"
    if done:
        said += f" ({named(done)})"
    if current and nodes.stage is not None:
        said += f"; {named(current)}: {nodes.stage.value.lower()}"
    after = [n.name for n in nodes.order if n.name not in set(done) | set(current)]
    if after:
        said += f"; next: {after[0]}"
    return said


def stage(
    op: Operation,
    nodes: OperationNodes,
    *,
    now: datetime,
    message: str,
    reason: str = OperationReason.NODES_UPGRADING,
    passed: Sequence[str] = (),
    job_name: str | None = None,
    **fields: Any,
) -> TalosOperationStatus:
    """The Running status after one step: ``fields`` of ``status.nodes`` changed, the
    checks ``passed`` appended, ``message`` with where it stands; ``job_name``: the Job
    just created (``status.jobName`` names the latest node's)."""
    changed = nodes.model_copy(update={**fields, "checks": _checks(nodes, passed)})
    status = lifecycle.running(
        op,
        job_name=job_name or op.status.job_name or "",
        decision=lifecycle.Decision(),
        job_created=True,
        message=f"{message}; {progress(changed)}",
        now=now,
        nodes=changed,
        reason=reason,
    )
    return status


def begin(
    op: Operation, nodes: OperationNodes, batch: Sequence[PlannedNode], *, now: datetime
) -> TalosOperationStatus:
    """The next batch starts with its checks."""
    names = [n.name for n in batch]
    return stage(
        op,
        nodes,
        now=now,
        message=f"{named(names)} next: checks before",
        current=tuple(names),
        stage=NodeStage.CHECKING,
        since=now,
        attempt=(nodes.attempt or 0) + 1,
    )


def deadline_passed(nodes: OperationNodes, *, now: datetime, seconds: float) -> bool:
    since = nodes.since or now
    return now >= since + timedelta(seconds=seconds)


def planned_nodes(nodes: jobs.NodeList, plan: ImagePlan) -> OperationNodes:
    """What a claim records of the nodes read: their order, their images grouped by
    identical image, and the nodes whose extensions change."""
    by_image: dict[str, list[str]] = {}
    for node_plan in plan.nodes:
        by_image.setdefault(node_plan.image, []).append(node_plan.name)
    return OperationNodes(
        order=tuple(
            PlannedNode(
                name=n.name,
                address=n.address,
                control_plane=n.role is jobs.NodeRole.CONTROL_PLANE,
            )
            for n in nodes.nodes
        ),
        images=tuple(ImageNodes(image=i, nodes=tuple(ns)) for i, ns in by_image.items()),
        changes=plan.changes or None,
        changing=tuple(p.name for p in plan.nodes if p.changes) or None,
    )


def images_refused(plan: ImagePlan, *, what: str, read_nothing: bool, failure: str) -> str:
    """Why operation ``what`` is refused when a node's image cannot be given safely;
    a read that found no image and ended badly says how it ended."""
    detail = " ".join(f"{r}." for r in plan.refusals)
    if read_nothing and failure:
        detail += f" The read ended: {failure}."
    return (
        f"{what} is refused before any node is upgraded: each node is upgraded to the "
        f"image it runs, and {detail}"
    )


# --- the checks after a batch ---------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    """The checks after a batch, in order: the passed ones, the first that fails as
    (reason, what fails), and whether that failure asks for a new check Job."""

    passed: tuple[str, ...] = ()
    failing: tuple[str, str] | None = None
    new_attempt: bool = False

    def passes(self, check: str) -> Checked:
        return replace(self, passed=(*self.passed, check))

    def fails(self, reason: str, what: str, *, new_attempt: bool = False) -> Checked:
        return replace(self, failing=(reason, what), new_attempt=new_attempt)


def not_on_target(
    current: Sequence[PlannedNode], items: Sequence[object], *, target: str
) -> tuple[str, str] | None:
    """The first node of the batch not back on ``target`` among the Node objects
    ``items``, as (reason, what fails); None when each is Ready on it."""
    by_name = {observe.node_report(i).name: i for i in items}
    for node in current:
        item = by_name.get(node.name)
        if item is None:
            return (
                OperationReason.NODES_NOT_UPGRADED,
                f"Node {node.name} is no longer in the workload cluster",
            )
        report = observe.node_report(item)
        if report.talos is None or report.talos.tag != target:
            shown = report.talos.tag if report.talos else "no readable Talos"
            return (
                OperationReason.NODES_NOT_UPGRADED,
                f"Node {node.name} reports {shown}, not {target} (a node that does not "
                f"come up on the new Talos boots its previous version back)",
            )
        if not observe.node_ready(item):
            return OperationReason.CHECK_FAILED, f"Node {node.name} is not Ready"
    return None


# --- each node's Job in a batch ---------------------------------------------------------

#: The outcome of a node that runs the target on its own image already (an earlier
#: operation stopped after it): nothing to install; its checks still run.
ALREADY_THERE = lifecycle.JobOutcome(lifecycle.JobState.SUCCEEDED, reason="AlreadyThere")

#: Each node's Job outcome and the Job's name (empty for a node already there).
Outcomes = Mapping[str, tuple[lifecycle.JobOutcome, str]]


def failed_node(
    current: Sequence[PlannedNode], outcomes: Outcomes, *, nodes: OperationNodes, version: str
) -> tuple[str, str] | None:
    """The first node of the batch whose Job failed, as (reason, message): a drain
    that did not finish says how to finish or undo it; None when none failed."""
    policy = nodes.policy or NodePolicy()
    for node in current:
        outcome, _ = outcomes[node.name]
        if outcome.state is not lifecycle.JobState.FAILED:
            continue
        if policy.drain and drain_timed_out(outcome.message):
            message = drain_message(
                node=node,
                image=nodes.image_of()[node.name],
                timeout=policy.drain_timeout,
                failure=outcome.message,
                version=version,
            )
            return OperationReason.DRAIN_TIMED_OUT, message
        message = (
            f"the upgrade of {node.name} failed: {outcome.message}; "
            f"{progress(nodes)}; the TalosCluster spec is unchanged"
        )
        return OperationReason.JOB_FAILED, message
    return None


def still_running(outcomes: Outcomes) -> list[str]:
    """What each node's Job still running says, for the message."""
    return [
        f"{n}: {o.message or 'Job ' + j + ' runs'}"
        for n, (o, j) in outcomes.items()
        if o.state is lifecycle.JobState.RUNNING
    ]


def skipped(already: Iterable[str], outcomes: Outcomes, *, version: str) -> list[str]:
    """The checks passed of the nodes not upgraded again: they ran ``version``."""
    return [
        f"{n} already runs {version}: not upgraded again"
        for n in already
        if n in outcomes and outcomes[n][0].reason == ALREADY_THERE.reason
    ]


# --- what a failed node's Job says --------------------------------------------------------

#: talosctl's words when its drain did not finish (cmd/talosctl/pkg/talos/nodedrain:
#: ``error draining node %q: %w``; the kubectl drain library's ``global timeout reached``,
#: or the context's deadline).
_DRAIN = re.compile(r"error draining node|global timeout reached|drain.*deadline exceeded", re.I)


def drain_timed_out(message: str) -> bool:
    return bool(_DRAIN.search(message))


def drain_message(
    *, node: PlannedNode, image: str, timeout: str, failure: str, version: str
) -> str:
    """A drain that did not finish: talosctl installed the image, cordoned the node and
    did not reboot it (cmd/talosctl/cmd/talos/upgrade.go returns before its uncordon)."""
    return (
        f"the drain of {node.name} did not finish within {timeout}: {image} is staged on "
        f"it and the node is cordoned, not rebooted ({failure}). A PodDisruptionBudget "
        f"that allows no disruption holds a drain. To finish by hand: talosctl --nodes "
        f"{node.address} reboot, then kubectl uncordon {node.name}; to undo: talosctl "
        f"--nodes {node.address} rollback (it boots the Talos it ran), then kubectl "
        f"uncordon {node.name}; or allow the disruption (or raise "
        f"spec.upgradePolicy.drainTimeout) and create a new operation for Talos {version}"
    )


def failed_between(*, check: str, when: str, node: str, nodes: OperationNodes, step: str) -> str:
    """A check between nodes that failed: which, where the operation stands, the step."""
    done = list(nodes.done or ())
    reached = list(nodes.current or ()) if when == "after" else []
    rest = [n.name for n in nodes.order if n.name not in set(done) | set(reached)]
    said = f"stopped {when} {node}: {check}; done: {named(done)}; "
    if reached:
        said += f"upgraded, its checks not passed: {named(reached)}; "
    return f"{said}not upgraded: {named(rest)}. {step}"


def node_images(nodes: OperationNodes) -> Mapping[str, str]:
    return nodes.image_of()
