"""The executors in-process against the real test API server.

kopf runs the TalosOperation executors and the TalosCluster controller in the test's
event loop, as the operator does. The workload cluster of a TalosCluster without a
kubeconfig Secret is the API server itself, read as the default ServiceAccount of the
test's namespace (``objects`` binds it), so the test plays it with Node objects
(addresses, the control-plane label, Talos and kubelet versions). No kubelet or Job
controller runs: the test plays a Job's outcome by writing the Job's status (and its
pod's container statuses) the way the Job controller and the kubelet would.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import kopf
import pytest_asyncio
from kubernetes.aio import client, config, watch
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.api import records as admission_records
from ichor.controller.recorder import wiring as recorder_wiring
from ichor.controller.taloscluster import wiring as cluster_wiring
from ichor.controller.talosoperation import jobs
from ichor.controller.talosoperation import wiring as operation_wiring
from ichor.controller.talosoperation.executor import OperationController
from ichor.settings import ControllerSettings, OperationSettings, Settings
from tests.harness import account, controlplane
from tests.support import credential_files, nodes, talos_reads
from tests.support import operator as support
from tests.support.operator import eventually as eventually  # tests import it from here

FAST_CLUSTERS = ControllerSettings(
    observe_interval=1.0, backoff_initial=0.5, backoff_max=2.0, observe_timeout=5.0, workers=4
)
#: Nodes that do not report the target 20 s after the Job fail the operation.
FAST = OperationSettings(
    resync_interval=2.0, retry_delay=0.5, workers=4, node_version_deadline=20.0
)
MERGE = "application/merge-patch+json"


class Operator:
    """kopf with the TalosCluster controller and the executors (tests/support/operator.py).

    ``stop`` then ``start`` is an operator restart, with a fresh memo.
    """

    def __init__(self, settings: OperationSettings = FAST) -> None:
        self.settings = settings
        self.registry = kopf.OperatorRegistry()
        running = Settings.from_env()
        cluster_wiring.register(self.registry, settings=running)
        operation_wiring.register(self.registry, settings=running)
        recorder_wiring.register(self.registry, settings=running)
        self.memo = kopf.Memo()
        self.kopf = support.KopfThread(self.registry, memo=self.memo)
        #: What each node runs, as the executor's read Jobs find it (played: no kubelet).
        self.reads = talos_reads.PlayedReads()

    async def start(self) -> Operator:
        self.memo = kopf.Memo()
        self.memo[cluster_wiring.SETTINGS] = FAST_CLUSTERS
        self.memo[operation_wiring.SETTINGS] = self.settings
        self.kopf.memo = self.memo
        await self.kopf.astart()
        await eventually(
            lambda: asyncio.sleep(0, operation_wiring.CONTROLLER in self.memo),
            bool,
            what="the executor started",
        )
        self.executor.read_output = self.reads.output
        return self

    @property
    def executor(self) -> OperationController:
        found = self.memo[operation_wiring.CONTROLLER]
        assert isinstance(found, OperationController)
        return found

    async def stop(self) -> None:
        await self.kopf.astop()


@pytest_asyncio.fixture(loop_scope="session")
async def operator(crds: None, operator_kubeconfig: Path) -> AsyncIterator[Operator]:
    running = await Operator().start()
    try:
        yield running
    finally:
        await running.stop()


async def _ignore_missing(call: Awaitable[Any]) -> None:
    try:
        await call
    except ApiException as error:
        if error.status != 404:
            raise


class Workload:
    """The workload cluster's Nodes (cluster-scoped, so removed after each test)."""

    def __init__(self, api: ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.nodes: set[str] = set()

    async def add_node(
        self,
        name: str,
        *,
        address: str,
        control_plane: bool = False,
        talos: str = "v1.14.3",
        kubelet: str = "v1.36.6",
    ) -> None:
        labels = {jobs.CONTROL_PLANE_LABEL: ""} if control_plane else {}
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        await self.core.create_node(body)  # type: ignore[arg-type]
        self.nodes.add(name)
        status = {
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": nodes.talos_node_info(talos=talos, kubelet=kubelet),
        }
        await self.core.patch_node_status(name, {"status": status})

    async def report(
        self, *, talos: str | None = None, kubelet: str | None = None, only: str | None = None
    ) -> None:
        """Every Node (or ``only`` one) reports ``talos`` and/or ``kubelet``, as a node
        booted into an upgrade (or a restarted kubelet) does."""
        info: dict[str, str] = {}
        if talos is not None:
            info["osImage"] = f"Talos ({talos})"
        if kubelet is not None:
            info["kubeletVersion"] = kubelet
        status: dict[str, Any] = {"nodeInfo": info}
        if talos is not None:
            # a node booted into an upgrade: its kubelet posts Ready again
            now = _rfc3339()
            status["conditions"] = [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
            ]  # fmt: skip
        for name in sorted(self.nodes) if only is None else [only]:
            await self.core.patch_node_status(name, {"status": status})

    async def clean(self) -> None:
        for name in self.nodes:
            await _ignore_missing(self.core.delete_node(name))
        self.nodes.clear()


@pytest_asyncio.fixture(loop_scope="session")
async def workload(kube_api: ApiClient) -> AsyncIterator[Workload]:
    """Three nodes: two control plane, one worker, on the pinned Talos and Kubernetes."""
    made = Workload(kube_api)
    for node in (await made.core.list_node()).items:
        await _ignore_missing(made.core.delete_node(str(node.metadata and node.metadata.name)))
    await made.add_node("ops-worker-1", address="10.0.0.11")
    await made.add_node("ops-cp-2", address="10.0.0.2", control_plane=True)
    await made.add_node("ops-cp-1", address="10.0.0.1", control_plane=True)
    try:
        yield made
    finally:
        await made.clean()


def _rfc3339(moment: datetime | None = None) -> str:
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


#: A talosconfig of a throwaway CA and client: what the executor checks before any Job.
TALOSCONFIG = credential_files.text(credential_files.talosconfig())


class Objects:
    """The test's TalosClusters, TalosOperations, Jobs and Events in its namespace."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(api)
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)

    async def create_cluster(self, name: str = "prod", **spec: Any) -> dict[str, Any]:
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{name}-talosconfig"},
            # a talosconfig the executor mounts: inline keys only (ichor.kube.credentials)
            "data": {"talosconfig": base64.b64encode(TALOSCONFIG.encode()).decode()},
        }
        await self.core.create_namespaced_secret(self.namespace, secret)  # type: ignore[arg-type]
        body = {
            "apiVersion": kinds.API_VERSION,
            "kind": kinds.Kind.TALOS_CLUSTER,
            "metadata": {"name": name},
            "spec": {
                "talosVersion": "v1.14.3",
                "kubernetesVersion": "v1.36.6",
                "versionContract": "v1.14",
                "talosconfigSecretRef": {"name": f"{name}-talosconfig"},
                **spec,
            },
        }
        created: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.create_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_CLUSTERS, body
            ),
        )
        return created

    async def cluster(self, name: str = "prod") -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.get_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_CLUSTERS, name
            ),
        )
        return found

    async def patch_cluster_spec(self, spec: dict[str, Any], name: str = "prod") -> None:
        await self.custom.patch_namespaced_custom_object(
            kinds.GROUP,
            kinds.VERSION,
            self.namespace,
            kinds.Plural.TALOS_CLUSTERS,
            name,
            {"spec": spec},
            _content_type=MERGE,
        )

    async def create_operation(
        self,
        name: str,
        type_: str,
        version: str | None = None,
        *,
        cluster: str = "prod",
        override: bool = False,
        override_by: str | None = "olivia",
    ) -> dict[str, Any]:
        """An operation as stored; with ``override`` it carries the stamp the webhook
        leaves on an operation it admitted under the verb (``override_by``; None: none,
        as on an operation that never met the webhook)."""
        spec: dict[str, Any] = {"clusterRef": {"name": cluster}, "type": type_}
        if version is not None:
            spec["version"] = version
        metadata: dict[str, Any] = {"name": name}
        if override:
            spec["override"] = True
            if override_by is not None:
                metadata["annotations"] = {admission_records.OVERRIDE_BY: override_by}
        body = {
            "apiVersion": kinds.API_VERSION,
            "kind": kinds.Kind.TALOS_OPERATION,
            "metadata": metadata,
            "spec": spec,
        }
        created: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.create_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_OPERATIONS, body
            ),
        )
        return created

    async def operation(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.get_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_OPERATIONS, name
            ),
        )
        return found

    async def operation_or_none(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.operation(name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    async def delete_operation(self, name: str) -> None:
        await self.custom.delete_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_OPERATIONS, name
        )

    async def jobs(self) -> list[dict[str, Any]]:
        listed = await self.batch.list_namespaced_job(self.namespace)
        items: list[dict[str, Any]] = self.api.sanitize_for_serialization(listed)["items"]
        return items

    async def job(self, name: str) -> dict[str, Any]:
        found = await self.batch.read_namespaced_job(name, self.namespace)
        body: dict[str, Any] = self.api.sanitize_for_serialization(found)
        return body

    async def play_job(self, name: str, *, succeeded: bool, message: str = "") -> None:
        """Write the Job's status as the Job controller does when its pod ends."""
        start = _rfc3339()
        await self.batch.patch_namespaced_job_status(
            name, self.namespace, {"status": {"startTime": start, "active": 1, "ready": 0}}
        )
        now = _rfc3339()
        if succeeded:
            status = {
                "active": 0,
                "ready": 0,
                "terminating": 0,
                "succeeded": 1,
                "completionTime": now,
                "conditions": [
                    _job_condition(
                        "SuccessCriteriaMet",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                        now,
                    ),
                    _job_condition(
                        "Complete",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                        now,
                    ),
                ],
                "uncountedTerminatedPods": {},
            }
        else:
            text = message or "Job has reached the specified backoff limit"
            status = {
                "active": 0,
                "ready": 0,
                "terminating": 0,
                "failed": 1,
                "conditions": [
                    _job_condition("FailureTarget", "BackoffLimitExceeded", text, now),
                    _job_condition("Failed", "BackoffLimitExceeded", text, now),
                ],
                "uncountedTerminatedPods": {},
            }
        await self.batch.patch_namespaced_job_status(name, self.namespace, {"status": status})

    async def play_failed_pod(self, job: str, *, container: str, log: str) -> None:
        """The Job's pod with ``container`` terminated in error, as the kubelet reports it."""
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{job}-x1", "labels": {"job-name": job}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "versions", "image": "example.invalid/talosctl"}],
            },
        }
        await self.core.create_namespaced_pod(self.namespace, body)  # type: ignore[arg-type]
        now = _rfc3339()
        status = {
            "phase": "Failed",
            "initContainerStatuses": [
                {
                    "name": container,
                    "image": "example.invalid/talosctl",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "message": log,
                            "startedAt": now,
                            "finishedAt": now,
                        }
                    },
                }
            ],
        }
        await self.core.patch_namespaced_pod_status(f"{job}-x1", self.namespace, {"status": status})

    async def events(self, name: str) -> list[dict[str, Any]]:
        listed = await self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}"
        )
        items: list[dict[str, Any]] = self.api.sanitize_for_serialization(listed)["items"]
        return items

    async def reasons(self, name: str) -> list[str]:
        return [e["reason"] for e in await self.events(name)]

    async def saw_events(self, name: str, *expected: str) -> list[str]:
        """Wait until Events with each reason were posted about ``name`` (posting follows
        the status write it reports)."""
        return await eventually(
            lambda: self.reasons(name),
            lambda found: set(expected) <= set(found),
            what=f"Events {expected} about {name}",
            within=10,
        )


