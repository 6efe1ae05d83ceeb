"""Auto-patch against the real API server, the webhook and the executors, the operator
running as the chart's ServiceAccount: a window opens and the patches run, Talos then
Kubernetes; nothing starts outside a window, during another operation, for a next minor
or for a patch younger than minReleaseAge; a failed patch suspends the cluster and halts
the version for the fleet; resume works; a restart inside a window starts no second
operation; nobody but the operator writes the record."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
import pytest_asyncio
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds
from ichor.api.autopatch import RESUME_ANNOTATION
from ichor.api.talosoperation import STARTED_BY_LABEL
from tests.component.operations.conftest import (
    MERGE,
    Objects,
    Operator,
    Workload,
    condition,
    eventually,
    phase,
    play_nodes,
    running_job,
)
from tests.component.operations.test_through_webhook import cilium, webhook  # noqa: F401
from tests.component.webhook import harness
from tests.harness import account, controlplane
from tests.support import nodes, table
from tests.support.operator import apply_installation

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

OPEN = {"schedule": "* * * * *", "duration": "2h"}
TARGETS = {
    "talos": [table.unknown_talos(), "v1.14.5", "v1.14.4", "v1.14.3"],
    "kubernetes": ["v1.37.1", "v1.36.7", "v1.36.6"],
}


def closed_window() -> dict[str, str]:
    later = datetime.now(UTC) + timedelta(hours=12)
    return {"schedule": f"0 {later.hour} * * *", "duration": "1h"}


def auto_patch(**fields: Any) -> dict[str, Any]:
    return {
        "components": ["talos", "kubernetes"],
        "windows": [OPEN],
        "minReleaseAge": "0m",
        **fields,
    }


class Fleet:
    """The IchorInstallation singleton: its lists (written as the operator, the only one
    the webhook lets write status) and its auto-patch settings and record."""

    def __init__(self, api: ApiClient, control_plane: controlplane.ControlPlane,
                 operator_account: account.Account) -> None:  # fmt: skip
        self.custom = client.CustomObjectsApi(api)
        self.control_plane = control_plane
        self.account = operator_account

    async def status(self, status: dict[str, Any]) -> None:
        await asyncio.to_thread(
            self.account.patch_status, server=self.control_plane.server,
            ca_file=self.control_plane.ca_file, plural="ichorinstallations",
            name=kinds.INSTALLATION_NAME, namespace=None, status=status,
        )  # fmt: skip

    async def settings(self, auto_patch: dict[str, Any] | None) -> None:
        await self.custom.patch_cluster_custom_object(
            kinds.GROUP, kinds.VERSION, kinds.Plural.ICHOR_INSTALLATIONS,
            kinds.INSTALLATION_NAME, {"spec": {"autoPatch": auto_patch}},
            _content_type=MERGE,
        )  # fmt: skip

    async def body(self) -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.get_cluster_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                kinds.Plural.ICHOR_INSTALLATIONS,
                kinds.INSTALLATION_NAME,
            ),
        )
        return found


@pytest_asyncio.fixture(loop_scope="session")
async def fleet(
    kube_api: ApiClient, control_plane: controlplane.ControlPlane,
    operator_account: account.Account, webhook: harness.Webhook,  # noqa: F811
) -> AsyncIterator[Fleet]:  # fmt: skip
    made = Fleet(kube_api, control_plane, operator_account)
    await apply_installation(made.custom, {"enabled": True})
    checked = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await made.status({"upgradeTargets": {"checkedAt": checked, **TARGETS}, "autoPatch": None})
    await made.settings({"maxConcurrentClusters": 5})
    try:
        yield made
    finally:
        await made.settings(None)
        await made.status({"autoPatch": None})


@pytest_asyncio.fixture(loop_scope="session")
async def ready(workload: Workload, cilium: None) -> AsyncIterator[Workload]:  # noqa: F811
    """The workload's Nodes Ready (a kubelet would say so) and Cilium running."""
    for name in workload.nodes:
        await workload.core.patch_node_status(
            name, {"status": {"conditions": [_ready_condition()]}}
        )
    yield workload


def _ready_condition() -> dict[str, str]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
            "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip


async def set_versions(workload: Workload, *, talos: str, kubelet: str) -> None:
    """The Nodes after a real upgrade: they report the new version."""
    for name in workload.nodes:
        await workload.core.patch_node_status(
            name, {"status": {"nodeInfo": nodes.talos_node_info(talos=talos, kubelet=kubelet)}}
        )


