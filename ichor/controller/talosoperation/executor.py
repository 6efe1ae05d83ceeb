"""The TalosOperation executor: the controller that runs each operation as a Job and
follows it to the end (its kopf registration is ``wiring``).

Level-triggered and keyed by cluster: each event of an operation or of its Job asks for
its cluster to be looked at again, and one reconcile takes the next step from what the
API holds, so a restart resumes where it stopped. The oldest unfinished operation runs
(the others wait in ``Pending``): checked again, claimed, its Job created and followed
to the end; on success the TalosCluster's spec moves. Each status write carries the
resourceVersion it came from (a 409 computes the step again). It decides no rule itself
(``lifecycle`` asks ``ichor.upgrade``) and never writes a TalosCluster's status.
More in docs/design/notes.md, "ichor/controller/talosoperation/executor.py".
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds, owed
from ichor.api.conditions import OperationReason
from ichor.api.ichorinstallation import Installation
from ichor.api.reading import read_whole
from ichor.api.taloscluster import (
    DEFAULT_KUBECONFIG_KEY,
    DEFAULT_TALOSCONFIG_KEY,
    UpgradePolicy,
    effective_policy,
)
from ichor.api.talosoperation import (
    Failure,
    NodePolicy,
    NodeStage,
    OperationNodes,
    OperationType,
    Phase,
    PlannedNode,
    TalosOperationStatus,
    queue_full_message,
)
from ichor.controller import observe
from ichor.controller.keyed import ClusterKeyed, Key
from ichor.controller.talosoperation import jobs, lifecycle, nodesteps, preflight, talosread
from ichor.controller.talosoperation.lifecycle import ClusterState, Operation
from ichor.controller.talosoperation.talosread import node_image_status
from ichor.kube import (
    accounts,
    batch,
    clock,
    credentials,
    errors,
    metrics,
    objects,
    owing,
    patching,
)
from ichor.kube.accounts import ServiceAccount
from ichor.kube.bodies import merge_patch
from ichor.kube.clients import (
    REQUEST_TIMEOUT,
    KubeconfigError,
    client_from_kubeconfig,
    read_secret_key,
)
from ichor.kube.impersonation import ReadRefused, impersonating, refusal, refused_message
from ichor.release.policy import SitePolicy
from ichor.settings import OperationSettings
from ichor.upgrade import node_images
from ichor.upgrade.node_images import NodeReading

logger = logging.getLogger(__name__)


class Moved(Exception):
    """An object moved (or went) since it was read: compute the step again from a fresh
    read. Raised for the API's 409 (``errors.Conflict``) and 404 alike, and when a
    TalosCluster keeps moving under the spec write."""


class Transient(Exception):
    """Something outside may answer later (a workload cluster, a 5xx): retry later."""


#: Called before every status write with the operation as read (a test seam: a write in
#: between turns the status write into a real 409 from the API server).
BeforeWrite = Callable[[Operation], Awaitable[None]]


#: (namespace, a read Job) -> its containers' output once it ended, else None.
ReadOutput = Callable[[str, Mapping[str, Any]], Awaitable["talosread.ReadOutput | None"]]


#: (operation, its TalosCluster as read) -> each health check's (name, passed, message).
HealthGate = Callable[[Operation, Mapping[str, Any]], Awaitable[Sequence[tuple[str, bool, str]]]]


def _fleet_policy(installation: Mapping[str, Any] | None) -> UpgradePolicy | None:
    return read_whole(UpgradePolicy, ((installation or {}).get("spec") or {}).get("upgradePolicy"))


_now = clock.now


def _raw(api: ApiClient, model: Any) -> dict[str, Any]:
    return cast(dict[str, Any], api.sanitize_for_serialization(model))


class OperationController(ClusterKeyed[OperationSettings]):
    #: Called before every status write (a test seam).
    before_write: BeforeWrite | None = None
    #: The cluster's own health checks (auto-patch's CEL checks), run after each node:
    #: (name, passed, message) each; None: none configured in this process.
    health_gate: HealthGate | None = None
    #: 409s met on writes, each followed by a fresh step (for tests and logs).
    conflicts = 0

    @functools.cached_property
    def read_output(self) -> ReadOutput:
        """What a read Job printed once it ended (a seam: the component tier, where no
        kubelet runs a Pod, plays talosctl's output for the Job's nodes)."""
        return self._read_output

    def start(self) -> None:
        metrics.operation_deadlines(self.settings)
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    # --- fed by the watches -------------------------------------------------------------

    def operation_event(self, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        cluster = ((body.get("spec") or {}).get("clusterRef") or {}).get("name")
        if cluster:
            self.queue.add((str(meta.get("namespace", "")), str(cluster)))

    def job_event(self, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        cluster = (meta.get("annotations") or {}).get(jobs.CLUSTER_ANNOTATION)
        if cluster:
            self.queue.add((str(meta.get("namespace", "")), str(cluster)))

    # --- one cluster --------------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        try:
            again = await self._reconcile(key)
        except Moved as error:
            self.conflicts += 1
            logger.info("%s/%s: %s; the step runs again from a fresh read", *key, error)
            self.queue.add(key)
            return
        except (Transient, *errors.TRANSIENT) as error:
            logger.warning("%s/%s: %s; retry in %.0f s", *key, error, self.settings.retry_delay)
            self.queue.add_after(key, self.settings.retry_delay)
            return
        except ApiException as error:
            logger.warning("%s/%s: the API answered %s %s", *key, error.status, error.reason)
            self.queue.add_after(key, self.settings.retry_delay)
            return
        except Exception:
            # a bug must not leave an operation unattended until the next watch event
            logger.exception("%s/%s: the step failed unexpectedly", *key)
            self.queue.add_after(key, self.settings.resync_interval)
            return
        if again is not None:
            self.queue.add_after(key, again)

    async def _reconcile(self, key: Key) -> float | None:
        namespace, cluster_name = key
        operations = await self._operations(namespace, cluster_name)
        self._report(namespace, cluster_name, operations)
        for op in operations:
            if lifecycle.FINALIZER in op.finalizers and (op.deleting or op.finished):
                await self._release(op)
        order = await self._refuse_past(lifecycle.run_order(operations), cluster_name)
        ended: set[str] = set()
        head = await self._drive_running(order, ended)
        again = self.settings.resync_interval if head is not None else None
        if head is None:
            head, again = await self._start_next(order, ended)
        if head is not None:
            await self._queue_behind(order, head, ended)
        return again

    async def _operations(self, namespace: str, cluster_name: str) -> list[Operation]:
        """The cluster's operations, each readable one; what a step before a restart
        stored and did not post yet is posted first."""
        listed = await objects.list_all(
            self.api, kind=kinds.Kind.TALOS_OPERATION, namespace=namespace
        )
        operations: list[Operation] = []
        for body in listed:
            if ((body.get("spec") or {}).get("clusterRef") or {}).get("name") != cluster_name:
                continue
            try:
                operations.append(Operation.from_body(body))
            except ValueError as error:
                logger.warning(
                    "TalosOperation %s/%s unreadable: %s",
                    namespace,
                    body.get("metadata", {}).get("name"),
                    error,
                )
        return [await self._flush(op) if owing.owes(op.body) else op for op in operations]

    def _report(self, namespace: str, cluster_name: str, operations: list[Operation]) -> None:
        metrics.operations_listed(
            namespace=namespace,
            cluster=cluster_name,
            operations=(
                metrics.active_operation(
                    name=op.name,
                    type_=op.spec.type.value,
                    phase=op.phase.value if op.phase else None,
                    started=op.status.started_at,
                    created=op.created,
                )
                for op in operations
            ),
            fresh_for=metrics.fresh_for(self.settings),
        )

    async def _refuse_past(self, order: list[Operation], cluster_name: str) -> list[Operation]:
        """Refuse the operations queued past ``max_queued``; the run order without them."""
        past = lifecycle.past_queue(order, most=self.settings.max_queued)
        for op in past:
            message = queue_full_message(
                namespace=op.namespace,
                name=op.name,
                cluster=cluster_name,
                most=self.settings.max_queued,
            )
            await self._refuse(op, OperationReason.QUEUE_FULL, message)
        refused = {op.uid for op in past}
        return [op for op in order if op.uid not in refused]

    async def _drive_running(self, order: list[Operation], ended: set[str]) -> Operation | None:
        """Follow the Running operations in order; the first still Running is the head
        (``ended`` gathers the ones that ended)."""
        for op in order:
            if op.phase is Phase.RUNNING:
                op = await self._drive(op)
                if op.phase is Phase.RUNNING:
                    return op
                ended.add(op.uid)
        return None

    async def _start_next(
        self, order: list[Operation], ended: set[str]
    ) -> tuple[Operation | None, float | None]:
        """Start the first operation not ended: the head and when to look again."""
        for op in order:
            if op.uid in ended:
                continue
            op, retry = await self._start(op)
            if op.finished:
                ended.add(op.uid)
                continue
            return op, self.settings.resync_interval if op.phase is Phase.RUNNING else retry
        return None, None

    async def _queue_behind(self, order: list[Operation], head: Operation, ended: set[str]) -> None:
        """Each waiting operation names the one directly ahead: a new head rewrites one
        status, not all."""
        for op, ahead in lifecycle.waiting_behind(order, head=head, ended=ended):
            message = lifecycle.waiting_message(op, ahead=ahead, head=ahead is head)
            await self._write(
                op,
                lifecycle.pending(op, reason=OperationReason.WAITING, message=message, now=_now()),
            )

    # --- starting -----------------------------------------------------------------------

    async def _start(self, op: Operation) -> tuple[Operation, float | None]:
        """Check, claim and create the Job; returns the operation and when to look again."""
        if op.phase is None:
            op = await self._write(
                op,
                lifecycle.pending(
                    op,
                    reason=OperationReason.CHECKING,
                    message=f"checks {op.what} against TalosCluster {op.spec.cluster_ref.name}",
                    now=_now(),
                ),
            )
        cluster_body = await self._read_cluster(op)
        if cluster_body is None:
            message = (
                f"TalosCluster {op.namespace}/{op.spec.cluster_ref.name} does not exist, so "
                f"{op} cannot run; create the cluster, then the operation again."
            )
            return await self._refuse(op, OperationReason.CLUSTER_NOT_FOUND, message), None
        try:
            # the site's policy as it is now: a change since the plan is in force
            cluster = ClusterState.from_body(cluster_body, policy=await self._site_policy())
        except ValueError as error:
            message = f"the spec of TalosCluster {op.spec.cluster_ref.name} cannot be read: {error}"
            return await self._refuse(op, OperationReason.INVALID_OPERATION, message), None
        decision = lifecycle.decide_execution(op, cluster)
        if decision.refusal is not None:
            message = lifecycle.refusal_message(
                decision.refusal, override=op.override_admitted, flag=op.spec.override
            )
            return (
                await self._refuse(op, decision.refusal.rule, message, kind=Failure.REFUSED),
                None,
            )
        planned: OperationNodes | None = None
        try:
            if op.spec.type is OperationType.TALOS:
                read = await self._read_images(op, cluster)
                if isinstance(read, _Reading):
                    op = await self._write(
                        op,
                        lifecycle.pending(
                            op, reason=OperationReason.NODES_READING, message=read.message,
                            now=_now(),
                        ),
                    )  # fmt: skip
                    return op, self.settings.resync_interval
                planned = read
                return await self._claim_nodes(op, planned, decision, cluster_body), None
            checked = ""
            if op.spec.type is OperationType.KUBERNETES:
                waiting, checked = await self._kubernetes_before(op, cluster)
                if waiting is not None:
                    op = await self._write(
                        op,
                        lifecycle.pending(
                            op, reason=OperationReason.CHECKING, message=waiting, now=_now()
                        ),
                    )
                    return op, self.settings.resync_interval
            manifest, detail = await self._manifest(op, cluster, cluster_body, planned=planned)
            detail += checked
        except _Refused as error:
            # the read Job goes first, so a Failed operation has none left; a restart
            # between the two reads again and refuses the same way
            await self._drop_read(op)
            op = await self._refuse(op, error.reason, error.message, kind=Failure.REFUSED)
            return op, None
        except _Unrunnable as error:
            return await self._refuse(op, error.reason, error.message), None
        except Transient as error:
            op = await self._write(
                op,
                lifecycle.pending(
                    op, reason=OperationReason.WORKLOAD_UNREACHABLE, message=str(error), now=_now()
                ),
            )
            return op, self.settings.retry_delay
        name = manifest["metadata"]["name"]
        op = await self._add_finalizer(op)
        message = f"Job {name} is being created to run {detail}"
        op = await self._write(
            op,
            lifecycle.running(
                op,
                job_name=name,
                decision=decision,
                job_created=False,
                message=message,
                now=_now(),
                nodes=planned,
            ),
        )
        # the claim's write owed the Override Event, and posted it: before the Job exists
        if planned is not None:
            # what it read is recorded (the plan, status.nodeImages): a restart from here
            # builds the Job from the plan and never reads again
            await self._drop_read(op)
        op = await self._create_job(op, manifest, detail=detail, cluster_body=cluster_body)
        return op, None

    async def _refuse(
        self, op: Operation, reason: str, message: str, *, kind: Failure = Failure.NOT_STARTED
    ) -> Operation:
        """Failed before its Job: by a rule (``Failure.REFUSED``), or because it cannot run
        as the cluster is set up (``Failure.NOT_STARTED``)."""
        op = await self._write(
            op,
            lifecycle.failed(
                op, reason=reason, message=message, now=_now(), refused=True, kind=kind
            ),
        )
        return op

    async def _create_job(
        self,
        op: Operation,
        manifest: jobs.JobManifest,
        *,
        detail: str,
        cluster_body: Mapping[str, Any] | None,
    ) -> Operation:
        name = manifest["metadata"]["name"]
        try:
            await batch.create_job(self.api, namespace=op.namespace, body=manifest)
            created = True
        except errors.Conflict:
            created = False
            existing = await self._read_job(op.namespace, name)
            if existing is not None and not _owned_by(existing, op):
                message = (
                    f"a Job named {name} exists and is not this operation's; delete it and "
                    f"create the operation again"
                )
                return await self._finish_failed(op, OperationReason.INVALID_OPERATION, message)
        if created:
            # one line per Job made: with replicas, the log shows which one made it
            logger.info("%s: Job %s/%s created to run %s", op, op.namespace, name, detail)
        message = f"Job {name} runs {detail}"
        # this write owes Started and UpgradeStarted (``lifecycle.owed_events``), even when
        # the Job was created before a restart
        return await self._job_runs(op, name, message)

    # --- following a Running operation --------------------------------------------------

    async def _drive(self, op: Operation) -> Operation:
        if op.status.nodes is not None and op.status.nodes.policy is not None:
            return await self._drive_nodes(op)
        name = op.status.job_name or jobs.job_name(
            operation=op.name, uid=op.uid, type_=op.spec.type
        )
        if lifecycle.job_succeeded(op):
            # the Job's success was recorded before a restart: move the spec, even if the
            # Job is gone by now
            return await self._finish_succeeded(op)
        job = await self._read_job(op.namespace, name)
        complete = next((c for c in op.status.conditions if c.type == lifecycle.Complete), None)
        creating = complete is not None and complete.reason == OperationReason.JOB_CREATING
        if job is None:
            return await self._job_missing(op, name, creating=creating)
        if not _owned_by(job, op):
            message = f"Job {name} is not this operation's"
            return await self._finish_failed(op, OperationReason.INVALID_OPERATION, message)
        return await self._job_seen(op, job, name, creating=creating)

    async def _job_missing(self, op: Operation, name: str, *, creating: bool) -> Operation:
        """No Job: claimed before a restart and not created yet, it is created now;
        missing after it ran, someone deleted it."""
        if not creating:
            message = f"Job {name} was deleted before it finished; the upgrade may be half done"
            return await self._finish_failed(op, OperationReason.JOB_DELETED, message)
        try:
            cluster_body, cluster = await self._cluster(op)
            manifest, detail = await self._manifest(op, cluster, cluster_body)
        except ValueError as error:
            return await self._finish_failed(op, OperationReason.INVALID_OPERATION, str(error))
        except _Unrunnable as error:
            return await self._finish_failed(op, error.reason, error.message)
        return await self._create_job(op, manifest, detail=detail, cluster_body=cluster_body)

    async def _job_seen(
        self, op: Operation, job: Mapping[str, Any], name: str, *, creating: bool
    ) -> Operation:
        """The operation's Job as its pods say: running, failed, or succeeded (then its
        nodes are followed)."""
        if creating:
            # created before a restart that came before the write saying so: that write
            # owes Started, so it is made first, even when the Job has ended since
            op = await self._job_runs(op, name, f"Job {name} runs")
        pods = await self._pods(op.namespace, name)
        started = lifecycle.step_started(pods)
        if started is not None and op.status.upgrade_started_at is None:
            # from here on the upgrade acts on the nodes: a failure says something about
            # the version (auto-patch halts it), one before this never reached them
            op = await self._write(op, lifecycle.step_seen(op, started))
        outcome = lifecycle.job_outcome(job, pods)
        if outcome.state is lifecycle.JobState.RUNNING:
            if outcome.message:
                message = f"Job {name} runs: {outcome.message}"
                return await self._job_runs(op, name, message)
            return op
        if outcome.state is lifecycle.JobState.FAILED:
            message = f"{op.what} failed: {outcome.message}; the TalosCluster spec is unchanged"
            return await self._finish_failed(op, OperationReason.JOB_FAILED, message)
        return await self._follow_nodes(op, job, name)

    async def _follow_nodes(self, op: Operation, job: Mapping[str, Any], name: str) -> Operation:
        """The Job succeeded: succeed once every Node it upgraded reports the target
        (``lifecycle.follow_nodes`` says why the Job's success is not enough)."""
        if op.spec.type is OperationType.CNI:
            return await self._finish_succeeded(op)
        try:
            cluster_body, cluster = await self._cluster(op)
            items = await self._node_items(op, cluster)
        except ValueError as error:
            return await self._finish_failed(op, OperationReason.INVALID_OPERATION, str(error))
        except _Unrunnable as error:
            return await self._finish_failed(op, error.reason, error.message)
        talos = op.spec.type is OperationType.TALOS
        reported = {}
        for item in items:
            found = observe.node_report(item)
            reported[found.name] = found.talos if talos else found.kubelet
        behind = lifecycle.nodes_behind(op, reported, upgraded=jobs.upgraded_nodes(job))
        verdict = lifecycle.follow_nodes(
            op,
            behind,
            job_name=name,
            finished_at=lifecycle.job_finished_at(job),
            now=_now(),
            deadline=self.settings.node_version_deadline,
        )
        if verdict.done:
            if op.spec.type is OperationType.KUBERNETES:
                checked = await self._kubernetes_after(op, cluster, cluster_body, job, name)
                if checked is not None:
                    return checked
            return await self._finish_succeeded(op)
        if verdict.failed:
            return await self._finish_failed(
                op, OperationReason.NODES_NOT_UPGRADED, verdict.message
            )
        return await self._job_runs(op, name, verdict.message)

    # --- a Kubernetes operation: checks before and after talosctl upgrade-k8s ------------

    async def _kubernetes_before(
        self, op: Operation, cluster: ClusterState
    ) -> tuple[str | None, str]:
        """Before ``talosctl upgrade-k8s``: etcd healthy with every member. Returns what
        it waits for (None once passed) and what passed, for the Started message;
        ``_Unrunnable`` when etcd is not healthy. upgrade-k8s checks each node itself as
        it goes (each static Pod back, each kubelet Ready on the target:
        pkg/cluster/kubernetes/kubelet.go ``checkNodeKubeletVersion``), and runs as one
        command, so Ichor checks before it and after it."""
        ref = cluster.spec.talosconfig_secret_ref
        if ref is None:
            return None, ""  # the Job's builder refuses it, in its own words
        talosconfig = await self._secret_mount(
            op, ref.name, ref.key or DEFAULT_TALOSCONFIG_KEY, what="talosconfig"
        )
        control_plane = {n.address: n.name for n in (await self._nodes(op, cluster)).control_plane}
        if not control_plane:
            return None, ""  # the Job's builder refuses it: no control plane node
        health = await self._etcd_check(
            op, cluster, talosconfig, control_plane=control_plane, step="check-before"
        )
        names = nodesteps.named(list(control_plane.values()))
        if health is None:
            return f"checks etcd on {names} before talosctl upgrade-k8s", ""
        if not health.healthy:
            raise _Unrunnable(
                OperationReason.CHECK_FAILED,
                f"stopped before talosctl upgrade-k8s: etcd is not healthy with every member: "
                f"{'; '.join(health.problems)}; no node was touched. Make etcd healthy "
                f"(talosctl etcd status, talosctl etcd members), then create a new operation",
            )
        return None, f"; before it: etcd healthy with {health.members} members"

    async def _kubernetes_after(
        self,
        op: Operation,
        cluster: ClusterState,
        cluster_body: Mapping[str, Any],
        job: Mapping[str, Any],
        name: str,
    ) -> Operation | None:
        """After ``talosctl upgrade-k8s`` and every kubelet on the target: etcd healthy
        with every member and the cluster's own health checks passing, until the node
        deadline. None once they pass; else the operation, waiting or failed."""
        now = _now()
        finished = lifecycle.job_finished_at(job) or now
        until = finished + timedelta(seconds=self.settings.node_version_deadline)
        try:
            checking, failing = await self._etcd_after(op, cluster)
        except _Unrunnable as error:
            return await self._finish_failed(op, error.reason, error.message)
        if checking:
            return await self._job_runs(
                op, name, f"Job {name} succeeded; checks etcd after talosctl upgrade-k8s"
            )
        if failing is None:
            bad, _ = await self._health(op, cluster_body)
            failing = "; ".join(bad) or None
        if failing is None:
            return None
        if now < until:
            return await self._job_runs(
                op,
                name,
                f"Job {name} succeeded; after it, waits until {failing} "
                f"(gives up at {until.isoformat()})",
            )
        message = (
            f"stopped after talosctl upgrade-k8s: {failing}; every Node reports kubelet "
            f"{op.spec.version}, and the TalosCluster spec is unchanged. Make the check pass, "
            f"then create a new operation to {op.spec.version} (upgrade-k8s skips what is "
            f"already done)"
        )
        return await self._finish_failed(
            op, OperationReason.CHECK_FAILED, message, kind=Failure.UPGRADE_FAILED
        )

    async def _etcd_after(self, op: Operation, cluster: ClusterState) -> tuple[bool, str | None]:
        """etcd after ``talosctl upgrade-k8s``: whether its check Job still runs, and what
        fails (None: nothing)."""
        try:
            talosconfig = await self._talosconfig(op, cluster)
            nodes = await self._nodes(op, cluster)
        except Transient as error:
            return False, str(error)
        control_plane = {n.address: n.name for n in nodes.control_plane}
        if not control_plane:
            return False, None
        health = await self._etcd_check(
            op, cluster, talosconfig, control_plane=control_plane, step="check-after"
        )
        if health is None:
            return True, None
        if not health.healthy:
            return False, f"etcd is not healthy with every member: {'; '.join(health.problems)}"
        return False, None

    async def _health(
        self, op: Operation, cluster_body: Mapping[str, Any]
    ) -> tuple[list[str], int]:
        """The cluster's own health checks (none when this process runs none): what each
        failing one says, and how many ran."""
        if self.health_gate is None:
            return [], 0
        found = await self.health_gate(op, cluster_body)
        bad = [f"health check {name}: {message}" for name, ok, message in found if not ok]
        return bad, len(found)

    async def _job_runs(self, op: Operation, name: str, message: str) -> Operation:
        """Write that the created Job ``name`` runs, saying ``message``."""
        return await self._write(
            op,
            lifecycle.running(
                op,
                job_name=name,
                decision=lifecycle.Decision(),
                job_created=True,
                message=message,
                now=_now(),
            ),
        )

    async def _finish_succeeded(self, op: Operation) -> Operation:
        note = ""
        cluster_body: Mapping[str, Any] | None = None
        spec_field = lifecycle.SPEC_FIELDS.get(op.spec.type)
        target = op.spec.version
        if spec_field is not None and target:
            op = await self._write(
                op,
                lifecycle.spec_updating(
                    op,
                    message=(
                        f"the Job succeeded; spec.{spec_field} of TalosCluster "
                        f"{op.spec.cluster_ref.name} moves to {target} next"
                    ),
                    now=_now(),
                ),
            )
            denial, cluster_body = await self._record_spec(op, spec_field, target)
            if denial is not None:
                message = (
                    f"the Job succeeded, but spec.{spec_field} of TalosCluster "
                    f"{op.spec.cluster_ref.name} was not moved to {op.spec.version}: {denial}"
                )
                return await self._finish_failed(op, OperationReason.SPEC_NOT_UPDATED, message)
            if cluster_body is not None and lifecycle.declarative(cluster_body):
                held = (cluster_body.get("spec") or {}).get(spec_field)
                note = (
                    f"; TalosCluster {op.spec.cluster_ref.name} is Declarative, so its "
                    f"spec is not written (spec.{spec_field} is {held})"
                )
            else:
                note = (
                    f"; TalosCluster {op.spec.cluster_ref.name} spec.{spec_field} is "
                    f"{op.spec.version}"
                )
        message = lifecycle.success_message(op, spec_note=note)
        op = await self._write(op, lifecycle.succeeded(op, message=message, now=_now()))
        return await self._announce_end(op, cluster_body, succeeded=True, message=message)

    async def _finish_failed(
        self, op: Operation, reason: str, message: str, *, kind: Failure | None = None
    ) -> Operation:
        # the write owes Failed and the cluster's UpgradeFailed, and posts them
        op = await self._write(
            op, lifecycle.failed(op, reason=reason, message=message, now=_now(), kind=kind)
        )
        return await self._announce_end(op, None, succeeded=False, message=message)

    async def _announce_end(
        self,
        op: Operation,
        cluster_body: Mapping[str, Any] | None,
        *,
        succeeded: bool,
        message: str,
    ) -> Operation:
        """The metric and queue release that every ended operation gets (its end's write
        owed the Events, on the operation and its cluster, and posted them)."""
        result = metrics.Result.SUCCEEDED if succeeded else metrics.Result.FAILED
        metrics.operation_finished(type_=op.spec.type, result=result, created=op.created)
        await self._release(op)
        return op

    async def _record_spec(
        self, op: Operation, spec_field: str, target: str
    ) -> tuple[str | None, Mapping[str, Any] | None]:
        """Move the cluster's spec forward to ``target``; (denial, cluster body)."""
        for _ in range(5):
            body = await self._read_cluster(op)
            if body is None:
                return f"TalosCluster {op.spec.cluster_ref.name} no longer exists", None
            # Declarative: the spec is the desired state, never written
            patch = lifecycle.spec_record(body, spec_field=spec_field, target=target)
            if patch is None:
                return None, body
            try:
                written = await patching.patch_object(
                    self.api,
                    kind=kinds.Kind.TALOS_CLUSTER,
                    name=op.spec.cluster_ref.name,
                    namespace=op.namespace,
                    patch=patch,
                    resource_version=body["metadata"]["resourceVersion"],
                )
            except errors.Conflict:
                self.conflicts += 1
                continue
            except errors.ApiError as error:
                if error.refused:
                    return error.message, body
                raise
            return None, cast(Mapping[str, Any], written)
        raise Moved(f"TalosCluster {op.spec.cluster_ref.name} kept moving")

    # --- a Talos operation, node by node -------------------------------------------------

    async def _claim_nodes(
        self,
        op: Operation,
        planned: OperationNodes,
        decision: lifecycle.Decision,
        cluster_body: Mapping[str, Any],
    ) -> Operation:
        """Claim a Talos operation: finalizer, then Running with its nodes, their images
        and the policy it runs under recorded; then the first step."""
        cluster = ClusterState.from_body(cluster_body)
        installation = await objects.get_installation(self.api)
        fleet = _fleet_policy(installation)
        effective = effective_policy(cluster.spec.upgrade_policy, fleet)
        policy = nodesteps.policy_for(effective, nodes=len(planned.order))
        planned = planned.model_copy(update={"policy": policy})
        op = await self._add_finalizer(op)
        detail = (
            f"talosctl upgrade to {op.spec.version}, one Job per node, control plane first, "
            f"each with its own installer ({len(planned.images)} image"
            f"{'s' if len(planned.images) != 1 else ''}), checks between nodes"
        )
        if policy.single_node:
            detail += "; " + nodesteps.single_node_statement(
                version=op.spec.version or "", drain=effective.drain
            )
        if planned.changes:
            detail += "; extensions change as the spec names: " + "; ".join(planned.changes)
        op = await self._write(
            op,
            lifecycle.running(
                op,
                job_name="",
                decision=decision,
                job_created=True,
                message=f"{detail}; {nodesteps.progress(planned)}",
                now=_now(),
                nodes=planned,
                reason=OperationReason.NODES_UPGRADING,
            ),
        )
        # this write owed the Override (when it runs under one), Started and the cluster's
        # UpgradeStarted (``lifecycle.owed_events``) and posted them, before any node's Job;
        # the first node step deletes the read Job
        return await self._drive_nodes(op)

    async def _drive_nodes(self, op: Operation) -> Operation:
        """Take the next steps of a Talos operation node by node, each written before the
        next side effect; stops at the first that waits."""
        for _ in range(12):
            version = op.resource_version
            op = await self._node_step(op)
            if op.finished or op.phase is not Phase.RUNNING or op.resource_version == version:
                return op
        return op

    async def _node_step(self, op: Operation) -> Operation:
        nodes = op.status.nodes
        if nodes is None or nodes.policy is None:
            raise ValueError(f"{op} is not a node-by-node operation")
        if lifecycle.job_succeeded(op):
            return await self._finish_succeeded(op)
        current = nodesteps.planned(nodes, nodes.current or ())
        if not current:
            if not nodes.attempt:
                # what it read is recorded (the plan, status.nodeImages): the read Job goes
                # before the first step, also after a restart between the claim and here
                await self._drop_read(op)
            batch = nodesteps.next_batch(nodes)
            if not batch:
                return await self._finish_succeeded(op)
            return await self._write(op, nodesteps.begin(op, nodes, batch, now=_now()))
        try:
            cluster_body, cluster = await self._cluster(op)
            talosconfig = await self._talosconfig(op, cluster)
        except _Unrunnable as error:
            return await self._finish_failed(op, error.reason, error.message)
        step = _Step(nodes, current, cluster, cluster_body, talosconfig)
        if nodes.stage is NodeStage.CHECKING:
            return await self._check_before(op, step)
        if nodes.stage is NodeStage.UPGRADING:
            return await self._upgrade(op, step)
        return await self._verify(op, step)

    async def _talosconfig(
        self, op: Operation, cluster: ClusterState, *, missing: str = " any more"
    ) -> jobs.SecretMount:
        """The talosconfig to mount, once it can carry the next node: read as data, and
        the pre-flight again (not expiring before a node's Job could end, os:admin).
        ``missing`` ends the refusal when the TalosCluster names none."""
        ref = cluster.spec.talosconfig_secret_ref
        if ref is None:
            raise _Unrunnable(
                OperationReason.CREDENTIALS_UNUSABLE,
                f"TalosCluster {cluster.name} names no talosconfigSecretRef{missing}",
            )
        key = ref.key or DEFAULT_TALOSCONFIG_KEY
        return await self._secret_mount(op, ref.name, key, what="talosconfig")

    def _ref(self, op: Operation) -> jobs.OperationRef:
        return jobs.OperationRef(
            namespace=op.namespace,
            name=op.name,
            uid=op.uid,
            cluster=op.spec.cluster_ref.name,
            type=op.spec.type,
        )

    async def _etcd(
        self, op: Operation, step: _Step, *, only: tuple[str, ...] = ()
    ) -> talosread.EtcdHealth | None:
        """etcd as this attempt's check Job reads it; None while the Job runs. The Job is
        deleted once read: the next attempt is a Job of its own."""
        attempt = step.nodes.attempt or 0
        return await self._etcd_check(
            op, step.cluster, step.talosconfig, control_plane=nodesteps.control_plane(step.nodes),
            step=f"check-{attempt}", only=only,
        )  # fmt: skip

    async def _etcd_check(
        self,
        op: Operation,
        cluster: ClusterState,
        talosconfig: jobs.SecretMount,
        *,
        control_plane: Mapping[str, str],
        step: str,
        only: tuple[str, ...] = (),
    ) -> talosread.EtcdHealth | None:
        """etcd as the check Job named by ``step`` reads it on the control plane nodes
        (address -> name); None while the Job runs. Deleted once read, so the next look
        with the same ``step`` is a new read."""
        name = jobs.job_name(operation=op.name, uid=op.uid, type_=op.spec.type, step=step)
        job = await self._read_job(op.namespace, name)
        if job is None:
            manifest = talosread.etcd_job(
                operation=self._ref(op),
                name=name,
                talos_version=cluster.spec.talos_version,
                addresses=list(control_plane),
                talosconfig=talosconfig,
                settings=self.settings.executor,
            )
            with contextlib.suppress(errors.Conflict):
                await batch.create_job(self.api, namespace=op.namespace, body=manifest)
            return None
        output = await self.read_output(op.namespace, job)
        if output is None:
            return None
        with contextlib.suppress(errors.NotFound):
            await batch.delete_job(self.api, namespace=op.namespace, name=name)
        return talosread.etcd_health(output, control_plane=control_plane, only=only)

    async def _check_before(self, op: Operation, step: _Step) -> Operation:
        """Before a control plane node: etcd healthy with every member."""
        nodes, names = step.nodes, step.names
        passed: list[str] = []
        if any(n.control_plane for n in step.current):
            health = await self._etcd(op, step)
            if health is None:
                return await self._write(
                    op,
                    nodesteps.stage(
                        op, nodes, now=_now(),
                        message=f"checks etcd before {nodesteps.named(names)}",
                    ),
                )  # fmt: skip
            if not health.healthy:
                message = nodesteps.failed_between(
                    check=f"etcd is not healthy with every member: {'; '.join(health.problems)}",
                    when="before",
                    node=nodesteps.named(names),
                    nodes=nodes,
                    step="Make etcd healthy (talosctl etcd status, talosctl etcd members), then "
                    "create a new operation: the nodes done keep the new Talos",
                )
                # before the first node it says nothing of the version; after one, it may
                kind = Failure.UPGRADE_FAILED if nodes.done else Failure.NOT_STARTED
                return await self._finish_failed(
                    op, OperationReason.CHECK_FAILED, message, kind=kind
                )
            passed.append(
                f"before {nodesteps.named(names)}: etcd healthy with {health.members} members"
            )
        return await self._write(
            op,
            nodesteps.stage(
                op, nodes, now=_now(), message=f"upgrades {nodesteps.named(names)}",
                passed=passed, stage=NodeStage.UPGRADING, since=_now(),
            ),
        )  # fmt: skip

    async def _upgrade(self, op: Operation, step: _Step) -> Operation:
        """Each node of the batch has its own Job; a node's Job is created once: its name
        is in ``started`` before it is created, and a Job missing after that was deleted."""
        nodes = step.nodes
        started = nodes.started or ()
        outcomes: dict[str, tuple[lifecycle.JobOutcome, str]] = {}
        already = await self._on_target(op, step)
        for node in step.current:
            if node.name in already and node.name not in started:
                outcomes[node.name] = (nodesteps.ALREADY_THERE, "")
                continue
            name = jobs.job_name(
                operation=op.name, uid=op.uid, type_=op.spec.type, step=f"node-{node.name}"
            )
            job = await self._read_job(op.namespace, name) if node.name in started else None
            if node.name not in started or _unmade(op, started, node.name, job):
                return await self._start_node(op, step, node, name, write=node.name not in started)
            if job is None or not _owned_by(job, op):
                message = (
                    f"Job {name}, which upgrades {node.name}, was deleted before it finished; "
                    f"the upgrade of {node.name} may be half done; {nodesteps.progress(nodes)}"
                )
                return await self._finish_failed(op, OperationReason.JOB_DELETED, message)
            op, outcomes[node.name] = await self._node_outcome(op, job, name)
        return await self._upgraded(op, step, outcomes, already)

    async def _start_node(
        self, op: Operation, step: _Step, node: PlannedNode, name: str, *, write: bool = True
    ) -> Operation:
        """Record that ``node``'s Job ``name`` starts (``NodeJobCreating``), then create
        it; without ``write``, only the create a kill prevented."""
        nodes = step.nodes
        policy = nodes.policy or NodePolicy()
        if write:
            op = await self._write(
                op,
                nodesteps.stage(
                    op, nodes, now=_now(), message=f"Job {name} upgrades {node.name}",
                    started=(*(nodes.started or ()), node.name), job_name=name,
                    reason=OperationReason.NODE_JOB_CREATING,
                ),
            )  # fmt: skip
        manifest = jobs.node_job(
            operation=self._ref(op),
            name=name,
            version=op.spec.version or "",
            node=jobs.TargetNode(
                name=node.name,
                address=node.address,
                role=jobs.NodeRole.CONTROL_PLANE if node.control_plane else jobs.NodeRole.WORKER,
            ),
            image=nodes.image_of()[node.name],
            drain=policy.drain,
            drain_timeout=policy.drain_timeout,
            reboot_mode=policy.reboot_mode,
            avoid_node=step.cluster.spec.kubeconfig_secret_ref is None,
            talosconfig=step.talosconfig,
            settings=self.settings.executor,
        )
        with contextlib.suppress(errors.Conflict):
            await batch.create_job(self.api, namespace=op.namespace, body=manifest)
        logger.info("%s: Job %s/%s upgrades %s", op, op.namespace, name, node.name)
        return op

    async def _node_outcome(
        self, op: Operation, job: Mapping[str, Any], name: str
    ) -> tuple[Operation, tuple[lifecycle.JobOutcome, str]]:
        """A node's Job as its pods say; the first upgrade step seen is recorded."""
        pods = await self._pods(op.namespace, name)
        seen = lifecycle.step_started(pods)
        if seen is not None and op.status.upgrade_started_at is None:
            op = await self._write(op, lifecycle.step_seen(op, seen))
        return op, (lifecycle.job_outcome(job, pods), name)

    async def _upgraded(
        self, op: Operation, step: _Step, outcomes: nodesteps.Outcomes, already: set[str]
    ) -> Operation:
        """What the batch's Jobs say, written: a failure, Jobs still running, or the
        batch upgraded and its checks after next."""
        nodes, version = step.nodes, op.spec.version or ""
        failed = nodesteps.failed_node(step.current, outcomes, nodes=nodes, version=version)
        if failed is not None:
            return await self._finish_failed(op, *failed)
        running = nodesteps.still_running(outcomes)
        if running:
            return await self._write(
                op,
                nodesteps.stage(op, nodes, now=_now(), message="upgrades " + "; ".join(running)),
            )
        return await self._write(
            op,
            nodesteps.stage(
                op, nodes, now=_now(),
                message=f"{step.said} upgraded; checks after",
                passed=nodesteps.skipped(already, outcomes, version=version),
                stage=NodeStage.VERIFYING, since=_now(), attempt=(nodes.attempt or 0) + 1,
            ),
        )  # fmt: skip

    async def _on_target(self, op: Operation, step: _Step) -> set[str]:
        """The nodes of the batch that already report the target, Ready, and whose
        schematic the spec does not change: upgrading them again would only reboot them."""
        changing = set(step.nodes.changing or ())
        try:
            items = await self._node_items(op, step.cluster)
        except (_Unrunnable, Transient):
            return set()
        wanted = set(step.names) - changing
        found: set[str] = set()
        for item in items:
            report = observe.node_report(item)
            if (
                report.name in wanted
                and report.talos is not None
                and report.talos.tag == op.spec.version
                and observe.node_ready(item)
            ):
                found.add(report.name)
        return found

    async def _verify(self, op: Operation, step: _Step) -> Operation:
        """After the batch: each Node Ready on the target, each control plane node's etcd
        member back, the cluster's own health checks passing; until the deadline."""
        now = _now()
        checked = await self._after_nodes(op, step)
        checked = await self._after_etcd(op, step, checked)
        checked = await self._after_health(op, step, checked)
        return await self._verified(op, step, checked, now=now)

    async def _after_nodes(self, op: Operation, step: _Step) -> nodesteps.Checked:
        """The first check after a batch: each of its Nodes Ready on the target."""
        target = op.spec.version or ""
        try:
            items = await self._node_items(op, step.cluster)
        except (_Unrunnable, Transient) as error:
            return nodesteps.Checked().fails(OperationReason.CHECK_FAILED, str(error))
        failing = nodesteps.not_on_target(step.current, items, target=target)
        if failing is not None:
            return nodesteps.Checked().fails(*failing)
        return nodesteps.Checked().passes(f"after {step.said}: Ready on {target}")

    async def _after_etcd(
        self, op: Operation, step: _Step, checked: nodesteps.Checked
    ) -> nodesteps.Checked:
        """Then each control plane node's etcd member back (once passed, not again)."""
        done = f"after {step.said}: etcd member back"
        own = tuple(n.name for n in step.current if n.control_plane)
        needed = bool(own) and done not in (step.nodes.checks or ())
        if checked.failing is not None or not needed:
            return checked
        health = await self._etcd(op, step, only=own)
        if health is None:
            return checked.fails(OperationReason.CHECK_FAILED, "its etcd check runs")
        if not health.healthy:
            # the next look is a new check Job
            what = f"etcd member not back: {'; '.join(health.problems)}"
            return checked.fails(OperationReason.CHECK_FAILED, what, new_attempt=True)
        return checked.passes(done)

    async def _after_health(
        self, op: Operation, step: _Step, checked: nodesteps.Checked
    ) -> nodesteps.Checked:
        """Then the cluster's own health checks, when this process runs them."""
        if checked.failing is not None:
            return checked
        bad, ran = await self._health(op, step.cluster_body)
        if bad:
            return checked.fails(OperationReason.CHECK_FAILED, "; ".join(bad))
        if ran:
            return checked.passes(f"after {step.said}: {ran} health check(s) pass")
        return checked

    async def _verified(
        self, op: Operation, step: _Step, checked: nodesteps.Checked, *, now: datetime
    ) -> Operation:
        """What the checks after a batch found, written: the batch done, a new check Job,
        a wait until the node deadline, or the failure past it."""
        nodes, said = step.nodes, step.said
        if checked.failing is None:
            done = (*(nodes.done or ()), *step.names)
            return await self._write(
                op,
                nodesteps.stage(
                    op, nodes, now=now, message=f"{said} done", passed=checked.passed,
                    done=done, current=None, stage=None, since=None,
                ),
            )  # fmt: skip
        reason, what = checked.failing
        if nodesteps.deadline_passed(nodes, now=now, seconds=self.settings.node_version_deadline):
            advice = (
                "look at the node (talosctl dmesg, talosctl version, kubectl describe node), "
                "then create a new operation: the nodes done keep the new Talos, the "
                "TalosCluster spec is unchanged"
            )
            message = nodesteps.failed_between(
                check=what, when="after", node=said, nodes=nodes, step=advice
            )
            return await self._finish_failed(op, reason, message, kind=Failure.UPGRADE_FAILED)
        if checked.new_attempt:
            return await self._write(
                op,
                nodesteps.stage(
                    op, nodes, now=now, message=f"after {said}: {what}",
                    attempt=(nodes.attempt or 0) + 1,
                ),
            )  # fmt: skip
        until = (nodes.since or now) + timedelta(seconds=self.settings.node_version_deadline)
        return await self._write(
            op,
            nodesteps.stage(
                op, nodes, now=now,
                message=f"after {said}: waits until {what} (gives up at {until.isoformat()})",
                passed=[p for p in checked.passed if p not in (nodes.checks or ())],
            ),
        )  # fmt: skip

    # --- the Job and what it needs ------------------------------------------------------

    async def _manifest(
        self,
        op: Operation,
        cluster: ClusterState,
        cluster_body: Mapping[str, Any],
        *,
        planned: OperationNodes | None = None,
    ) -> tuple[jobs.JobManifest, str]:
        """The operation's Job and what it runs; a Talos Job upgrades the nodes of
        ``planned`` (else of the plan its status recorded at the claim), each with its
        own image."""
        if op.spec.type is OperationType.CNI:
            return await self._cilium_manifest(op, cluster)
        talosconfig = await self._talosconfig(op, cluster, missing=_NO_TALOSCONFIG)
        if op.spec.type is OperationType.TALOS:
            return self._talos_manifest(op, planned or op.status.nodes, talosconfig)
        return await self._kubernetes_manifest(op, cluster, talosconfig)

    async def _cilium_manifest(
        self, op: Operation, cluster: ClusterState
    ) -> tuple[jobs.JobManifest, str]:
        """The Helm Job of a cni operation, with the kubeconfig the TalosCluster names."""
        settings = self.settings.executor
        ref = cluster.spec.kubeconfig_secret_ref
        kubeconfig = None
        if ref is not None:
            kubeconfig = await self._secret_mount(
                op, ref.name, ref.key or DEFAULT_KUBECONFIG_KEY, what="kubeconfig"
            )
        override = cluster.status.cni.image_override if cluster.status.cni else None
        manifest = jobs.cilium_job(
            operation=self._ref(op),
            kubeconfig=kubeconfig,
            image_override=override,
            settings=settings,
        )
        detail = f"helm upgrade {settings.cilium_release} to chart {settings.cilium_chart_version}"
        return manifest, detail

    def _talos_manifest(
        self, op: Operation, plan: OperationNodes | None, talosconfig: jobs.SecretMount
    ) -> tuple[jobs.JobManifest, str]:
        """The one Job of a Talos operation over the nodes of ``plan``, one at a time."""
        if plan is None or not plan.order:
            raise _Unrunnable(
                OperationReason.INVALID_OPERATION,
                f"{op} has no recorded nodes to upgrade; create the operation again",
            )
        version = op.spec.version or ""
        targets = [
            jobs.TargetNode(
                name=n.name,
                address=n.address,
                role=jobs.NodeRole.CONTROL_PLANE if n.control_plane else jobs.NodeRole.WORKER,
            )
            for n in plan.order
        ]
        manifest = jobs.talos_job(
            operation=self._ref(op),
            version=version,
            nodes=targets,
            images=plan.image_of(),
            talosconfig=talosconfig,
            settings=self.settings.executor,
        )
        names = ", ".join(n.name for n in targets)
        images = len(plan.images)
        detail = (
            f"talosctl upgrade to {version} on {len(targets)} node(s), one at a time, "
            f"each with its own installer ({images} image{'s' if images != 1 else ''}): "
            f"{names}"
        )
        if plan.changes:
            detail += "; extensions change as the spec names: " + "; ".join(plan.changes)
        return manifest, detail

    async def _kubernetes_manifest(
        self, op: Operation, cluster: ClusterState, talosconfig: jobs.SecretMount
    ) -> tuple[jobs.JobManifest, str]:
        """The Job of talosctl upgrade-k8s, through the first control plane node."""
        version = op.spec.version or ""
        nodes = await self._nodes(op, cluster)
        control_plane = nodes.control_plane
        if not control_plane:
            raise _Unrunnable(
                OperationReason.NO_NODES, _no_nodes(cluster, nodes, control_plane=True)
            )
        manifest = jobs.kubernetes_job(
            operation=self._ref(op),
            version=version,
            talos=cluster.spec.talos_version,
            control_plane=control_plane[0],
            talosconfig=talosconfig,
            settings=self.settings.executor,
        )
        return manifest, f"talosctl upgrade-k8s --to {version} through {control_plane[0].name}"

    async def _read_images(self, op: Operation, cluster: ClusterState) -> OperationNodes | _Reading:
        """Each node's own installer image, read from the node before anything is
        upgraded: a short Job of talosctl reads every node's ExtensionStatus,
        PlatformMetadata and SecurityState (``talosread``); until it ended, ``_Reading``.
        Refused (``_Refused``, no override passes it) when a node's image cannot be
        given safely (``node_images.plan_images``). The TalosCluster's
        ``status.nodeImages`` records what was read."""
        talosconfig = await self._talosconfig(op, cluster, missing=_NO_TALOSCONFIG)
        items = await self._node_items(op, cluster)
        nodes = jobs.target_nodes(items)
        if not nodes.nodes:
            raise _Unrunnable(OperationReason.NO_NODES, _no_nodes(cluster, nodes))
        addresses = {n.name: n.address for n in nodes.nodes}
        output = await self._image_read(op, cluster, talosconfig, addresses)
        if isinstance(output, _Reading):
            return output
        state = talosread.image_state(
            output.logs, addresses=addresses.values(), exit_codes=output.exit_codes
        )
        readings = talosread.readings(items, state, addresses=addresses)
        await self._record_images(op, readings)
        plan = self._image_plan(op, cluster, readings)
        if plan.refusals:
            raise _Refused(
                OperationReason.NODE_IMAGE_REFUSED,
                nodesteps.images_refused(
                    plan,
                    what=f"{op} ({op.what})",
                    read_nothing=not state.images,
                    failure=output.failure,
                ),
            )
        return nodesteps.planned_nodes(nodes, plan)

    async def _image_read(
        self,
        op: Operation,
        cluster: ClusterState,
        talosconfig: jobs.SecretMount,
        addresses: Mapping[str, str],
    ) -> talosread.ReadOutput | _Reading:
        """The read Job's output once it ended; ``_Reading`` while it runs (created
        first when it does not exist)."""
        name = jobs.job_name(operation=op.name, uid=op.uid, type_=op.spec.type, step="read")
        reading = _Reading(
            f"Job {name} reads the schematic, platform and SecureBoot of {len(addresses)} "
            f"node(s) through the Talos API, to upgrade each with its own image"
        )
        job = await self._read_job(op.namespace, name)
        if job is None:
            manifest = talosread.read_job(
                operation=self._ref(op),
                name=name,
                talos_version=cluster.spec.talos_version,
                addresses=list(addresses.values()),
                talosconfig=talosconfig,
                settings=self.settings.executor,
            )
            with contextlib.suppress(errors.Conflict):
                await batch.create_job(self.api, namespace=op.namespace, body=manifest)
            return reading
        if not _owned_by(job, op):
            raise _Unrunnable(
                OperationReason.INVALID_OPERATION,
                f"a Job named {name} exists and is not this operation's; delete it and "
                f"create the operation again",
            )
        output = await self.read_output(op.namespace, job)
        return reading if output is None else output

    def _image_plan(
        self, op: Operation, cluster: ClusterState, readings: Sequence[NodeReading]
    ) -> node_images.ImagePlan:
        """Each node's image for the target, as the spec's schematics name them."""
        spec = cluster.spec
        return node_images.plan_images(
            readings,
            version=op.spec.version or "",
            spec_schematic=spec.schematic,
            rules=[
                node_images.SchematicRule(
                    match_labels=rule.selector.match_labels, schematic=rule.schematic
                )
                for rule in spec.node_schematics or ()
            ],
            default_factory=self.settings.executor.image_factory,
        )

    async def _drop_read(self, op: Operation) -> None:
        """Delete the operation's read Job (and its pod) once what it read is recorded."""
        name = jobs.job_name(operation=op.name, uid=op.uid, type_=op.spec.type, step="read")
        with contextlib.suppress(errors.NotFound):
            await batch.delete_job(self.api, namespace=op.namespace, name=name)

    async def _read_output(
        self, namespace: str, job: Mapping[str, Any]
    ) -> talosread.ReadOutput | None:
        """What a read Job's containers printed, once it ended (None while it runs):
        each container's log (empty when it cannot be read) and exit code."""
        name = str((job.get("metadata") or {}).get("name", ""))
        pods = await self._pods(namespace, name)
        outcome = lifecycle.job_outcome(job, pods)
        if outcome.state is lifecycle.JobState.RUNNING:
            return None
        failure = outcome.message if outcome.state is lifecycle.JobState.FAILED else ""
        containers = [
            str(c.get("name"))
            for c in (((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "containers"
            )
            or ()
        ]
        logs: dict[str, str] = {}
        if not pods:
            return talosread.ReadOutput(logs=logs, failure=failure)
        pod = str((pods[0].get("metadata") or {}).get("name", ""))
        for container in containers:
            try:
                logs[container] = await batch.pod_log(
                    self.api,
                    namespace=namespace,
                    pod=pod,
                    container=container,
                    limit_bytes=talosread.MAX_LOG_BYTES,
                )
            except errors.ApiError as error:
                logger.info("log of %s/%s %s not read: %s", namespace, pod, container, error)
        return talosread.ReadOutput(
            logs=logs, exit_codes=talosread.exit_codes(pods), failure=failure
        )

    async def _record_images(self, op: Operation, readings: Sequence[NodeReading]) -> None:
        """``status.nodeImages`` of the TalosCluster: what the read found, grouped by
        identical image (only this read writes it; the cluster's controller carries it)."""
        value = node_image_status(readings, now=_now())
        try:
            await patching.patch_status(
                self.api,
                kind=kinds.Kind.TALOS_CLUSTER,
                name=op.spec.cluster_ref.name,
                namespace=op.namespace,
                status_patch={"nodeImages": value.to_api()},
            )
        except errors.FAILED as error:
            logger.warning("%s: status.nodeImages of its cluster not written: %s", op, error)

    async def _secret_mount(
        self, op: Operation, name: str, key: str, *, what: str
    ) -> jobs.SecretMount:
        """The Secret to mount into the Job, once its content is read as data: a
        kubeconfig or talosconfig that would run a command, read a file or go through
        another address in the Job is refused here, before any Job exists."""
        try:
            value = await read_secret_key(self.api, namespace=op.namespace, name=name, key=key)
        except KubeconfigError as error:
            raise _Unrunnable(
                OperationReason.CREDENTIALS_UNUSABLE, f"the {what} cannot be mounted: {error}"
            ) from error
        origin = f"the {what} in key {key!r} of Secret {op.namespace}/{name}"
        try:
            if what == "kubeconfig":
                credentials.read_kubeconfig(value.value, what=origin, policy=self.credentials)
            else:
                talos = credentials.read_talosconfig(
                    value.value, what=origin, policy=self.credentials
                )
        except credentials.Refused as error:
            raise _Unrunnable(
                OperationReason.CREDENTIALS_UNUSABLE, f"{error}; no Job was created"
            ) from None
        if what == "talosconfig":
            # pre-flight: it can carry a node's Job to its end, as a role that upgrades
            said = preflight.refusal_pem(
                talos.crt_pem,
                now=_now(),
                deadline_seconds=self.settings.executor.active_deadline_seconds,
                what=origin,
            )
            if said is not None:
                raise _Unrunnable(OperationReason.PREFLIGHT_FAILED, f"{said}; no node was touched")
        return jobs.SecretMount(secret=name, key=key)

    async def _nodes(self, op: Operation, cluster: ClusterState) -> jobs.NodeList:
        return jobs.target_nodes(await self._node_items(op, cluster))

    async def _node_items(self, op: Operation, cluster: ClusterState) -> list[Any]:
        """The workload cluster's Node objects, read with the kubeconfig its TalosCluster
        names; without one, in the operator's own cluster as the TalosCluster's account
        (``ichor.kube.accounts``), never as the operator."""
        ref = cluster.spec.kubeconfig_secret_ref
        account: ServiceAccount | None = None
        own = True
        try:
            if ref is None:
                account = await self._account(op, cluster)
                workload: ApiClient = impersonating(self.api, account)
            else:
                key = ref.key or DEFAULT_KUBECONFIG_KEY
                value = await read_secret_key(
                    self.api, namespace=op.namespace, name=ref.name, key=key
                )
                workload = await client_from_kubeconfig(
                    value.value,
                    origin=f"the kubeconfig in key {key!r} of Secret {op.namespace}/{ref.name}",
                    policy=self.credentials,
                )
                own = False
        except KubeconfigError as error:
            raise _Unrunnable(OperationReason.CREDENTIALS_UNUSABLE, str(error)) from error
        try:
            with refusal(accounts.NODES):
                listed = await errors.mapped(
                    client.CoreV1Api(workload).list_node(  # workload read
                        _request_timeout=REQUEST_TIMEOUT
                    )
                )
            items = _raw(workload, listed).get("items") or []
        except ReadRefused as error:
            said = (
                await refused_message(self.api, account, error)
                if account is not None
                else errors.describe(error)
            )
            raise Transient(
                f"the Nodes of the workload cluster of {cluster.name} cannot be read: {said}; "
                "the operation waits and tries again"
            ) from error
        except errors.FAILED as error:
            raise Transient(
                f"the Nodes of the workload cluster of {cluster.name} cannot be read "
                f"({errors.describe(error)}); the operation waits and tries again"
            ) from error
        finally:
            if not own:
                await workload.close()
        return list(items)

    async def _account(self, op: Operation, cluster: ClusterState) -> ServiceAccount:
        """The account that reads the operator's own cluster for ``cluster``, as the
        TalosCluster controller chooses it; none named when one is required: refused."""
        chosen = accounts.choose(
            namespace=op.namespace,
            spec=cluster.spec.service_account_name,
            fleet=accounts.fleet_default(await objects.get_installation(self.api)),
            required=self.tenants.require_service_account,
        )
        if isinstance(chosen, accounts.Unnamed):
            raise _Unrunnable(
                OperationReason.CREDENTIALS_UNUSABLE,
                f"TalosCluster {cluster.name}'s Nodes are not read: {chosen.message}; "
                "then create the operation again",
            )
        return chosen

    async def _read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await batch.get_job(self.api, namespace=namespace, name=name)

    async def _pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        try:
            return await batch.job_pods(self.api, namespace=namespace, job=job)
        except errors.ApiError as error:
            # Narrower than errors.FAILED on purpose: an answer (RBAC, say) costs only the
            # failed container's log lines in the message; no answer at all retries the
            # whole step, as every other call of the step does.
            logger.info("pods of Job %s/%s not read: %s", namespace, job, error)
            return []

    async def _site_policy(self) -> SitePolicy:
        """The site's policy (the IchorInstallation's ``spec.policy``), read the way the
        webhook and the TalosCluster controller read it."""
        return Installation.from_body(await objects.get_installation(self.api)).policy

    async def _cluster(self, op: Operation) -> tuple[dict[str, Any], ClusterState]:
        """The operation's TalosCluster, as its body and as read (``ValueError``: it
        cannot be read); ``_Unrunnable`` once it is deleted."""
        body = await self._read_cluster(op)
        if body is None:
            raise _Unrunnable(
                OperationReason.CLUSTER_NOT_FOUND,
                f"TalosCluster {op.spec.cluster_ref.name} was deleted",
            )
        return body, ClusterState.from_body(body)

    async def _read_cluster(self, op: Operation) -> dict[str, Any] | None:
        return await objects.get(
            self.api,
            kind=kinds.Kind.TALOS_CLUSTER,
            name=op.spec.cluster_ref.name,
            namespace=op.namespace,
        )

    # --- writes ---------------------------------------------------------------------------

    async def _write(self, op: Operation, status: TalosOperationStatus) -> Operation:
        """Write the status difference, guarded by the resourceVersion it came from, with
        the Events the step owes (``lifecycle.owed_events``); then post them."""
        owes = lifecycle.owed_events(op, status, now=_now())
        if owes:
            status = status.model_copy(
                update={"pending_events": owed.merged(status.pending_events, owes)}
            )
        patch = merge_patch(op.raw_status, status.to_api())
        if not patch:
            return op
        if self.before_write is not None:
            await self.before_write(op)
        try:
            written = await patching.patch_status(
                self.api,
                kind=kinds.Kind.TALOS_OPERATION,
                name=op.name,
                namespace=op.namespace,
                status_patch=patch,
                resource_version=op.resource_version,
            )
        except errors.Conflict as error:
            raise Moved(f"{op} moved before its status was written") from error
        except errors.NotFound as error:
            raise Moved(f"{op} is gone") from error
        op = Operation.from_body(written)
        return await self._flush(op) if owing.owes(written) else op

    async def _finalizer(self, op: Operation, *, add: bool) -> Operation:
        """Add or remove the operation's finalizer, guarded by the version read."""
        try:
            written = await patching.set_finalizer(
                self.api,
                kind=kinds.Kind.TALOS_OPERATION,
                name=op.name,
                namespace=op.namespace,
                finalizers=op.finalizers,
                finalizer=lifecycle.FINALIZER,
                present=add,
                resource_version=op.resource_version,
            )
        except (errors.NotFound, errors.Conflict) as error:
            raise Moved(f"{op} moved before its finalizers were written") from error
        return op if written is None else Operation.from_body(written)

    async def _add_finalizer(self, op: Operation) -> Operation:
        return await self._finalizer(op, add=True)

    async def _release(self, op: Operation) -> None:
        """Drop the finalizer; for an operation being deleted while Running, stop its Job."""
        if lifecycle.FINALIZER not in op.finalizers:
            return
        if op.deleting and op.phase is Phase.RUNNING:
            name = op.status.job_name or jobs.job_name(
                operation=op.name, uid=op.uid, type_=op.spec.type
            )
            with contextlib.suppress(errors.NotFound):
                await batch.delete_job(self.api, namespace=op.namespace, name=name)
            message = (
                f"{op} was deleted while Running: its Job {name} is stopped (a node in the "
                f"middle of its upgrade finishes it on its own); the TalosCluster spec is "
                f"unchanged"
            )
            # owed before the finalizer goes: a restart in between still posts it
            op = await self._write(op, lifecycle.stopped(op, message=message, now=_now()))
        await self._finalizer(op, add=False)

    async def _flush(self, op: Operation) -> Operation:
        """Post the Events ``op`` owes and remove them (``ichor.kube.owing``)."""
        try:
            written = await owing.flush(
                self.api,
                kind=kinds.Kind.TALOS_OPERATION,
                body=op.body,
                about=lambda: self._read_cluster(op),
            )
        except errors.NotFound as error:
            raise Moved(f"{op} is gone") from error
        return op if written is None else Operation.from_body(written)


@dataclass(frozen=True)
class _Step:
    """One step of a Talos operation node by node: the nodes as recorded, the batch it
    upgrades, its TalosCluster (read, and as its body) and the talosconfig to mount."""

    nodes: OperationNodes
    current: tuple[PlannedNode, ...]
    cluster: ClusterState
    cluster_body: Mapping[str, Any]
    talosconfig: jobs.SecretMount

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.current)

    @property
    def said(self) -> str:
        return nodesteps.named(self.names)


@dataclass(frozen=True)
class _Reading:
    """The nodes' images are being read; ``message`` says by which Job."""

    message: str


class _Refused(Exception):
    """Refused before any node is touched, by a rule no override passes (the spec
    fixes it): written ``Failure.REFUSED``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class _Unrunnable(Exception):
    """The operation cannot run as the cluster is set up (not a version rule)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


#: How the refusal of a TalosCluster that names no talosconfig ends, before a claim.
_NO_TALOSCONFIG = ", so talosctl has no credentials; set it and create the operation again"


def _unmade(
    op: Operation, started: Sequence[str], node: str, job: Mapping[str, Any] | None
) -> bool:
    """Killed between the write that started ``node`` and its Job's create: the Job is
    not there and the latest write is still that one (``NodeJobCreating``; any later
    write says the Job was seen), so the create is made now."""
    complete = next((c for c in op.status.conditions if c.type == lifecycle.Complete), None)
    return (
        job is None
        and list(started[-1:]) == [node]
        and complete is not None
        and complete.reason == OperationReason.NODE_JOB_CREATING
    )


def _owned_by(job: Mapping[str, Any], op: Operation) -> bool:
    owners = (job.get("metadata") or {}).get("ownerReferences") or ()
    return any(owner.get("uid") == op.uid for owner in owners)


def _no_nodes(cluster: ClusterState, nodes: jobs.NodeList, *, control_plane: bool = False) -> str:
    what = "control plane Node" if control_plane else "Node"
    message = f"the workload cluster of TalosCluster {cluster.name} shows no {what} to upgrade"
    if nodes.unaddressable:
        message += f" with an address ({', '.join(nodes.unaddressable)} have none)"
    return message
