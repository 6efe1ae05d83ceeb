"""What tests/component/tenants/test_unreadable_versions.py runs on: a workload cluster of
its own (a second API server, tests.harness.controlplane) whose Nodes and Cilium DaemonSet
the tests write, reached by the operator through a kubeconfig Secret; the operator (the
TalosCluster controller, the executors and the recorder, tests/component/operations) as
the chart's identity; the webhook registered with the API server; and users with their
own client certificates.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds
from ichor.controller.talosoperation import jobs
from tests.component.operations.conftest import Objects, Operator
from tests.component.webhook import harness
from tests.harness import account, binaries, controlplane
from tests.support import credential_files, nodes, rbac

#: A talosconfig with inline keys only, which the executor reads before any Job.
TALOSCONFIG = credential_files.text(credential_files.talosconfig())

#: May read, write and delete TalosClusters, create TalosOperations, read Secrets (the
#: kubeconfig its cluster names); holds no override verb.
PLAIN = "nadia"
#: The same, and the override verb.
HOLDER = "olivia"
#: May write the status subresource of TalosClusters (which the webhook refuses).
FORGER = "mallory"
EDITOR_ROLE = "ichor-unreadable-test-editor"
OVERRIDE_ROLE = "ichor-unreadable-test-override"
STATUS_ROLE = "ichor-unreadable-test-status"

DIGEST_ONLY = "quay.io/cilium/cilium@sha256:" + "5" * 64
TAGGED = "quay.io/cilium/cilium:v1.20.4"
#: What the operator writes into status.cni.unreadable for DIGEST_ONLY.
SEEN = (
    "Cilium is running (DaemonSet kube-system/cilium) but its release cannot be read: "
    "the image is pinned by digest only and no deployed Helm release names its chart"
)


def _rbac() -> list[dict[str, Any]]:
    editor = rbac.cluster_role(
        EDITOR_ROLE,
        [
            {
                "apiGroups": [kinds.GROUP],
                "resources": ["talosclusters"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            },
            {
                "apiGroups": [kinds.GROUP],
                "resources": ["talosoperations", "ichorinstallations"],
                "verbs": ["get", "list", "watch", "create"],
            },
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
        ],
    )
    status = rbac.cluster_role(
        STATUS_ROLE,
        [
            {
                "apiGroups": [kinds.GROUP],
                "resources": ["talosclusters", "talosclusters/status"],
                "verbs": ["get", "update", "patch"],
            }
        ],
    )
    return [
        editor,
        status,
        rbac.override_role(OVERRIDE_ROLE),
        rbac.binding(EDITOR_ROLE, [PLAIN, HOLDER]),
        rbac.binding(OVERRIDE_ROLE, [HOLDER]),
        rbac.binding(STATUS_ROLE, [FORGER]),
    ]


@pytest.fixture(scope="module")
def users(control_plane: controlplane.ControlPlane) -> Iterator[dict[str, Path]]:
    """Kubeconfigs of nadia, olivia and mallory, each a client certificate of their own."""
    manifest = yaml.safe_dump_all(_rbac())
    control_plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield {user: control_plane.user_kubeconfig(user) for user in (PLAIN, HOLDER, FORGER)}
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


@pytest.fixture(scope="module")
def webhook(
    control_plane: controlplane.ControlPlane,
    crds: None,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    """The webhook in the API server's path; the operator runs the recorder itself."""
    with harness.running(
        control_plane, tmp_path_factory.mktemp("unreadable-webhook"), operator_account,
        recorder=False,
    ) as running:  # fmt: skip
        yield running


class Workload:
    """A workload cluster of its own: two Talos Nodes and the Cilium agent DaemonSet."""

    def __init__(self, plane: controlplane.ControlPlane) -> None:
        self.plane = plane

    def node(self, name: str, address: str, *, control_plane: bool) -> None:
        labels = {jobs.CONTROL_PLANE_LABEL: ""} if control_plane else {}
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        self.plane.kubectl("create", "-f", "-", input=json.dumps(body))
        status = {
            "addresses": [{"type": "InternalIP", "address": address}],
            "nodeInfo": nodes.talos_node_info(talos="v1.14.3", kubelet="v1.36.6"),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        }
        self.plane.kubectl(
            "patch", "node", name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}),
        )  # fmt: skip

    def cilium(self, image: str) -> None:
        """The Cilium agent DaemonSet runs ``image`` (created the first time)."""
        labels = {"k8s-app": "cilium"}
        body = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "cilium", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "cilium-agent", "image": image}]},
                },
            },
        }
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(body))

    def kubeconfig(self) -> str:
        """The admin's kubeconfig: inline certificates, one cluster and one context."""
        return self.plane.kubeconfig.read_text()


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workload]:
    plane = controlplane.ControlPlane(workdir=tmp_path_factory.mktemp("unreadable-workload"))
    try:
        plane.start()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        made = Workload(plane)
        made.node("unreadable-cp-1", "10.0.9.1", control_plane=True)
        made.node("unreadable-worker-1", "10.0.9.11", control_plane=False)
        made.cilium(TAGGED)
        yield made
    finally:
        plane.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def operator(crds: None, operator_kubeconfig: Path) -> AsyncIterator[Operator]:
    """The TalosCluster controller, the executors and the recorder, as the chart's account."""
    running = await Operator().start()
    try:
        yield running
    finally:
        await running.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def objects(kube_api: ApiClient, namespace: str) -> AsyncIterator[Objects]:
    made = Objects(kube_api, namespace)
    try:
        yield made
    finally:
        for plural in (kinds.Plural.TALOS_OPERATIONS, kinds.Plural.TALOS_CLUSTERS):
            await made.custom.delete_collection_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, namespace, plural
            )


async def workload_secret(objects: Objects, workload: Workload, name: str = "workload") -> str:
    """The workload's kubeconfig (and a talosconfig the executors' Jobs would mount) as a
    Secret of the test's namespace; returns its name."""
    data = {
        "kubeconfig": base64.b64encode(workload.kubeconfig().encode()).decode(),
        "talosconfig": base64.b64encode(TALOSCONFIG.encode()).decode(),
    }
    core = client.CoreV1Api(objects.api)
    await core.create_namespaced_secret(
        objects.namespace,
        {"metadata": {"name": name}, "data": data},  # type: ignore[arg-type]
    )
    return name


def cni(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = (body.get("status") or {}).get("cni") or {}
    return found
