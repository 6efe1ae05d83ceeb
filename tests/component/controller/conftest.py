"""The controller in-process against the real test API server.

The "workload cluster" of a TalosCluster without a kubeconfig Secret is the API server
the operator talks to, read as the default ServiceAccount of the test's namespace (bound
to the chart's ``ichor-tenant-reader`` by ``objects``), so a test plays the workload by
creating Node objects (their status carries ``osImage`` and ``kubeletVersion``) and a
CNI DaemonSet. Nodes and
DaemonSets in ``kube-system`` are shared by every cluster, so the ``workload`` fixture
removes what a test created; tests of this folder run one at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
import pytest_asyncio
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.controller.taloscluster import wiring as cluster_wiring
from ichor.controller.taloscluster.reconciler import ClusterController
from ichor.settings import ControllerSettings, Settings
from tests.harness import account, controlplane
from tests.support import nodes
from tests.support import operator as support
from tests.support.operator import eventually as eventually  # tests import it from here

FAST = ControllerSettings(
    observe_interval=1.0, backoff_initial=0.5, backoff_max=2.0, observe_timeout=5.0, workers=8
)


class Operator:
    """A kopf run with the controller's handlers only (tests/support/operator.py)."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.registry = kopf.OperatorRegistry()
        cluster_wiring.register(self.registry, settings=Settings.from_env())
        self.memo = kopf.Memo()
        self.memo[cluster_wiring.SETTINGS] = settings
        self.kopf = support.KopfThread(self.registry, memo=self.memo)

    async def start(self) -> None:
        await self.kopf.astart()

    @property
    def controller(self) -> ClusterController:
        found = self.memo[cluster_wiring.CONTROLLER]
        assert isinstance(found, ClusterController)
        return found

    async def stop(self) -> None:
        await self.kopf.astop()


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    crds: None, operator_kubeconfig: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Operator]:
    """The operator running in-process; ``@pytest.mark.parametrize("operator", [settings],
    indirect=True)`` changes its settings."""
    settings = getattr(request, "param", FAST)
    running = Operator(settings)
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


class Workload:
    """Nodes and DaemonSets a test creates, removed afterwards."""

    def __init__(self, api: ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.nodes: set[str] = set()
        self.daemonsets: set[tuple[str, str]] = set()

    async def add_node(self, name: str, *, talos: str, kubelet: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {"nodeInfo": nodes.node_info(os_image=f"Talos ({talos})", kubelet=kubelet)},
        }
        await self.core.create_node(body)  # type: ignore[arg-type]
        self.nodes.add(name)
        # A Node's status may be dropped on create by some versions: set it explicitly.
        await self.set_node(name, os_image=f"Talos ({talos})", kubelet=kubelet)

    async def set_node(self, name: str, *, os_image: str, kubelet: str) -> None:
        patch = {"status": {"nodeInfo": nodes.node_info(os_image=os_image, kubelet=kubelet)}}
        await self.core.patch_node_status(name, patch)

    async def add_daemonset(self, name: str, *, image: str, namespace: str = "kube-system") -> None:
        labels = {"app": name}
        body = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "cilium-agent", "image": image}]},
                },
            },
        }
        await self.apps.create_namespaced_daemon_set(namespace, body)  # type: ignore[arg-type]
        self.daemonsets.add((namespace, name))

    async def set_daemonset_image(
        self, name: str, *, image: str, namespace: str = "kube-system"
    ) -> None:
        patch = {
            "spec": {
                "template": {"spec": {"containers": [{"name": "cilium-agent", "image": image}]}}
            }
        }
        await self.apps.patch_namespaced_daemon_set(name, namespace, patch)

    async def clean(self) -> None:
        for name in self.nodes:
            await _ignore_missing(self.core.delete_node(name))
        for namespace, name in self.daemonsets:
            await _ignore_missing(self.apps.delete_namespaced_daemon_set(name, namespace))
        self.nodes.clear()
        self.daemonsets.clear()


async def _ignore_missing(call: Awaitable[Any]) -> None:
    try:
        await call
    except ApiException as error:
        if error.status != 404:
            raise


@pytest_asyncio.fixture(loop_scope="session")
async def workload(kube_api: ApiClient) -> AsyncIterator[Workload]:
    made = Workload(kube_api)
    # Leftovers of an interrupted run would change what every cluster observes.
    for node in (await made.core.list_node()).items:
        await _ignore_missing(made.core.delete_node(str(node.metadata and node.metadata.name)))
    try:
        yield made
    finally:
        await made.clean()


class Objects:
    """Ichor's objects of one test: TalosClusters in its namespace and the singleton."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace

    async def create_cluster(self, name: str, **spec: Any) -> dict[str, Any]:
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

    async def patch_cluster_spec(self, name: str, spec: dict[str, Any]) -> None:
        await self.custom.patch_namespaced_custom_object(
            kinds.GROUP,
            kinds.VERSION,
            self.namespace,
            kinds.Plural.TALOS_CLUSTERS,
            name,
            {"spec": spec},
            _content_type="application/merge-patch+json",
        )

    async def cluster(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.get_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_CLUSTERS, name
            ),
        )
        return found

    async def set_targets(self, targets: dict[str, Any] | None, *, enabled: bool = True) -> None:
        """Create or update the IchorInstallation and write its ``upgradeTargets``."""
        await support.apply_installation(
            self.custom, {"enabled": enabled}, {"upgradeTargets": targets}
        )


@pytest_asyncio.fixture(loop_scope="session")
async def objects(
    kube_api: ApiClient, namespace: str, control_plane: controlplane.ControlPlane
) -> AsyncIterator[Objects]:
    """The test's objects; the namespace's default ServiceAccount, which reads the test's
    clusters without a kubeconfig, holds the chart's ``ichor-tenant-reader``."""
    made = Objects(kube_api, namespace)
    binding = await asyncio.to_thread(
        account.bind_tenant_reader, control_plane, namespace=namespace
    )
    try:
        yield made
    finally:
        await asyncio.to_thread(account.unbind, control_plane, binding)
        # The namespace only goes Terminating (no controller manager deletes its
        # content), so remove the clusters or the next test's operator serves them too.
        await made.custom.delete_collection_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, namespace, kinds.Plural.TALOS_CLUSTERS
        )
        await _ignore_missing(
            made.custom.delete_cluster_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                kinds.Plural.ICHOR_INSTALLATIONS,
                kinds.INSTALLATION_NAME,
            )
        )


def condition(body: dict[str, Any], type_: str) -> dict[str, Any]:
    for found in (body.get("status") or {}).get("conditions") or ():
        if found.get("type") == type_:
            result: dict[str, Any] = found
            return result
    return {}
