"""The Headlamp plugin in a real browser against the real API server.

The API server runs the CRDs, Ichor's webhook (registered, mutual TLS) and the operator
(the TalosCluster controller, the executors and the recorder of admitted overrides) as
the chart's ServiceAccount. The workload is the API server itself, played by Node objects
and a Cilium DaemonSet (as in tests/component/operations), so the status the page reads
is the one the operator wrote. ``nadia`` may read Ichor's kinds and create operations;
``olivia`` also holds the override verb. Each reaches the page through a Headlamp
backend stand-in (tests/harness/headlamp.py) presenting her own client certificate.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from tests.component.cli.conftest import KUBERNETES_TAGS, TALOS_TAGS
from tests.component.operations.conftest import Objects, Operator, Workload, eventually
from tests.component.webhook import harness
from tests.harness import account, controlplane, headlamp
from tests.harness.registry import OFFLINE_REPOSITORIES
from tests.support import rbac

PLAIN = "nadia"
HOLDER = "olivia"
READER_ROLE = "ichor-ui-test-user"
OVERRIDE_ROLE = "ichor-ui-test-override"


def missing_parts(plugin: Path = headlamp.PLUGIN, chromium: str | None = None) -> list[str]:
    """What the browser test needs that is not there (each with what builds it)."""
    browser = chromium or headlamp.chromium_path()
    wanted = {
        "node (Node.js 20)": shutil.which("node") is not None,
        "ui/headlamp/node_modules/playwright-core": (
            plugin / "node_modules" / "playwright-core" / "package.json"
        ).is_file(),
        "ui/headlamp/node_modules/axe-core": (
            plugin / "node_modules" / "axe-core" / "axe.min.js"
        ).is_file(),
        "ui/headlamp/dist/main.js (the plugin)": (plugin / "dist" / "main.js").is_file(),
        "ui/headlamp/build/harness (the host page)": (
            plugin / "build" / "harness" / "index.html"
        ).is_file(),
        f"{browser} (Debian's chromium)": Path(browser).is_file(),
    }
    return [name for name, present in wanted.items() if not present]


@pytest.fixture(scope="module")
def built() -> None:
    """Fails, never skips, naming what to build."""
    missing = missing_parts()
    if missing:
        pytest.fail(
            f"the browser test needs {', '.join(missing)}: run `make ui` "
            "(npm ci from ui/headlamp's lockfile, the builds, and Debian's chromium)",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def webhook(
    control_plane: controlplane.ControlPlane,
    crds: None,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    # the operator below runs the recorder itself, as the real one does
    with harness.running(
        control_plane, tmp_path_factory.mktemp("ui-webhook"), operator_account, recorder=False
    ) as running:
        yield running


def _rbac() -> list[dict[str, Any]]:
    user = rbac.cluster_role(
        READER_ROLE,
        [
            {
                "apiGroups": [kinds.GROUP],
                "resources": ["talosclusters", "talosoperations", "ichorinstallations"],
                "verbs": ["get", "list", "watch"],
            },
            {"apiGroups": [kinds.GROUP], "resources": ["talosoperations"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
            # Headlamp's own page of a custom resource reads its definition
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "verbs": ["get", "list", "watch"],
            },
        ],
    )
    return [
        user,
        rbac.override_role(OVERRIDE_ROLE),
        rbac.binding(READER_ROLE, [PLAIN, HOLDER]),
        rbac.binding(OVERRIDE_ROLE, [HOLDER]),
    ]


@pytest.fixture(scope="module")
def users(control_plane: controlplane.ControlPlane) -> Iterator[dict[str, Path]]:
    """Kubeconfigs of nadia and olivia, each with a client certificate of her own."""
    manifest = yaml.safe_dump_all(_rbac())
    control_plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield {
            PLAIN: control_plane.user_kubeconfig(PLAIN),
            HOLDER: control_plane.user_kubeconfig(HOLDER),
        }
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


@pytest_asyncio.fixture(loop_scope="session")
async def operator(crds: None, operator_kubeconfig: Path) -> AsyncIterator[Operator]:
    running = await Operator().start()
    try:
        yield running
    finally:
        await running.stop()


async def _ignore_missing(call: Any) -> None:
    try:
        await call
    except ApiException as error:
        if error.status != 404:
            raise


@pytest_asyncio.fixture(loop_scope="session")
async def workload(kube_api: ApiClient) -> AsyncIterator[Workload]:
    """Three Talos v1.14.3 Nodes on Kubernetes v1.36.6 and a Cilium 1.20.4 agent."""
    made = Workload(kube_api)
    apps = client.AppsV1Api(kube_api)
    for node in (await made.core.list_node()).items:
        await _ignore_missing(made.core.delete_node(str(node.metadata and node.metadata.name)))
    await made.add_node("ui-cp-1", address="10.0.0.1", control_plane=True)
    await made.add_node("ui-cp-2", address="10.0.0.2", control_plane=True)
    await made.add_node("ui-worker-1", address="10.0.0.11")
    labels = {"app": "cilium"}
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "cilium-agent", "image": "quay.io/cilium/cilium:v1.20.4"}
                    ]
                },
            },
        },
    }
    await apps.create_namespaced_daemon_set("kube-system", daemonset)  # type: ignore[arg-type]
    try:
        yield made
    finally:
        await _ignore_missing(apps.delete_namespaced_daemon_set("cilium", "kube-system"))
        await made.clean()


@pytest.fixture
def installation(
    control_plane: controlplane.ControlPlane, operator_account: account.Account
) -> Iterator[None]:
    """The IchorInstallation with the release lists a check would have recorded (the
    CLI tests' lists), written as the operator; removed afterwards."""
    body = {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.ICHOR_INSTALLATION.value,
        "metadata": {"name": kinds.INSTALLATION_NAME},
        "spec": {"releaseCheck": {"enabled": True, **OFFLINE_REPOSITORIES}},
    }
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(body))
    operator_account.patch_status(
        server=control_plane.server, ca_file=control_plane.ca_file,
        plural=kinds.Plural.ICHOR_INSTALLATIONS.value, name=kinds.INSTALLATION_NAME,
        namespace=None,
        status={
            "upgradeTargets": {
                "checkedAt": "2026-12-03T08:00:00Z",
                "talos": TALOS_TAGS,
                "kubernetes": KUBERNETES_TAGS,
            }
        },
    )  # fmt: skip
    try:
        yield
    finally:
        control_plane.kubectl(
            "delete", "ichorinstallation", kinds.INSTALLATION_NAME, "--ignore-not-found",
            "--wait=false",
        )  # fmt: skip