def _job_condition(type_: str, reason: str, message: str, now: str) -> dict[str, str]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


@pytest_asyncio.fixture(loop_scope="session")
async def objects(
    kube_api: ApiClient, namespace: str, control_plane: controlplane.ControlPlane
) -> AsyncIterator[Objects]:
    """The test's objects; the namespace's default ServiceAccount, which reads the test's
    clusters (they have no kubeconfig), holds the chart's ``ichor-tenant-reader``."""
    binding = await asyncio.to_thread(
        account.bind_tenant_reader, control_plane, namespace=namespace
    )
    try:
        yield Objects(kube_api, namespace)
    finally:
        await asyncio.to_thread(account.unbind, control_plane, binding)


class Phases:
    """Every phase each operation of a namespace shows, in order, from a watch."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.seen: dict[str, list[str]] = {}
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        custom = client.CustomObjectsApi(self.api)
        while True:
            stream = watch.Watch()
            async with stream.stream(
                custom.list_namespaced_custom_object,
                kinds.GROUP,
                kinds.VERSION,
                self.namespace,
                kinds.Plural.TALOS_OPERATIONS,
                timeout_seconds=60,
            ) as events:
                async for event in events:
                    body = event["object"]
                    phase = (body.get("status") or {}).get("phase")
                    name = body["metadata"]["name"]
                    if phase is None:
                        continue
                    seen = self.seen.setdefault(name, [])
                    if not seen or seen[-1] != phase:
                        seen.append(phase)

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def saw(self, name: str, expected: list[str]) -> None:
        """Wait until the watch delivered the last phase expected, then compare all."""
        await eventually(
            lambda: asyncio.sleep(0, list(self.seen.get(name, []))),
            lambda seen: len(seen) >= len(expected) and seen[-1] == expected[-1],
            what=f"phases {expected} of {name}",
            within=10,
        )
        assert self.seen[name] == expected

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="session")
async def phases(control_plane: controlplane.ControlPlane, namespace: str) -> AsyncIterator[Phases]:
    # a client of its own: closing a watch closes the client it was made from
    api = await config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    recorder = Phases(api, namespace)
    recorder.start()
    await asyncio.sleep(0.2)
    try:
        yield recorder
    finally:
        await recorder.stop()
        await api.close()


def condition(body: dict[str, Any], type_: str) -> dict[str, Any]:
    for found in (body.get("status") or {}).get("conditions") or ():
        if found.get("type") == type_:
            result: dict[str, Any] = found
            return result
    return {}


def phase(body: dict[str, Any] | None) -> str | None:
    return ((body or {}).get("status") or {}).get("phase")


async def running_job(objects: Objects, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The operation once Running with its Job created, and that Job (for a Talos
    operation, the Job of the node it upgrades now: the first, control plane first)."""
    body = await eventually(
        lambda: objects.operation(name),
        lambda b: (
            condition(b, "Complete").get("reason") == "JobRunning"
            or (
                condition(b, "Complete").get("reason") == "NodesUpgrading"
                and bool(b["status"].get("jobName"))
            )
        ),
        what=f"{name} Running with its Job",
    )
    # a node's Job is named in the status before it is created (a restart creates it)
    listed = await eventually(
        objects.jobs,
        lambda found: any(j["metadata"]["name"] == body["status"]["jobName"] for j in found),
        what=f"Job {body['status']['jobName']} created",
    )
    (job,) = [j for j in listed if j["metadata"]["name"] == body["status"]["jobName"]]
    return body, job


