"""An operation from kubectl to the end with the admission webhook in place: the plan,
the executor under override, and the spec update judged by the webhook as the operator."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import records
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
from tests.harness import account, controlplane
from tests.support import rbac, table

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def webhook(
    control_plane: controlplane.ControlPlane,
    crds: None,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    # the operator of these tests runs the recorder itself, as the real one does
    with harness.running(
        control_plane, tmp_path_factory.mktemp("operations-webhook"), operator_account,
        recorder=False,
    ) as running:  # fmt: skip
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
    await workload.report(kubelet="v1.37.1")
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


async def test_an_override_admitted_while_the_operator_is_down_is_recorded_when_it_returns(
    webhook: harness.Webhook,
    operator: Operator,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:
    """The record travels with the stored object: the replica that admitted the write
    (the webhook) is not the one that posts it (the operator's recorder), and an operator
    that was down when the write was stored posts it when it starts again."""

    def overrides(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in events if e["reason"] == "Override"]

    # stored under override (the admin holds every verb): Talos 1.14 runs 1.33 to 1.37
    await objects.create_cluster(kubernetesVersion="v1.31.5")
    await eventually(
        objects.cluster,
        lambda c: records.RECORDS not in records.annotations_of(c),
        what="the create's record posted",
    )
    before = len(overrides(await objects.events("prod")))
    await operator.stop()
    patched = control_plane.kubectl(
        "patch", "taloscluster", "prod", "-n", objects.namespace, "--type=merge",
        "-p", json.dumps({"spec": {"kubernetesVersion": "v1.32.0"}}),
    )  # fmt: skip
    assert "override by" in patched.stderr, patched.stderr
    stored = await objects.cluster()
    pending = records.read(records.annotations_of(stored))
    assert [r.kind for r in pending] == [records.RecordKind.OVERRIDE]
    assert len(overrides(await objects.events("prod"))) == before
    # not even the admin can drop the record before it is posted: only the operator may
    control_plane.kubectl(
        "annotate", "taloscluster", "prod", "-n", objects.namespace, f"{records.RECORDS}-"
    )
    kept = records.read(records.annotations_of(await objects.cluster()))
    assert kept == pending

    await operator.start()
    found = await eventually(
        lambda: objects.events("prod"),
        lambda events: len(overrides(events)) == before + 1,
        what="the Override Event posted once the operator runs again",
    )
    (event,) = [e for e in overrides(found) if "v1.32.0" in e["message"]]
    assert event["type"] == "Warning"
    assert "overrode a refusal of TalosCluster" in event["message"]
    cleared = await eventually(
        objects.cluster,
        lambda c: records.RECORDS not in records.annotations_of(c),
        what="the posted record removed",
    )
    assert cleared["spec"]["kubernetesVersion"] == "v1.32.0"


ADOPTER = "ada"


@pytest.fixture
def adopter(control_plane: controlplane.ControlPlane) -> Iterator[str]:
    """A user who may create and update TalosClusters, without the override verb."""
    role = "ichor-operations-test-adopter"
    manifest = yaml.safe_dump_all(
        [
            rbac.cluster_role(
                role,
                [
                    {
                        "apiGroups": ["ichor.dev"],
                        "resources": ["talosclusters"],
                        "verbs": ["get", "list", "create", "update", "patch"],
                    }
                ],
            ),
            rbac.binding(role, [ADOPTER]),
        ]
    )
    control_plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield ADOPTER
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


async def test_an_adopted_incompatible_pair_is_stored_as_it_runs_and_shown_incompatible(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    adopter: str,
) -> None:
    """An adoption by a user without the verb stores the pair the Nodes run (Talos
    v1.14.3, Kubernetes v1.32.4, which Talos 1.14 does not support), with a Warning
    Event naming the user; the status says VersionsCompatible=False with the reason; a
    later update is judged as any other."""
    for name in list(workload.nodes):
        await workload.core.patch_node_status(
            name, {"status": {"nodeInfo": {"kubeletVersion": "v1.32.4"}}}
        )
    body: dict[str, Any] = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {
            "name": "edge",
            "namespace": objects.namespace,
            "annotations": {records.ADOPTION: "true"},
        },
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.32.4",
            "versionContract": "v1.14",
        },
    }
    marked = json.loads(json.dumps(body))
    del marked["metadata"]["annotations"]
    plain = control_plane.kubectl(
        "create", "-f", "-", input=json.dumps(marked), as_user=adopter, check=False
    )
    assert plain.returncode != 0, "without the marker the pair needs the verb"
    adopted = control_plane.kubectl(
        "create", "-f", "-", input=json.dumps(body), as_user=adopter, check=False
    )
    assert adopted.returncode == 0, adopted.stderr
    assert "adopted as it runs (TalosKubernetes)" in adopted.stderr
    found = await eventually(
        lambda: objects.events("edge"),
        lambda events: any(e["reason"] == "AdoptedIncompatible" for e in events),
        what="the adoption's Warning Event",
    )
    (event,) = [e for e in found if e["reason"] == "AdoptedIncompatible"]
    assert event["type"] == "Warning"
    assert f"User {adopter} adopted TalosCluster {objects.namespace}/edge" in event["message"]
    observed = await eventually(
        lambda: objects.cluster("edge"),
        lambda c: condition(c, "VersionsCompatible").get("status") == "False",
        what="VersionsCompatible=False",
    )
    compatible = condition(observed, "VersionsCompatible")
    assert compatible["reason"] == "TalosKubernetesIncompatible"
    assert "1.33 to 1.37" in compatible["message"]
    # every later update is judged as today: still incompatible, so refused without the verb
    later = control_plane.kubectl(
        "patch", "taloscluster", "edge", "-n", objects.namespace, "--type=merge",
        "-p", json.dumps({"spec": {"kubernetesVersion": "v1.32.5"}}),
        as_user=adopter, check=False,
    )  # fmt: skip
    assert later.returncode != 0, later.stdout
    assert f"user '{adopter}' does not" in later.stderr
    # an unknown version is refused for an adoption too
    unknown = json.loads(json.dumps(body))
    unknown["metadata"]["name"] = "newer"
    unknown["spec"]["talosVersion"] = table.unknown_talos()
    refused = control_plane.kubectl(
        "create", "-f", "-", input=json.dumps(unknown), as_user=adopter, check=False
    )
    assert refused.returncode != 0
    assert f"Talos {table.unknown_talos()} is refused" in refused.stderr