@pytest_asyncio.fixture(loop_scope="session")
async def observed(
    built: None,
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    installation: None,
    users: dict[str, Path],
    kube_api: ApiClient,
    namespace: str,
    control_plane: controlplane.ControlPlane,
) -> AsyncIterator[Objects]:
    """TalosCluster ``prod``, once the operator has written its versions and choices. The
    namespace's default ServiceAccount reads it (it has no kubeconfig), so it holds the
    chart's ``ichor-tenant-reader``, as in tests/component/operations."""
    binding = account.bind_tenant_reader(control_plane, namespace=namespace)
    try:
        yield await _observed(kube_api, namespace)
    finally:
        account.unbind(control_plane, binding)


async def _observed(kube_api: ApiClient, namespace: str) -> Objects:
    objects = Objects(kube_api, namespace)
    await objects.create_cluster()

    def ready(cluster: dict[str, Any]) -> bool:
        status = cluster.get("status") or {}
        choices = (status.get("upgradeChoices") or {}).get("kubernetes") or {}
        return (
            (status.get("cni") or {}).get("detectedVersion") == "1.20.4"
            and bool(choices.get("default"))
            and bool((status.get("blockedReleases") or {}).get("nearest"))
        )

    await eventually(objects.cluster, ready, what="prod's choices written", within=60)
    return objects
