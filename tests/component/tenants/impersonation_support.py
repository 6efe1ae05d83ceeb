"""What tests/component/tenants/test_impersonation.py sets up: the operator in-process as
the chart's identity with given tenant settings, tenant namespaces and their accounts,
a namespace holding a secret in a Pod's environment, and the Nodes every TalosCluster
without a kubeconfig reads (the management API server is its workload)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

import kopf
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.controller import running
from ichor.controller.taloscluster import wiring as cluster_wiring
from ichor.controller.talosoperation import jobs
from ichor.controller.talosoperation import wiring as operation_wiring
from ichor.settings import ControllerSettings, OperationSettings, Settings, TenantSettings
from tests.harness import account, controlplane
from tests.support import nodes, talos_reads
from tests.support import operator as support

MERGE = "application/merge-patch+json"
FAST_CLUSTERS = ControllerSettings(
    observe_interval=1.0, backoff_initial=0.5, backoff_max=2.0, observe_timeout=5.0, workers=4
)
FAST_OPERATIONS = OperationSettings(
    resync_interval=2.0, retry_delay=0.5, workers=2, node_version_deadline=20.0
)
#: The Nodes of the "workload" (the management cluster itself): name -> (address, role).
NODES = {"tn-cp-1": ("10.0.0.1", True), "tn-worker-1": ("10.0.0.11", False)}
#: What the fleet's release check listed (written as the IchorInstallation's status).
TARGETS = {"talos": ["v1.14.5", "v1.14.4", "v1.14.3"], "kubernetes": ["v1.36.7", "v1.36.6"]}


class Operator:
    """kopf with the TalosCluster controller and the executors, as the chart's account
    (``operator_kubeconfig``), with ``tenants`` for both."""

    def __init__(self, tenants: TenantSettings) -> None:
        self.registry = kopf.OperatorRegistry()
        settings = Settings.from_env()
        cluster_wiring.register(self.registry, settings=settings)
        operation_wiring.register(self.registry, settings=settings)
        self.memo = kopf.Memo()
        self.memo[cluster_wiring.SETTINGS] = FAST_CLUSTERS
        self.memo[operation_wiring.SETTINGS] = FAST_OPERATIONS
        self.memo[running.TENANT_SETTINGS] = tenants
        self.kopf = support.KopfThread(self.registry, memo=self.memo)

    async def start(self) -> Operator:
        await self.kopf.astart()
        await support.eventually(
            lambda: asyncio.sleep(0, operation_wiring.CONTROLLER in self.memo),
            bool,
            what="the executor started",
        )
        # no kubelet runs the executor's read Jobs here: their output is played
        self.memo[operation_wiring.CONTROLLER].read_output = talos_reads.PlayedReads().output
        return self

    async def stop(self) -> None:
        await self.kopf.astop()


async def ignore_missing(call: Awaitable[Any]) -> None:
    try:
        await call
    except ApiException as error:
        if error.status != 404:
            raise


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Workload:
    """The Nodes (cluster-scoped, so removed afterwards), Ready on the pinned versions."""

    def __init__(self, api: ApiClient) -> None:
        self.core = client.CoreV1Api(api)

    async def create(self) -> None:
        for node in (await self.core.list_node()).items:
            await ignore_missing(self.core.delete_node(str(node.metadata and node.metadata.name)))
        for name, (address, control_plane) in NODES.items():
            labels = {jobs.CONTROL_PLANE_LABEL: ""} if control_plane else {}
            body = {"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels}}  # fmt: skip
            await self.core.create_node(body)  # type: ignore[arg-type]
            status = {
                "addresses": [{"type": "InternalIP", "address": address}],
                "nodeInfo": nodes.talos_node_info(talos="v1.14.3", kubelet="v1.36.6"),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "ok", "lastHeartbeatTime": _now(),
                                "lastTransitionTime": _now()}],
            }  # fmt: skip
            await self.core.patch_node_status(name, {"status": status})

    async def clean(self) -> None:
        for name in NODES:
            await ignore_missing(self.core.delete_node(name))


class Tenants:
    """Namespaces made for one test, their ServiceAccounts and cluster-wide bindings, and
    the IchorInstallation; all removed afterwards."""

    def __init__(self, api: ApiClient, plane: controlplane.ControlPlane) -> None:
        self.api = api
        self.plane = plane
        self.core = client.CoreV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.namespaces: list[str] = []
        self.bindings: list[str] = []
        self.roles: list[str] = []

    async def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        await self.core.create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]
        self.namespaces.append(name)
        return name

    async def account(self, namespace: str, name: str) -> None:
        body = {"metadata": {"name": name}}
        await self.core.create_namespaced_service_account(namespace, body)  # type: ignore[arg-type]

    async def bind_reader(self, namespace: str, name: str) -> str:
        """The chart's ``ichor-tenant-reader`` bound to ``namespace/name``, as a platform
        admin binds it."""
        binding = await asyncio.to_thread(
            account.bind_tenant_reader, self.plane, namespace=namespace, name=name
        )
        self.bindings.append(binding)
        return binding

    async def unbind(self, binding: str) -> None:
        await asyncio.to_thread(account.unbind, self.plane, binding)

    async def cluster_role(
        self, name: str, rules: list[dict[str, Any]], subject: Mapping[str, str]
    ) -> None:
        """A ClusterRole ``name`` with ``rules``, bound (cluster-wide) to ``subject``."""
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": name}, "rules": rules}  # fmt: skip
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": name},
            "subjects": [dict(subject)],
        }  # fmt: skip
        await self.rbac.create_cluster_role(role)  # type: ignore[arg-type]
        await self.rbac.create_cluster_role_binding(binding)  # type: ignore[arg-type]
        self.roles.append(name)

    async def installation(self, spec: Mapping[str, Any]) -> None:
        """The IchorInstallation with ``spec`` and the release check's lists."""
        await support.apply_installation(self.custom, {"enabled": True})
        await self.custom.patch_cluster_custom_object(
            kinds.GROUP, kinds.VERSION, kinds.Plural.ICHOR_INSTALLATIONS,
            kinds.INSTALLATION_NAME, {"spec": dict(spec)},
            _content_type=MERGE,
        )  # fmt: skip
        await self.custom.patch_cluster_custom_object_status(
            kinds.GROUP, kinds.VERSION, kinds.Plural.ICHOR_INSTALLATIONS,
            kinds.INSTALLATION_NAME,
            {"status": {"upgradeTargets": {"checkedAt": _now(), **TARGETS}}},
            _content_type=MERGE,
        )  # fmt: skip

    async def create_cluster(self, namespace: str, name: str, **spec: Any) -> None:
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
        await self.custom.create_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, namespace, kinds.Plural.TALOS_CLUSTERS, body
        )

    async def patch_cluster(self, namespace: str, name: str, spec: Mapping[str, Any]) -> None:
        await self.custom.patch_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, namespace, kinds.Plural.TALOS_CLUSTERS, name,
            {"spec": dict(spec)}, _content_type=MERGE,
        )  # fmt: skip

    async def cluster(self, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.get_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, namespace, kinds.Plural.TALOS_CLUSTERS, name
            ),
        )
        return found

    async def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        listed = await self.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={name}"
        )
        return [{"type": e.type, "reason": e.reason, "message": e.message} for e in listed.items]

    async def clean(self) -> None:
        for namespace in self.namespaces:
            for plural in (kinds.Plural.TALOS_OPERATIONS, kinds.Plural.TALOS_CLUSTERS):
                await self.custom.delete_collection_namespaced_custom_object(
                    kinds.GROUP, kinds.VERSION, namespace, plural
                )
        for binding in self.bindings:
            await self.unbind(binding)
        for name in self.roles:
            await ignore_missing(self.rbac.delete_cluster_role_binding(name))
            await ignore_missing(self.rbac.delete_cluster_role(name))
        await ignore_missing(
            self.custom.delete_cluster_custom_object(
                kinds.GROUP, kinds.VERSION, kinds.Plural.ICHOR_INSTALLATIONS,
                kinds.INSTALLATION_NAME,
            )
        )  # fmt: skip
        for namespace in self.namespaces:
            # only Terminating (no controller manager): harmless, every name is new
            await ignore_missing(self.core.delete_namespace(namespace))


def condition(body: Mapping[str, Any], type_: str) -> dict[str, Any]:
    for found in (body.get("status") or {}).get("conditions") or ():
        if found.get("type") == type_:
            result: dict[str, Any] = found
            return result
    return {}
