"""What tests/component/tenants/test_fairness.py needs: the operator's controllers in
process as the chart's account, with the settings a test gives; TalosClusters and
TalosOperations of two namespaces; Nodes of the shared workload; and the API server's own
count of the requests it served (``apiserver_request_total``), to count writes."""

from __future__ import annotations

import asyncio
import base64
import datetime
import re
from collections.abc import Awaitable
from typing import Any, cast

import kopf
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.controller.taloscluster import wiring as cluster_wiring
from ichor.controller.taloscluster.reconciler import ClusterController
from ichor.controller.talosoperation import jobs
from ichor.controller.talosoperation import wiring as operation_wiring
from ichor.controller.talosoperation.executor import OperationController
from ichor.settings import ControllerSettings, OperationSettings, Settings
from tests.harness import controlplane
from tests.support import nodes, talos_reads
from tests.support import operator as support

MERGE = "application/merge-patch+json"


class Operator:
    """kopf with the TalosCluster controller and, given ``operations``, the executor."""

    def __init__(
        self, clusters: ControllerSettings, operations: OperationSettings | None = None
    ) -> None:
        self.registry = kopf.OperatorRegistry()
        running = Settings.from_env()
        cluster_wiring.register(self.registry, settings=running)
        if operations is not None:
            operation_wiring.register(self.registry, settings=running)
        self.memo = kopf.Memo()
        self.memo[cluster_wiring.SETTINGS] = clusters
        if operations is not None:
            self.memo[operation_wiring.SETTINGS] = operations
        self.operations = operations
        self.kopf = support.KopfThread(self.registry, memo=self.memo, name="fairness-operator")

    async def start(self) -> Operator:
        await self.kopf.astart()
        wanted = [cluster_wiring.CONTROLLER]
        if self.operations is not None:
            wanted.append(operation_wiring.CONTROLLER)
        await support.eventually(
            lambda: asyncio.sleep(0, all(key in self.memo for key in wanted)),
            bool,
            what="the controllers started",
        )
        if self.operations is not None:
            # no kubelet runs the executor's read Jobs here: their output is played
            self.executor.read_output = talos_reads.PlayedReads().output
        return self

    @property
    def clusters(self) -> ClusterController:
        found = self.memo[cluster_wiring.CONTROLLER]
        assert isinstance(found, ClusterController)
        return found

    @property
    def executor(self) -> OperationController:
        found = self.memo[operation_wiring.CONTROLLER]
        assert isinstance(found, OperationController)
        return found

    async def stop(self) -> None:
        await self.kopf.astop()


async def ignore_missing(call: Awaitable[Any]) -> None:
    try:
        await call
    except ApiException as error:
        if error.status != 404:
            raise