def node_of(job: dict[str, Any]) -> str:
    """The Node a Talos operation's Job upgrades."""
    return str(job["metadata"]["annotations"][jobs.NODE_ANNOTATION])


async def node_job(objects: Objects, name: str, node: str) -> dict[str, Any]:
    """The Job of operation ``name`` that upgrades ``node``, once created."""

    async def find() -> dict[str, Any] | None:
        for job in await objects.jobs():
            annotations = job["metadata"].get("annotations") or {}
            if (
                annotations.get(jobs.OPERATION_ANNOTATION) == name
                and annotations.get(jobs.NODE_ANNOTATION) == node
            ):
                return job
        return None

    found = await eventually(find, lambda j: j is not None, what=f"the Job of {name} for {node}")
    assert found is not None
    return found


async def play_node(
    objects: Objects, workload: Workload, name: str, node: str, *, version: str
) -> dict[str, Any]:
    """``node`` upgraded by its Job: it reports ``version``, then the Job succeeds."""
    job = await node_job(objects, name, node)
    await workload.report(talos=version, only=node)
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    return job


async def play_nodes(
    objects: Objects, workload: Workload, name: str, *, version: str, nodes: list[str]
) -> dict[str, Any]:
    """Each of ``nodes`` upgraded in turn; the operation once it ended."""
    for node in nodes:
        await play_node(objects, workload, name, node, version=version)
    return await eventually(
        lambda: objects.operation(name),
        lambda b: phase(b) in ("Succeeded", "Failed"),
        what=f"{name} ended",
    )
