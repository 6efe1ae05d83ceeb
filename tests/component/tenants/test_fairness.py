"""One tenant cannot slow the others (docs/security.md, "One tenant cannot slow the
others"), on the real API server with the operator as the chart's account.

* 40 TalosClusters of namespace A name addresses that accept and never answer, stall
  TLS, never answer HTTP, or trickle their answer; a healthy cluster of namespace B is
  still reconciled within its bound: B waits for no worker (A's clusters run on at most
  ``workers - 1``), so its change reaches its status within its own reconcile, which
  ``observe_timeout`` bounds.
* Queued operations per cluster are capped at admission (``ICHOR_MAX_QUEUED_OPERATIONS``)
  for everyone, and a burst of 1,000 creates at once leaves no more than the cap queued.
* With a cap-sized queue, a change of the head writes a constant number of statuses and
  Events (counted by the API server), not one per waiting operation.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes.aio import client, config
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.api.queue_limits import MAX_QUEUED
from ichor.api.talosoperation import queued_on
from ichor.settings import ControllerSettings, OperationSettings
from tests.component.tenants.fairness_support import Nodes, Operator, Tenant, delta, served
from tests.component.webhook import harness
from tests.harness import account, controlplane
from tests.support import credential_files, hostile, rbac
from tests.support.operator import eventually

#: A talosconfig with inline keys only, which the executor reads before any Job.
TALOSCONFIG = credential_files.text(credential_files.talosconfig())

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

#: The TalosCluster controller as the attack met it, with a short deadline so the test is
#: quick: eight workers, a read bounded by 5 s, failed reads retried within 2 s (so A's
#: clusters are always due again and queued).
CLUSTERS = ControllerSettings(
    observe_interval=1.0, backoff_initial=0.5, backoff_max=2.0, observe_timeout=5.0, workers=8
)
#: The stated bound: B's change reaches its status within one reconcile of B, and a
#: reconcile's reads of a workload end by ``observe_timeout``.
BOUND = CLUSTERS.observe_timeout
BLACKHOLES = 40

OPERATIONS = OperationSettings(resync_interval=2.0, retry_delay=0.5, workers=4)
TENANT = "tina"
TENANT_ROLE = "ichor-fairness-tenant"


# --- namespaces, the workload and the operator -----------------------------------------


@pytest.fixture
def other_namespace(control_plane: controlplane.ControlPlane) -> Iterator[str]:
    name = f"fairness-b-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest_asyncio.fixture(loop_scope="session")
async def workload_nodes(kube_api: ApiClient) -> AsyncIterator[Nodes]:
    made = Nodes(kube_api)
    await made.clear()  # leftovers of another folder would change what is observed
    await made.add("fair-cp-1", address="10.0.0.1", control_plane=True)
    try:
        yield made
    finally:
        await made.clean()


@pytest_asyncio.fixture(loop_scope="session")
async def tenant_a(kube_api: ApiClient, namespace: str) -> AsyncIterator[Tenant]:
    made = Tenant(kube_api, namespace)
    try:
        yield made
    finally:
        await made.clean()


@pytest_asyncio.fixture(loop_scope="session")
async def tenant_b(kube_api: ApiClient, other_namespace: str) -> AsyncIterator[Tenant]:
    made = Tenant(kube_api, other_namespace)
    try:
        yield made
    finally:
        await made.clean()


def _observed(body: dict[str, Any]) -> bool:
    status = body.get("status") or {}
    return bool(status.get("observedGeneration") == body["metadata"]["generation"])


def _unreachable(body: dict[str, Any]) -> bool:
    for condition in (body.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("reason") == "WorkloadUnreachable")
    return False


async def _spec_change_seen(tenant: Tenant, name: str, version: str) -> float:
    """Seconds from a spec change of ``name`` to its status saying it saw it."""
    started = time.monotonic()
    written = await tenant.patch_cluster_spec(name, {"talosVersion": version})
    generation = written["metadata"]["generation"]
    await eventually(
        lambda: tenant.read_cluster(name),
        lambda b: (b.get("status") or {}).get("observedGeneration") == generation,
        within=120,
        what=f"{name}'s status at generation {generation}",
    )
    return time.monotonic() - started


# --- slow workloads ---------------------------------------------------------------------


async def test_forty_blackholes_in_one_namespace_do_not_slow_another_namespace(
    crds: None,
    operator_kubeconfig: Path,
    control_plane: controlplane.ControlPlane,
    workload_nodes: Nodes,
    tenant_a: Tenant,
    tenant_b: Tenant,
) -> None:
    # B: a healthy workload (the test API server, through a kubeconfig Secret)
    await tenant_b.secret("workload", "kubeconfig", control_plane.kubeconfig.read_text())
    await tenant_b.cluster("healthy", kubeconfigSecretRef={"name": "workload"})
    operator = await Operator(CLUSTERS).start()
    most_in_a = 0
    sampling = True

    async def sample() -> None:
        nonlocal most_in_a
        while sampling:
            most_in_a = max(most_in_a, operator.clusters.queue.running_in(tenant_a.namespace))
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    try:
        async with (
            hostile.serving(hostile.Kind.SILENT) as silent,
            hostile.serving(hostile.Kind.TLS_STALL) as stall,
            hostile.serving(hostile.Kind.HTTP_SILENT) as mute,
            hostile.serving(hostile.Kind.TRICKLE) as trickle,
        ):
            await eventually(lambda: tenant_b.read_cluster("healthy"), _observed, what="B observed")
            quiet = [
                await _spec_change_seen(tenant_b, "healthy", version)
                for version in ("v1.14.4", "v1.14.3")
            ]

            # A: 40 clusters at hostile addresses, ten of each kind
            servers = [silent, stall, mute, trickle]
            for n in range(BLACKHOLES):
                server = servers[n % len(servers)]
                await tenant_a.secret(f"hole-{n}", "kubeconfig", server.kubeconfig())
                await tenant_a.cluster(f"hole-{n}", kubeconfigSecretRef={"name": f"hole-{n}"})
            # every one has been tried and failed once: from now on they are retried
            # within 2 s of each failure, so A's keys keep the queue full
            await eventually(
                tenant_a.clusters,
                lambda items: len(items) == BLACKHOLES and all(map(_unreachable, items)),
                within=BLACKHOLES * CLUSTERS.observe_timeout,
                what="every cluster of A failed once",
            )
            assert all(s.accepted > 0 for s in servers)

            attacked = [
                await _spec_change_seen(tenant_b, "healthy", version)
                for version in ("v1.14.4", "v1.14.3", "v1.14.4")
            ]
    finally:
        sampling = False
        await sampler
        await operator.stop()
    print(
        f"\nfairness: B's spec change seen in {max(quiet):.2f} s alone, "
        f"{max(attacked):.2f} s (worst of {len(attacked)}) with {BLACKHOLES} clusters of A "
        f"at hostile addresses; bound {BOUND:.0f} s (observe_timeout); A ran at most "
        f"{most_in_a} of {CLUSTERS.workers} workers (share {CLUSTERS.group_workers})"
    )
    assert max(attacked) <= BOUND, f"B waited {max(attacked):.1f} s behind A's clusters"
    assert most_in_a == CLUSTERS.group_workers


# --- queued operations ------------------------------------------------------------------


@pytest.fixture(scope="module")
def webhook(
    control_plane: controlplane.ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    """The webhook as the chart runs it (its default cap), registered for this module."""
    with harness.running(
        control_plane, tmp_path_factory.mktemp("webhook"), operator_account, recorder=False
    ) as running:
        yield running


@pytest.fixture(scope="module")
def tenant_user(control_plane: controlplane.ControlPlane) -> Iterator[Path]:
    """A tenant who may write clusters and operations (and nothing cluster-wide)."""
    manifest = yaml.safe_dump_all(
        [
            rbac.cluster_role(
                TENANT_ROLE,
                [
                    {
                        "apiGroups": [kinds.GROUP],
                        "resources": ["talosclusters", "talosoperations"],
                        "verbs": ["get", "list", "watch", "create", "delete"],
                    }
                ],
            ),
            rbac.binding(TENANT_ROLE, [TENANT]),
        ]
    )
    control_plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield control_plane.user_kubeconfig(TENANT)
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


def _create(
    plane: controlplane.ControlPlane,
    body: dict[str, Any],
    namespace: str,
    *,
    user: Path | None,
    dry_run: bool = False,
) -> subprocess.CompletedProcess[str]:
    args = ["create", "-n", namespace, "-f", "-"]
    if dry_run:
        args.append("--dry-run=server")
    return plane.kubectl(*args, input=json.dumps(body), kubeconfig=user, check=False)


async def test_operations_past_the_cap_are_refused_at_admission_for_everyone(
    crds: None,
    control_plane: controlplane.ControlPlane,
    webhook: harness.Webhook,
    tenant_user: Path,
    tenant_a: Tenant,
) -> None:
    ns = tenant_a.namespace
    await tenant_a.cluster("prod")
    for n in range(MAX_QUEUED):
        body = Tenant.operation_body(f"up-{n:02d}", "talos", "v1.14.4", "prod")
        made = _create(control_plane, body, ns, user=tenant_user)
        assert made.returncode == 0, made.stderr
    sentence = (
        f"TalosOperation {ns}/one-more is refused: TalosCluster {ns}/prod already has "
        f"{MAX_QUEUED} operations not finished, the most one cluster queues "
        "(ICHOR_MAX_QUEUED_OPERATIONS); wait for them to finish or delete the queued ones "
        "you no longer need, then create it again."
    )
    one_more = Tenant.operation_body("one-more", "talos", "v1.14.4", "prod")
    for user, dry_run in ((tenant_user, False), (tenant_user, True), (None, False)):
        refused = _create(control_plane, one_more, ns, user=user, dry_run=dry_run)
        assert refused.returncode != 0, f"admitted past the cap (user {user}, dry {dry_run})"
        assert sentence in refused.stderr, refused.stderr
    assert await tenant_a.read_cluster("prod")  # the cluster is untouched
    assert len(await tenant_a.operations()) == MAX_QUEUED
    # another cluster of the namespace has its own queue
    await tenant_a.cluster("staging")
    other = Tenant.operation_body("staging-up", "talos", "v1.14.4", "staging")
    assert _create(control_plane, other, ns, user=tenant_user).returncode == 0
    # the step the sentence names: delete a queued one, and the create is admitted
    await tenant_a.delete_operation("up-19")
    admitted = _create(control_plane, one_more, ns, user=tenant_user)
    assert admitted.returncode == 0, admitted.stderr


async def test_a_thousand_creates_at_once_leave_at_most_the_cap_queued(
    crds: None,
    operator_kubeconfig: Path,
    control_plane: controlplane.ControlPlane,
    webhook: harness.Webhook,
    tenant_user: Path,
    workload_nodes: Nodes,
    tenant_a: Tenant,
) -> None:
    ns = tenant_a.namespace
    await tenant_a.secret("prod-talosconfig", "talosconfig", TALOSCONFIG)
    await tenant_a.secret("prod-kubeconfig", "kubeconfig", control_plane.kubeconfig.read_text())
    await tenant_a.cluster(
        "prod",
        talosconfigSecretRef={"name": "prod-talosconfig"},
        kubeconfigSecretRef={"name": "prod-kubeconfig"},
    )
    operator = await Operator(CLUSTERS, OPERATIONS).start()
    outcomes: dict[str, int] = {}
    try:
        api = await config.new_client_from_config(config_file=str(tenant_user))
        async with api:
            custom = client.CustomObjectsApi(api)
            gate = asyncio.Semaphore(25)

            async def create(n: int) -> None:
                body = Tenant.operation_body(f"burst-{n:04d}", "talos", "v1.14.4", "prod")
                async with gate:
                    try:
                        await custom.create_namespaced_custom_object(
                            kinds.GROUP, kinds.VERSION, ns, kinds.Plural.TALOS_OPERATIONS, body
                        )
                        kind = "admitted"
                    except ApiException as error:
                        said = str(error.body or "")
                        kind = "queue full" if "ICHOR_MAX_QUEUED_OPERATIONS" in said else "other"
                outcomes[kind] = outcomes.get(kind, 0) + 1

            started = time.monotonic()
            await asyncio.gather(*(create(n) for n in range(1000)))
            took = time.monotonic() - started

        # whatever raced past the count is refused by the executor the first time it looks
        stored = await eventually(
            tenant_a.operations,
            lambda items: (
                sum(queued_on(op, "prod") for op in items) <= MAX_QUEUED
                and all((op.get("status") or {}).get("phase") for op in items)
            ),
            within=120,
            what=f"at most {MAX_QUEUED} operations queued on prod",
        )
    finally:
        await operator.stop()
    print(
        f"\nfairness: 1,000 creates at once in {took:.1f} s: {outcomes}; "
        f"{len(stored)} stored, {sum(queued_on(op, 'prod') for op in stored)} queued"
    )
    assert outcomes.get("admitted", 0) >= MAX_QUEUED
    assert outcomes.get("queue full", 0) > 0
    assert sum(outcomes.values()) == 1000
    past = [op for op in stored if not queued_on(op, "prod")]
    for op in past:
        status = op["status"]
        assert status["phase"] == "Failed"
        assert "ICHOR_MAX_QUEUED_OPERATIONS" in status["message"], status["message"]


async def test_a_change_of_the_head_writes_a_constant_number_of_times(
    crds: None,
    operator_kubeconfig: Path,
    control_plane: controlplane.ControlPlane,
    workload_nodes: Nodes,
    tenant_a: Tenant,
    kube_api: ApiClient,
) -> None:
    ns = tenant_a.namespace
    await tenant_a.secret("prod-talosconfig", "talosconfig", TALOSCONFIG)
    await tenant_a.secret("prod-kubeconfig", "kubeconfig", control_plane.kubeconfig.read_text())
    await tenant_a.cluster(
        "prod",
        talosconfigSecretRef={"name": "prod-talosconfig"},
        kubeconfigSecretRef={"name": "prod-kubeconfig"},
    )
    operator = await Operator(CLUSTERS, OPERATIONS).start()
    batch = client.BatchV1Api(kube_api)
    try:
        # a cap-sized queue: the head runs, the others wait
        await tenant_a.operation("q-00", "talos", "v1.14.4", cluster="prod")
        await asyncio.sleep(1.1)  # creation times are whole seconds: keep the order
        await tenant_a.operation("q-01", "kubernetes", "v1.37.1", cluster="prod")
        await asyncio.sleep(1.1)
        for n in range(2, MAX_QUEUED):
            await tenant_a.operation(f"q-{n:02d}", "talos", "v1.14.5", cluster="prod")
        waiting = await eventually(
            tenant_a.operations,
            lambda items: (
                sum(_condition(op, "Accepted") == "Waiting" for op in items) == MAX_QUEUED - 1
            ),
            within=60,
            what="the queue waiting",
        )
        head = next(op for op in waiting if op["metadata"]["name"] == "q-00")
        job = head["status"]["jobName"]
        await asyncio.sleep(2)  # quiet: nothing more is written while the queue waits

        before = served(control_plane)
        events_before = await _operation_events(kube_api, ns)
        await workload_nodes.report(talos="v1.14.4")
        await _play_success(batch, job, ns)
        await eventually(
            lambda: tenant_a.read_operation("q-01"),
            lambda b: _condition(b, "Complete") == "JobRunning",
            within=60,
            what="the next operation running",
        )
        await eventually(
            lambda: tenant_a.read_operation("q-02"),
            lambda b: "q-01 (kubernetes to v1.37.1, Running)" in b["status"]["message"],
            within=30,
            what="the one behind it naming it",
        )
        await asyncio.sleep(3)  # whatever else the change writes has been written
        after = served(control_plane)
        events_after = await _operation_events(kube_api, ns)
    finally:
        await operator.stop()
    statuses = delta(before, after, "PATCH", "talosoperations", "status")
    events = delta(before, after, "POST", "events")
    on_operations = events_after - events_before
    print(
        f"\nfairness: the head of {MAX_QUEUED} operations changed: {statuses} status "
        f"PATCHes of talosoperations, {events} Events in all, {on_operations} of them on "
        "TalosOperations"
    )
    # q-00, its one node's Job done: Verifying, its etcd check runs, the node done,
    # SpecUpdating, Succeeded; q-01: Checking (etcd before upgrade-k8s), JobCreating,
    # JobRunning; q-02: its new message: 9.
    # Events on operations: q-00 Succeeded, q-01 Started, q-02 Waiting (and on the cluster
    # UpgradeSucceeded, UpgradeStarted, and what the cluster's controller says of its new
    # spec). A little room for a step a 409 made run again; none per waiting operation
    # (19 wait here). Each Event is owed by the status first (``status.pendingEvents``,
    # so a kill cannot lose it) and removed from it once posted: one more PATCH for each
    # Event on an operation.
    assert on_operations <= 4, on_operations
    assert statuses <= 11 + on_operations, (statuses, on_operations)
    assert events <= 10, events
    messages = {
        op["metadata"]["name"]: op["status"]["message"] for op in await tenant_a.operations()
    }
    assert f"waits for TalosOperation {ns}/q-02" in messages["q-03"]


def _condition(body: dict[str, Any], type_: str) -> str | None:
    for condition in (body.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_:
            reason = condition.get("reason")
            return str(reason) if reason is not None else None
    return None


async def _operation_events(api: ApiClient, namespace: str) -> int:
    """Events about TalosOperations in ``namespace``, each counted as often as it came."""
    listed = await client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector="involvedObject.kind=TalosOperation"
    )
    return sum(event.count or 1 for event in listed.items)


async def _play_success(batch: client.BatchV1Api, job: str, namespace: str) -> None:
    """Write the Job's status as the Job controller does when its pod succeeds."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    await batch.patch_namespaced_job_status(
        job, namespace, {"status": {"startTime": now, "active": 1, "ready": 0}}
    )
    await batch.patch_namespaced_job_status(job, namespace, {"status": _job_succeeded(now)})


def _job_succeeded(now: str) -> dict[str, Any]:
    reached = "Reached expected number of succeeded pods"
    return {
        "active": 0,
        "ready": 0,
        "terminating": 0,
        "succeeded": 1,
        "completionTime": now,
        "conditions": [
            _job_condition("SuccessCriteriaMet", "CompletionsReached", reached, now),
            _job_condition("Complete", "CompletionsReached", reached, now),
        ],
        "uncountedTerminatedPods": {},
    }


def _job_condition(type_: str, reason: str, message: str, now: str) -> dict[str, str]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
