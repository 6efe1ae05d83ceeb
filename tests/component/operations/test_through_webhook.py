"""An operation from kubectl to the end with the admission webhook in place: the plan,
the executor under override, and the spec update judged by the webhook as the operator."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from ichor.testing import account, controlplane
from tests.component.operations.conftest import (
    Objects,
    Operator,
    Workload,
    condition,
    eventually,
    phase,
    running_job,
)
from tests.component.webhook import harness

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def webhook(
    control_plane: controlplane.ControlPlane,
    crds: None,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    with harness.running(
        control_plane, tmp_path_factory.mktemp("operations-webhook"), operator_account
    ) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="session")
async def cilium(kube_api: ApiClient) -> AsyncIterator[None]:
    """Cilium 1.20.4 runs on the workload cluster (its agent DaemonSet)."""
    apps = client.AppsV1Api(kube_api)
    labels = {"app": "cilium"}
    body = {
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
    await apps.create_namespaced_daemon_set("kube-system", body)  # type: ignore[arg-type]
    try:
        yield
    finally:
        try:
            await apps.delete_namespaced_daemon_set("cilium", "kube-system")
        except ApiException as error:
            if error.status != 404:
                raise


def manifest(namespace: str, *, override: bool) -> str:
    return json.dumps(
        {
            "apiVersion": "ichor.dev/v1alpha1",
            "kind": "TalosOperation",
            "metadata": {"name": "k8s", "namespace": namespace},
            "spec": {
                "clusterRef": {"name": "prod"},
                "type": "kubernetes",
                "version": "v1.37.1",
                "override": override,
            },
        }
    )


async def test_an_overridden_operation_runs_and_the_operator_records_the_spec_through_the_webhook(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    cilium: None,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:
    await objects.create_cluster()
    await eventually(
        objects.cluster,
        lambda c: ((c.get("status") or {}).get("cni") or {}).get("detectedVersion") == "1.20.4",
        what="Cilium 1.20.4 observed",
    )
    namespace = objects.namespace
    # the plan: Cilium 1.20 does not run Kubernetes 1.37
    plan = control_plane.kubectl(
        "create",
        "--dry-run=server",
        "-f",
        "-",
        input=manifest(namespace, override=False),
        check=False,
    )
    assert plan.returncode != 0
    assert "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36" in plan.stderr, plan.stderr
    # the admin holds the verb: the create passes with a warning and an Override Event
    created = control_plane.kubectl("create", "-f", "-", input=manifest(namespace, override=True))
    assert "override" in created.stderr.lower(), created.stderr

    body, job = await running_job(objects, "k8s")
    assert condition(body, "Accepted")["reason"] == "Overridden"
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    done = await eventually(
        lambda: objects.operation("k8s"), lambda b: phase(b) == "Succeeded", what="Succeeded"
    )
    assert "spec.kubernetesVersion is v1.37.1" in done["status"]["message"]
    assert (await objects.cluster())["spec"]["kubernetesVersion"] == "v1.37.1"
    # the webhook passed the operator's spec update under its verb and recorded it
    events = await eventually(
        lambda: objects.events("prod"),
        lambda found: any(e["reason"] == "Override" and "(update)" in e["message"] for e in found),
        what="the Override Event of the operator's spec update",
    )
    assert sum(e["reason"] == "Override" for e in events) >= 2