async def operations(objects: Objects) -> list[dict[str, Any]]:
    listed: Any = await objects.custom.list_namespaced_custom_object(
        kinds.GROUP, kinds.VERSION, objects.namespace, kinds.Plural.TALOS_OPERATIONS
    )
    items: list[dict[str, Any]] = listed["items"]
    return items


async def auto_operations(objects: Objects, cluster: str = "prod") -> list[dict[str, Any]]:
    return [
        o for o in await operations(objects)
        if o["metadata"].get("labels", {}).get(STARTED_BY_LABEL) == "auto-patch"
        and o["spec"]["clusterRef"]["name"] == cluster
    ]  # fmt: skip


async def quiet(objects: Objects, *, seconds: float = 6.0, cluster: str = "prod") -> None:
    """Several decisions pass (the controller looks every second here): none starts."""
    await asyncio.sleep(seconds)
    assert await auto_operations(objects, cluster) == []


def auto_status(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = (body.get("status") or {}).get("autoPatch") or {}
    return found


async def the_reason(objects: Objects, reason: str, cluster: str = "prod") -> dict[str, Any]:
    return await eventually(
        lambda: objects.cluster(cluster),
        lambda b: condition(b, "AutoPatchReady").get("reason") == reason,
        what=f"AutoPatchReady {reason}",
    )


async def stop(objects: Objects, *clusters: str) -> None:
    """Suspend auto-patch of ``clusters`` before a test deletes their operations: an open
    window would otherwise start again, and an operation that fails while its namespace
    goes would halt its version for the next tests."""
    for name in clusters:
        await objects.patch_cluster_spec({"autoPatch": {"suspended": True}}, name=name)
        await the_reason(objects, "Suspended", cluster=name)


async def test_an_open_window_patches_talos_then_kubernetes_unattended(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects
) -> None:
    await objects.create_cluster(autoPatch=auto_patch())
    (talos,) = await eventually(lambda: auto_operations(objects), lambda ops: len(ops) == 1,
                                what="the Talos patch started")  # fmt: skip
    assert talos["spec"] == {"clusterRef": {"name": "prod"}, "type": "talos",
                             "version": "v1.14.5", "override": False}  # fmt: skip
    assert talos["metadata"]["ownerReferences"][0]["kind"] == "TalosCluster"
    name = talos["metadata"]["name"]
    _, job = await running_job(objects, name)
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    # the first node's Job succeeded but it does not report v1.14.5 yet: the operation
    # waits for it (the spec with it), and Kubernetes waits for the operation
    await eventually(
        lambda: objects.operation(name),
        lambda b: "waits until Node ops-cp-1 reports v1.14.3" in b["status"].get("message", ""),
        what="the Talos patch waiting for the Nodes",
    )
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.3"
    assert len(await auto_operations(objects)) == 1
    # meanwhile a node joins from the old image (not one the Job upgraded)
    await ready.add_node("ops-worker-9", address="10.0.0.19", talos="v1.14.3")
    await ready.core.patch_node_status(
        "ops-worker-9", {"status": {"conditions": [_ready_condition()]}}
    )
    await ready.report(talos="v1.14.5", only="ops-cp-1")
    done = await play_nodes(objects, ready, name, version="v1.14.5",
                            nodes=["ops-cp-2", "ops-worker-1"])  # fmt: skip
    assert phase(done) == "Succeeded", done["status"]
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.5"
    # the nodes do not all report v1.14.5: Kubernetes waits for them (the gate reads the
    # last observation: all on v1.14.3 then, or the two versions since)
    waiting = await the_reason(objects, "NodesDiffer")
    message = condition(waiting, "AutoPatchReady")["message"]
    assert ("spec says v1.14.5" in message) or ("Talos v1.14.3, v1.14.5" in message), message
    assert len(await auto_operations(objects)) == 1
    await ready.core.delete_node("ops-worker-9")
    ready.nodes.discard("ops-worker-9")
    ops = await eventually(lambda: auto_operations(objects), lambda ops: len(ops) == 2,
                           what="the Kubernetes patch started")  # fmt: skip
    (kube,) = [o for o in ops if o["spec"]["type"] == "kubernetes"]
    assert kube["spec"]["version"] == "v1.36.7"  # the patch, never the next minor v1.37.1
    _, job = await running_job(objects, kube["metadata"]["name"])
    await set_versions(ready, talos="v1.14.5", kubelet="v1.36.7")
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    await eventually(objects.cluster, lambda b: b["spec"]["kubernetesVersion"] == "v1.36.7",
                     what="the Kubernetes patch applied")  # fmt: skip
    done = await the_reason(objects, "UpToDate")
    assert auto_status(done)["lastRun"]["result"] == "Succeeded"
    assert auto_status(done)["windowOpen"] is True
    await eventually(
        lambda: objects.reasons("prod"),
        lambda reasons: reasons.count("AutoPatchStarted") == 2,
        what="one AutoPatchStarted Event per start",
    )
    assert len(await auto_operations(objects)) == 2  # and nothing more: a next minor is not taken
    await set_versions(ready, talos="v1.14.3", kubelet="v1.36.6")


async def test_nothing_starts_outside_a_window(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects
) -> None:
    await objects.create_cluster(autoPatch=auto_patch(windows=[closed_window()]))
    body = await the_reason(objects, "WindowClosed")
    assert auto_status(body)["windowOpen"] is False
    assert auto_status(body)["nextWindow"]["start"]
    await quiet(objects)


async def test_nothing_starts_during_another_operation(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects
) -> None:
    await objects.create_cluster(autoPatch=auto_patch(suspended=True))
    await objects.create_operation("by-nadia", "talos", "v1.14.4")
    await running_job(objects, "by-nadia")
    await objects.patch_cluster_spec({"autoPatch": {"suspended": False}})
    body = await the_reason(objects, "OperationRunning")
    assert "by-nadia" in condition(body, "AutoPatchReady")["message"]
    await quiet(objects)
    await stop(objects, "prod")
    await objects.delete_operation("by-nadia")


async def test_a_refused_or_unknown_version_starts_nothing(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects
) -> None:
    """The list holds a Talos unknown to this build and Kubernetes v1.37.1
    (Cilium 1.20 does not run it): on the newest patches, nothing is left to take.

    And a refused *patch*: a cluster adopted on Kubernetes v1.32 (Talos machinery let it
    reach Talos 1.14, whose support matrix runs Kubernetes 1.33 to 1.37). The list holds
    Talos v1.14.4 and v1.14.5, newer patches of the minor it runs, and the pair with its
    Kubernetes refuses both: offered to nobody, started by nobody. Were the refusal not
    applied, v1.14.5 would be picked and the cluster would wait at a gate
    (VersionsIncompatible), never UpToDate."""
    await set_versions(ready, talos="v1.14.5", kubelet="v1.36.7")
    try:
        await objects.create_cluster(
            talosVersion="v1.14.5", kubernetesVersion="v1.36.7", autoPatch=auto_patch()
        )
        body = await the_reason(objects, "UpToDate")
        assert body["status"]["blockedReleases"]["count"] >= 1  # refused, said, not taken
        await quiet(objects)
        await stop(objects, "prod")
        await set_versions(ready, talos="v1.14.3", kubelet="v1.32.9")
        # the pair is refused: the create passes as the admin holds the override verb
        await objects.create_cluster(
            "adopted", talosVersion="v1.14.3", kubernetesVersion="v1.32.9",
            autoPatch=auto_patch(components=["talos"]),
        )  # fmt: skip
        body = await the_reason(objects, "UpToDate", cluster="adopted")
        assert body["status"]["upgradeChoices"]["talos"]["patch"] == []
        blocked = body["status"]["blockedReleases"]
        assert blocked["count"] >= 2, blocked  # v1.14.4 and v1.14.5, refused and said
        (talos,) = [line for line in blocked["nearest"] if line["component"] == "talos"]
        assert talos["version"] in ("v1.14.4", "v1.14.5"), blocked  # a patch, refused
        assert talos["blocker"] == "Kubernetes", blocked  # by the pair
        await quiet(objects, cluster="adopted")
    finally:
        await set_versions(ready, talos="v1.14.3", kubelet="v1.36.6")


async def test_only_a_next_minor_starts_nothing(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects
) -> None:
    await set_versions(ready, talos="v1.13.9", kubelet="v1.35.5")
    try:
        await objects.create_cluster(
            talosVersion="v1.13.9", kubernetesVersion="v1.35.5", versionContract="v1.13",
            autoPatch=auto_patch(),
        )  # fmt: skip
        body = await the_reason(objects, "UpToDate")
        choices = body["status"]["upgradeChoices"]
        assert "v1.14.5" in choices["talos"]["nextMinor"]  # offered to a person, not taken
        assert "v1.36.7" in choices["kubernetes"]["nextMinor"]
        assert choices["talos"]["patch"] == []
        await quiet(objects)
    finally:
        await set_versions(ready, talos="v1.14.3", kubelet="v1.36.6")


async def test_a_patch_younger_than_min_release_age_waits(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects
) -> None:
    await objects.create_cluster(autoPatch=auto_patch(minReleaseAge="72h"))
    body = await the_reason(objects, "WaitingForReleaseAge")
    assert "younger than minReleaseAge 72h" in condition(body, "AutoPatchReady")["message"]
    seen = (await fleet.body())["status"]["autoPatch"]["seen"]
    assert {"talos", "kubernetes"} == {s["component"] for s in seen}
    await quiet(objects)


async def test_a_failed_patch_suspends_the_cluster_halts_the_version_and_resume_retries(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:  # fmt: skip
    second = auto_patch(components=["talos"], suspended=True)
    await objects.create_cluster("edge", autoPatch=second)
    await objects.create_cluster(autoPatch=auto_patch(components=["talos"]))
    (failing,) = await eventually(lambda: auto_operations(objects), lambda ops: len(ops) == 1,
                                  what="the Talos patch started")  # fmt: skip
    name = failing["metadata"]["name"]
    _, job = await running_job(objects, name)
    # the upgrade ran on a node and failed (only such a failure halts the version)
    await objects.play_failed_pod(
        job["metadata"]["name"], container="upgrade-000", log="node cp-1 did not boot"
    )
    await objects.play_job(
        job["metadata"]["name"], succeeded=False, message="node cp-1 did not boot"
    )
    body = await the_reason(objects, "PatchFailed")
    assert auto_status(body)["suspension"]["operation"] == name
    message = condition(body, "AutoPatchReady")["message"]
    assert f"{RESUME_ANNOTATION}={name}" in message
    assert condition(body, "AutoPatchReady")["status"] == "False"
    events = await objects.saw_events("prod", "AutoPatchFailed")
    assert events
    halts = await eventually(fleet.body, lambda b: b["status"]["autoPatch"].get("halts"),
                             what="the halt recorded")  # fmt: skip
    (halt,) = halts["status"]["autoPatch"]["halts"]
    assert (halt["version"], halt["cluster"]) == ("v1.14.5", f"{objects.namespace}/prod")
    # the second cluster is halted for v1.14.5 and takes the older patch instead
    await objects.patch_cluster_spec({"autoPatch": {"suspended": False}}, name="edge")
    (edge,) = await eventually(lambda: auto_operations(objects, "edge"), lambda ops: len(ops) == 1,
                               what="edge patched")  # fmt: skip
    assert edge["spec"]["version"] == "v1.14.4"
    await stop(objects, "edge")
    await objects.delete_operation(edge["metadata"]["name"])
    # the suspended cluster starts nothing until a person resumes it
    await asyncio.sleep(3)
    assert len(await auto_operations(objects)) == 1
    # a resume naming another operation does nothing; the failed one's name resumes
    control_plane.kubectl("annotate", "taloscluster", "prod", "-n", objects.namespace,
                          f"{RESUME_ANNOTATION}=something-else")  # fmt: skip
    await asyncio.sleep(3)
    assert len(await auto_operations(objects)) == 1
    await fleet.status({"autoPatch": {"halts": None}})  # the window it failed in is over
    control_plane.kubectl("annotate", "--overwrite", "taloscluster", "prod", "-n",
                          objects.namespace, f"{RESUME_ANNOTATION}={name}")  # fmt: skip
    ops = await eventually(lambda: auto_operations(objects), lambda ops: len(ops) == 2,
                           what="the retry after resume")  # fmt: skip
    (retry,) = [o for o in ops if o["metadata"]["name"] != name]
    assert retry["spec"]["version"] == "v1.14.5"
    assert await objects.saw_events("prod", "AutoPatchResumed")
    await stop(objects, "prod")
    await objects.delete_operation(retry["metadata"]["name"])


async def test_a_restart_inside_a_window_starts_no_second_operation(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects
) -> None:
    await objects.create_cluster(autoPatch=auto_patch(components=["talos"]))
    (first,) = await eventually(lambda: auto_operations(objects), lambda ops: len(ops) == 1,
                                what="the Talos patch started")  # fmt: skip
    await operator.stop()
    await operator.start()
    await asyncio.sleep(6)
    ops = await auto_operations(objects)
    assert [o["metadata"]["name"] for o in ops] == [first["metadata"]["name"]]
    await stop(objects, "prod")
    await objects.delete_operation(first["metadata"]["name"])


async def test_nobody_but_the_operator_writes_the_record(
    fleet: Fleet, operator: Operator, ready: Workload, objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:  # fmt: skip
    await objects.create_cluster(autoPatch=auto_patch(windows=[closed_window()]))
    await the_reason(objects, "WindowClosed")
    forged = {"status": {"autoPatch": {"suspension": None, "lastRun": None, "windowOpen": True}}}
    for target, plural, where in (
        ("prod", "talosclusters", ["-n", objects.namespace]),
        (kinds.INSTALLATION_NAME, "ichorinstallations", []),
    ):
        refused = control_plane.kubectl(
            "patch", plural, target, *where, "--subresource=status", "--type=merge",
            "-p", json.dumps(forged), check=False,
        )  # fmt: skip
        assert refused.returncode != 0, refused.stdout
        assert "status" in refused.stderr
    # a person's operation labelled as auto-patch's is refused by the webhook
    made = control_plane.kubectl(
        "create", "-f", "-", check=False,
        input=json.dumps({
            "apiVersion": kinds.API_VERSION, "kind": "TalosOperation",
            "metadata": {"name": "forged", "namespace": objects.namespace,
                         "labels": {STARTED_BY_LABEL: "auto-patch"}},
            "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"},
        }),
    )  # fmt: skip
    assert made.returncode != 0
    assert STARTED_BY_LABEL in made.stderr


async def test_a_false_health_check_holds_the_start_until_the_workload_makes_it_true(
    fleet: Fleet,
    operator: Operator,
    ready: Workload,
    objects: Objects,
    kube_api: ApiClient,
    operator_account: account.Account,
) -> None:
    """A declared CEL check over a ConfigMap of the workload cluster: false holds the start
    in an open window (the condition names the check, one Event, checked again at each
    look); the ConfigMap changes, the check is true, the patch starts."""
    gate = "ichor-gate-" + objects.namespace[-8:]
    # The workload cluster here is the management API server (no kubeconfig), read as the
    # ServiceAccount of the cluster's namespace (its default one), never as the operator:
    # that account's admin lets it read ConfigMaps of "default". Without it the check
    # fails as a 403.
    rbac = client.RbacAuthorizationV1Api(kube_api)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": gate},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
    }
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": gate},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": gate},
               "subjects": [{"kind": "ServiceAccount", "name": "default",
                             "namespace": objects.namespace}]}  # fmt: skip
    await rbac.create_namespaced_role("default", role)  # type: ignore[arg-type]
    await rbac.create_namespaced_role_binding("default", binding)  # type: ignore[arg-type]
    await ready.core.create_namespaced_config_map(
        "default",
        {"metadata": {"name": gate}, "data": {"ready": "no", "token": "t0p-s3cret"}},  # type: ignore[arg-type]
    )
    try:
        expression = f'objects.exists(o, o.metadata.name == "{gate}" && o.data.ready == "yes")'
        check = {"name": "apps-ready", "apiVersion": "v1", "resource": "configmaps",
                 "namespace": "default", "expression": expression}  # fmt: skip
        await objects.create_cluster(autoPatch=auto_patch(healthChecks=[check]))
        # the first look may come before the API server's authorizer saw the Role (a 403);
        # then the check is false
        body = await eventually(
            lambda: objects.cluster("prod"),
            lambda b: "is false" in condition(b, "AutoPatchReady").get("message", ""),
            what="AutoPatchReady HealthCheckFailed: the check is false",
        )
        said = condition(body, "AutoPatchReady")
        assert said["reason"] == "HealthCheckFailed"
        assert said["status"] == "False"
        assert 'health check "apps-ready"' in said["message"]
        assert "is false" in said["message"]
        assert "t0p-s3cret" not in said["message"]
        await quiet(objects)  # six looks: none starts, and no second Event
        blocked = [
            e for e in await objects.events("prod")
            if e["reason"] == "AutoPatchBlocked" and "apps-ready" in e["message"]
        ]  # fmt: skip
        assert len(blocked) == 1, blocked
        assert blocked[0]["type"] == "Warning"
        assert "t0p-s3cret" not in blocked[0]["message"]
        await ready.core.patch_namespaced_config_map(gate, "default", {"data": {"ready": "yes"}})
        (talos,) = await eventually(lambda: auto_operations(objects), lambda ops: len(ops) == 1,
                                    what="the Talos patch started")  # fmt: skip
        assert talos["spec"]["version"] == "v1.14.5"
        await stop(objects, "prod")
    finally:
        await ready.core.delete_namespaced_config_map(gate, "default")
        await rbac.delete_namespaced_role_binding(gate, "default")
        await rbac.delete_namespaced_role(gate, "default")