class Tenant:
    """One namespace's objects, written with ``api`` (the admin unless a test says)."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    async def secret(self, name: str, key: str, text: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "data": {key: base64.b64encode(text.encode()).decode()},
        }
        await self.core.create_namespaced_secret(self.namespace, body)  # type: ignore[arg-type]

    async def cluster(self, name: str, **spec: Any) -> dict[str, Any]:
        body = {
            "apiVersion": kinds.API_VERSION,
            "kind": kinds.Kind.TALOS_CLUSTER,
            "metadata": {"name": name},
            "spec": {
                "talosVersion": "v1.14.3",
                "kubernetesVersion": "v1.36.6",
                "versionContract": "v1.14",
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

    async def read_cluster(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.get_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_CLUSTERS, name
            ),
        )
        return found

    async def patch_cluster_spec(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        written: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.patch_namespaced_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                self.namespace,
                kinds.Plural.TALOS_CLUSTERS,
                name,
                {"spec": spec},
                _content_type=MERGE,
            ),
        )
        return written

    async def clusters(self) -> list[dict[str, Any]]:
        listed: Any = await self.custom.list_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_CLUSTERS
        )
        items: list[dict[str, Any]] = listed["items"]
        return items

    @staticmethod
    def operation_body(name: str, type_: str, version: str | None, cluster: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"clusterRef": {"name": cluster}, "type": type_}
        if version is not None:
            spec["version"] = version
        return {
            "apiVersion": kinds.API_VERSION,
            "kind": kinds.Kind.TALOS_OPERATION,
            "metadata": {"name": name},
            "spec": spec,
        }

    async def operation(
        self, name: str, type_: str, version: str | None, *, cluster: str
    ) -> dict[str, Any]:
        created: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.create_namespaced_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                self.namespace,
                kinds.Plural.TALOS_OPERATIONS,
                self.operation_body(name, type_, version, cluster),
            ),
        )
        return created

    async def read_operation(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.get_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_OPERATIONS, name
            ),
        )
        return found

    async def operations(self) -> list[dict[str, Any]]:
        listed: Any = await self.custom.list_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_OPERATIONS
        )
        items: list[dict[str, Any]] = listed["items"]
        return items

    async def delete_operation(self, name: str) -> None:
        await self.custom.delete_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_OPERATIONS, name
        )

    async def clean(self) -> None:
        """Remove the operations (their finalizers first) and the clusters: the namespace
        only goes Terminating, and the next test's operator would serve them."""
        for op in await self.operations():
            name = op["metadata"]["name"]
            if op["metadata"].get("finalizers"):
                await ignore_missing(
                    self.custom.patch_namespaced_custom_object(
                        kinds.GROUP,
                        kinds.VERSION,
                        self.namespace,
                        kinds.Plural.TALOS_OPERATIONS,
                        name,
                        {"metadata": {"finalizers": None}},
                        _content_type=MERGE,
                    )
                )
        await self.custom.delete_collection_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_OPERATIONS
        )
        await self.custom.delete_collection_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_CLUSTERS
        )


class Nodes:
    """Nodes of the workload (cluster-scoped: removed afterwards)."""

    def __init__(self, api: ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.names: set[str] = set()

    async def clear(self) -> None:
        for node in (await self.core.list_node()).items:
            await ignore_missing(self.core.delete_node(str(node.metadata and node.metadata.name)))

    async def add(
        self, name: str, *, address: str, control_plane: bool = False, talos: str = "v1.14.3"
    ) -> None:
        labels = {jobs.CONTROL_PLANE_LABEL: ""} if control_plane else {}
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        await self.core.create_node(body)  # type: ignore[arg-type]
        self.names.add(name)
        status = {
            "addresses": [{"type": "InternalIP", "address": address}],
            "nodeInfo": nodes.talos_node_info(talos=talos, kubelet="v1.36.6"),
        }
        await self.core.patch_node_status(name, {"status": status})

    async def report(self, *, talos: str) -> None:
        """Each Node booted into ``talos``: its kubelet posts Ready again (a Talos
        operation checks both after each node)."""
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip
        for name in sorted(self.names):
            status = {"nodeInfo": {"osImage": f"Talos ({talos})"}, "conditions": [ready]}
            await self.core.patch_node_status(name, {"status": status})

    async def clean(self) -> None:
        for name in self.names:
            await ignore_missing(self.core.delete_node(name))
        self.names.clear()


# --- the API server's count of what it served -----------------------------------------------

_LABEL = re.compile(r'(\w+)="([^"]*)"')


def served(plane: controlplane.ControlPlane) -> dict[tuple[str, str, str], float]:
    """``apiserver_request_total`` of successful requests (2xx), summed by verb, resource
    and subresource."""
    text = plane.kubectl("get", "--raw", "/metrics").stdout
    counts: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
        labels = dict(_LABEL.findall(labels_text))
        if not labels.get("code", "").startswith("2"):
            continue
        key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
        counts[key] = counts.get(key, 0.0) + float(value)
    return counts


def delta(
    before: dict[tuple[str, str, str], float],
    after: dict[tuple[str, str, str], float],
    verb: str,
    resource: str,
    subresource: str = "",
) -> int:
    key = (verb, resource, subresource)
    return round(after.get(key, 0.0) - before.get(key, 0.0))
