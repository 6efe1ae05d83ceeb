"""The executors against the real API server: each type's lifecycle, failures, waiting,
refusal at execution, deletion, restart safety and conflicts."""

from __future__ import annotations

import pytest
from kubernetes.aio import client

from ichor.api.talosoperation import OperationType
from ichor.controller.talosoperation import jobs, lifecycle
from ichor.controller.talosoperation.lifecycle import Operation
from ichor.release.release_set import PINNED
from tests.component.operations.conftest import (
    FAST,
    Objects,
    Operator,
    Phases,
    Workload,
    condition,
    eventually,
    node_job,
    node_of,
    phase,
    play_node,
    play_nodes,
    running_job,
)

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]


@pytest.mark.parametrize(
    ("type_", "version", "field", "command"),
    [
        ("talos", "v1.14.4", "talosVersion", "upgrade"),
        ("kubernetes", "v1.37.1", "kubernetesVersion", "upgrade-k8s"),
        ("cni", None, None, "upgrade"),
    ],
)
async def test_each_type_goes_pending_running_succeeded_and_the_spec_follows(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    phases: Phases,
    type_: str,
    version: str | None,
    field: str | None,
    command: str,
) -> None:
    await objects.create_cluster()
    created = await objects.create_operation("up", type_, version)
    body, job = await running_job(objects, "up")

    step = "node-ops-cp-1" if type_ == "talos" else ""
    assert job["metadata"]["name"] == jobs.job_name(
        operation="up", uid=created["metadata"]["uid"], type_=OperationType(type_), step=step
    )
    assert job["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert jobs.commands(job)[0][2][0] == command
    assert body["status"]["startedAt"]
    assert condition(body, "Accepted")["reason"] == "Accepted"
    assert lifecycle.FINALIZER in body["metadata"]["finalizers"]
    if type_ == "talos":
        # one Job per node, control plane first: the first upgrades ops-cp-1 alone
        ((_, _, args),) = jobs.commands(job)
        assert args[args.index("--nodes") + 1] == "10.0.0.1"
        assert node_of(job) == "ops-cp-1"
    if type_ == "cni":
        assert PINNED.cilium_chart in jobs.commands(job)[0][2]

    if type_ == "talos":
        order = ["ops-cp-1", "ops-cp-2", "ops-worker-1"]
        await play_nodes(objects, workload, "up", version="v1.14.4", nodes=order)
    else:
        if type_ == "kubernetes":
            await workload.report(kubelet=version)
        await objects.play_job(job["metadata"]["name"], succeeded=True)
    done = await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Succeeded", what="Succeeded"
    )
    assert done["status"]["finishedAt"] >= done["status"]["startedAt"]
    assert condition(done, "Complete")["status"] == "True"
    assert condition(done, "Complete")["reason"] == "JobSucceeded"
    await eventually(
        lambda: objects.operation("up"),
        lambda b: lifecycle.FINALIZER not in (b["metadata"].get("finalizers") or []),
        what="the finalizer dropped once finished",
    )
    cluster = await objects.cluster()
    if field is not None:
        assert cluster["spec"][field] == version
        # the TalosCluster controller recomputes the status and choices for the new spec
        await eventually(
            objects.cluster,
            lambda c: (
                (c.get("status") or {}).get("observedGeneration") == c["metadata"]["generation"]
            ),
            what="the cluster's status recomputed for the new spec",
        )
    assert cluster["spec"]["talosVersion"] == ("v1.14.4" if type_ == "talos" else "v1.14.3")
    await phases.saw("up", ["Pending", "Running", "Succeeded"])
    await objects.saw_events("up", "Started", "Succeeded")
    await objects.saw_events("prod", "UpgradeStarted", "UpgradeSucceeded")
    # a Talos operation leaves one Job per node (its reads and checks are deleted once read)
    assert len(await objects.jobs()) == (3 if type_ == "talos" else 1)


async def test_a_failed_job_fails_the_operation_with_its_reason_and_keeps_the_spec(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await objects.create_cluster()
    await objects.create_operation("up", "talos", "v1.14.4")
    _, job = await running_job(objects, "up")
    name = job["metadata"]["name"]
    await objects.play_failed_pod(
        name,
        container="upgrade",
        log="waiting for the node\nerror: 10.0.0.1: the installer image cannot be pulled",
    )
    await objects.play_job(name, succeeded=False)
    done = await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Failed", what="Failed"
    )
    complete = condition(done, "Complete")
    assert complete["reason"] == "JobFailed"
    assert "BackoffLimitExceeded" in done["status"]["message"]
    assert "container upgrade exited 1" in done["status"]["message"]
    assert "the upgrade of ops-cp-1 failed" in done["status"]["message"]
    assert "the installer image cannot be pulled" in done["status"]["message"]
    assert done["status"]["finishedAt"]
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.3"
    await objects.saw_events("up", "Failed")
    await objects.saw_events("prod", "UpgradeFailed")


async def test_a_succeeded_job_waits_until_every_node_reports_the_target(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """``talosctl upgrade --wait`` returns once a node is back; the next node goes only
    once this one reports the new version, and the spec waits until every node does."""
    await objects.create_cluster()
    await objects.create_operation("up", "talos", "v1.14.4")
    _, job = await running_job(objects, "up")
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    waiting = await eventually(
        lambda: objects.operation("up"),
        lambda b: (
            "after ops-cp-1: waits until Node ops-cp-1 reports v1.14.3"
            in b["status"].get("message", "")
        ),
        what="waiting for ops-cp-1",
    )
    assert phase(waiting) == "Running"
    assert condition(waiting, "Complete")["reason"] == "NodesUpgrading"
    assert waiting["status"]["nodes"]["stage"] == "Verifying"
    assert "ops-cp-2" not in (waiting["status"]["nodes"].get("started") or [])
    assert len(await objects.jobs()) == 1  # the next node waits
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.3"
    await workload.report(talos="v1.14.4", only="ops-cp-1")
    done = await play_nodes(
        objects, workload, "up", version="v1.14.4", nodes=["ops-cp-2", "ops-worker-1"]
    )
    assert phase(done) == "Succeeded"
    assert condition(done, "Complete")["reason"] == "JobSucceeded"
    assert done["status"]["nodes"]["done"] == ["ops-cp-1", "ops-cp-2", "ops-worker-1"]
    checks = done["status"]["nodes"]["checks"]
    assert "before ops-cp-2: etcd healthy with 2 members" in checks, checks
    assert "after ops-cp-1: etcd member back" in checks, checks
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.4"


@pytest.mark.parametrize(
    ("type_", "version", "reported"),
    [("talos", "v1.14.4", "Talos v1.14.3"), ("kubernetes", "v1.37.1", "kubelet v1.36.6")],
)
async def test_a_node_still_on_the_old_version_at_the_deadline_fails_the_operation(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    type_: str,
    version: str,
    reported: str,
) -> None:
    """A node that booted its previous version back passes talosctl's wait: the
    operation fails when the Node still reports the old version after the deadline, and
    the spec stays where the cluster is."""
    await objects.create_cluster()
    await objects.create_operation("up", type_, version)
    _, job = await running_job(objects, "up")
    if type_ == "talos":
        # ops-cp-1 upgraded, ops-cp-2 boots its previous version back
        await play_node(objects, workload, "up", "ops-cp-1", version=version)
        job = await node_job(objects, "up", "ops-cp-2")
    else:
        for name in ("ops-cp-1", "ops-worker-1"):
            await workload.report(kubelet=version, only=name)
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    done = await eventually(
        lambda: objects.operation("up"),
        lambda b: phase(b) == "Failed",
        what="Failed at the deadline",
        within=FAST.node_version_deadline + 30,
    )
    complete = condition(done, "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "NodesNotUpgraded")
    message = done["status"]["message"]
    if type_ == "talos":
        assert "stopped after ops-cp-2: Node ops-cp-2 reports v1.14.3, not v1.14.4" in message
        assert "boots its previous version back" in message, message
        assert (
            "done: ops-cp-1; upgraded, its checks not passed: ops-cp-2; "
            "not upgraded: ops-worker-1" in message
        )
        assert "the TalosCluster spec is unchanged" in message, message
    else:
        assert f"Node ops-cp-2 reports {reported}" in message, message
        assert "booted its previous version back" in message, message
        assert "the TalosCluster spec is unchanged" in message, message
        assert "ops-cp-1" not in message, message
        assert "ops-worker-1" not in message, message
    field = "talosVersion" if type_ == "talos" else "kubernetesVersion"
    assert (await objects.cluster())["spec"][field] != version
    await objects.saw_events("up", "Failed")
    await objects.saw_events("prod", "UpgradeFailed")


async def test_a_second_operation_waits_for_the_running_one_then_runs(
    operator: Operator, workload: Workload, objects: Objects, phases: Phases
) -> None:
    await objects.create_cluster()
    await objects.create_operation("first", "talos", "v1.14.4")
    _, _job = await running_job(objects, "first")
    await objects.create_operation("second", "kubernetes", "v1.37.1")
    waiting = await eventually(
        lambda: objects.operation("second"),
        lambda b: condition(b, "Accepted").get("reason") == "Waiting",
        what="second waiting",
    )
    assert phase(waiting) == "Pending"
    assert f"TalosOperation {objects.namespace}/first" in waiting["status"]["message"]
    assert "Running" in condition(waiting, "Accepted")["message"]
    assert len(await objects.jobs()) == 1

    await play_nodes(
        objects,
        workload,
        "first",
        version="v1.14.4",
        nodes=["ops-cp-1", "ops-cp-2", "ops-worker-1"],
    )
    _, second_job = await running_job(objects, "second")
    assert phase(await objects.operation("first")) == "Succeeded"
    assert jobs.commands(second_job)[0][2][0] == "upgrade-k8s"
    assert len(await objects.jobs()) == 4  # one per node of the first, one of the second
    await phases.saw("second", ["Pending", "Running"])
    await objects.saw_events("second", "Waiting")


async def test_a_target_valid_at_plan_time_is_refused_once_the_cluster_moved(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await objects.create_cluster()
    await objects.create_operation("first", "kubernetes", "v1.37.1")
    _, job = await running_job(objects, "first")
    await objects.create_operation("second", "talos", "v1.14.4")
    await eventually(
        lambda: objects.operation("second"),
        lambda b: condition(b, "Accepted").get("reason") == "Waiting",
        what="second waiting",
    )
    await objects.patch_cluster_spec({"talosVersion": "v1.14.5"})  # the cluster moved
    await workload.report(kubelet="v1.37.1")
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    refused = await eventually(
        lambda: objects.operation("second"), lambda b: phase(b) == "Failed", what="refused"
    )
    accepted = condition(refused, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "NotNewer")
    assert condition(refused, "Complete")["reason"] == "Refused"
    assert "v1.14.5" in refused["status"]["message"]
    assert "jobName" not in refused["status"]
    assert len(await objects.jobs()) == 1
    await objects.saw_events("second", "Refused")


@pytest.mark.parametrize("override", [False, True])
async def test_an_overridable_refusal_runs_only_under_override(
    operator: Operator, workload: Workload, objects: Objects, override: bool
) -> None:
    # the nodes run Kubernetes 1.32, which Talos 1.14 does not support
    for name in list(workload.nodes):
        await workload.core.patch_node_status(
            name, {"status": {"nodeInfo": {"kubeletVersion": "v1.32.4"}}}
        )
    await objects.create_cluster()
    await eventually(
        objects.cluster,
        lambda c: (c.get("status") or {}).get("kubernetesVersion") == "v1.32.4",
        what="the old kubelets observed",
    )
    await objects.create_operation("up", "talos", "v1.14.4", override=override)
    if override:
        body, _ = await running_job(objects, "up")
        accepted = condition(body, "Accepted")
        assert accepted["reason"] == "Overridden"
        assert "TalosKubernetes" in accepted["message"]
        await objects.saw_events("up", "Override")
    else:
        body = await eventually(
            lambda: objects.operation("up"), lambda b: phase(b) == "Failed", what="refused"
        )
        assert condition(body, "Accepted")["reason"] == "TalosKubernetes"
        assert "override: true" in body["status"]["message"]
        assert await objects.jobs() == []


async def test_the_override_names_every_refusal_it_passed(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """Spec Kubernetes v1.31.5 and Nodes on v1.32.4, Talos v1.14.4 under override: the
    spec's pair and the running pair are two refusals, and the Accepted condition and
    the Override Event name both, not only the first."""
    for name in list(workload.nodes):
        await workload.core.patch_node_status(
            name, {"status": {"nodeInfo": {"kubeletVersion": "v1.32.4"}}}
        )
    await objects.create_cluster(kubernetesVersion="v1.31.5")
    await eventually(
        objects.cluster,
        lambda c: (c.get("status") or {}).get("kubernetesVersion") == "v1.32.4",
        what="the old kubelets observed",
    )
    await objects.create_operation("up", "talos", "v1.14.4", override=True)
    body, _ = await running_job(objects, "up")
    accepted = condition(body, "Accepted")
    assert accepted["reason"] == "Overridden"
    for kubernetes in ("v1.31.5", "v1.32.4"):
        assert f"Kubernetes {kubernetes}" in accepted["message"], accepted["message"]
    await objects.saw_events("up", "Override")
    (event,) = [e for e in await objects.events("up") if e["reason"] == "Override"]
    for kubernetes in ("v1.31.5", "v1.32.4"):
        assert f"Kubernetes {kubernetes}" in event["message"], event["message"]


async def test_override_true_without_the_webhooks_stamp_passes_nothing(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """The executor relies on an override only because the webhook asked for the
    creator's verb and stamped the operation: the flag alone passes nothing."""
    for name in list(workload.nodes):
        await workload.core.patch_node_status(
            name, {"status": {"nodeInfo": {"kubeletVersion": "v1.32.4"}}}
        )
    await objects.create_cluster()
    await eventually(
        objects.cluster,
        lambda c: (c.get("status") or {}).get("kubernetesVersion") == "v1.32.4",
        what="the old kubelets observed",
    )
    await objects.create_operation("up", "talos", "v1.14.4", override=True, override_by=None)
    body = await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Failed", what="refused"
    )
    assert condition(body, "Accepted")["reason"] == "TalosKubernetes"
    assert "carries no record that the webhook admitted it" in body["status"]["message"]
    assert await objects.jobs() == []


async def test_deleting_a_running_operation_stops_its_job(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await objects.create_cluster()
    await objects.create_operation("up", "talos", "v1.14.4")
    await running_job(objects, "up")
    await objects.delete_operation("up")
    await eventually(
        lambda: objects.operation_or_none("up"), lambda b: b is None, what="operation gone"
    )
    remaining = [j for j in await objects.jobs() if not j["metadata"].get("deletionTimestamp")]
    assert remaining == []
    await objects.saw_events("prod", "Stopped")
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.3"


async def test_a_restart_while_running_keeps_the_same_job_and_completes(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await objects.create_cluster()
    await objects.create_operation("up", "talos", "v1.14.4")
    _, job = await running_job(objects, "up")
    await operator.stop()
    # while the operator is down the Job goes on and the node moves
    await workload.report(talos="v1.14.4", only="ops-cp-1")
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    await operator.start()
    done = await play_nodes(
        objects, workload, "up", version="v1.14.4", nodes=["ops-cp-2", "ops-worker-1"]
    )
    assert phase(done) == "Succeeded"
    first = [j for j in await objects.jobs() if node_of(j) == "ops-cp-1"]
    assert [j["metadata"]["uid"] for j in first] == [job["metadata"]["uid"]]
    assert len(await objects.jobs()) == 3
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.4"
    found = await objects.saw_events("up", "Started", "Succeeded")
    assert found.count("Started") == 1


async def _cluster_then_stopped(operator: Operator, objects: Objects) -> None:
    """A cluster the operator has observed, then the operator stopped."""
    await objects.create_cluster()
    await eventually(
        objects.cluster,
        lambda c: (c.get("status") or {}).get("observedGeneration") == 1,
        what="the operator at work",
    )
    await operator.stop()


async def test_a_restart_between_the_claim_and_the_job_creates_the_job_once(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await _cluster_then_stopped(operator, objects)
    created = await objects.create_operation("up", "talos", "v1.14.4")
    # what a run stopped right after the claim leaves behind
    name = jobs.job_name(operation="up", uid=created["metadata"]["uid"], type_=OperationType.TALOS)
    await objects.custom.patch_namespaced_custom_object_status(
        "ichor.dev",
        "v1alpha1",
        objects.namespace,
        "talosoperations",
        "up",
        {
            "status": {
                "phase": "Running",
                "jobName": name,
                "startedAt": "2026-12-03T08:00:00Z",
                # the claim records the nodes and each one's image: the Job is built
                # from them, never from a second read
                "nodes": {
                    "order": [
                        {"name": "ops-cp-1", "address": "10.0.0.1", "controlPlane": True},
                        {"name": "ops-cp-2", "address": "10.0.0.2", "controlPlane": True},
                        {"name": "ops-worker-1", "address": "10.0.0.11"},
                    ],
                    "images": [
                        {
                            "image": "factory.talos.dev/metal-installer/abc:v1.14.4",
                            "nodes": ["ops-cp-1", "ops-cp-2", "ops-worker-1"],
                        }
                    ],
                },
                "conditions": [
                    {
                        "type": "Complete",
                        "status": "False",
                        "reason": "JobCreating",
                        "message": "",
                        "lastTransitionTime": "2026-12-03T08:00:00Z",
                    }
                ],
            }
        },
        _content_type="application/merge-patch+json",
    )
    await operator.start()
    _, job = await running_job(objects, "up")
    assert job["metadata"]["name"] == name
    assert len(await objects.jobs()) == 1
    assert operator.reads.answered == []  # no read after the claim
    images = {args[args.index("--image") + 1] for _, _, args in jobs.commands(job)[:-1]}
    assert images == {"factory.talos.dev/metal-installer/abc:v1.14.4"}


@pytest.mark.parametrize("succeeded", [True, False], ids=["succeeded", "failed"])
async def test_a_job_that_ended_before_its_write_still_owes_started(
    operator: Operator, objects: Objects, succeeded: bool
) -> None:
    """The operator dies after the Job's create and before the write that says it runs;
    the Job ends while it is down. The restart finds the Job ended: Started and the
    cluster's UpgradeStarted are still posted, once (the crash sweep found them lost)."""
    await _cluster_then_stopped(operator, objects)
    created = await objects.create_operation("up", "cni", None)
    name = jobs.job_name(operation="up", uid=created["metadata"]["uid"], type_=OperationType.CNI)
    await objects.custom.patch_namespaced_custom_object_status(
        "ichor.dev", "v1alpha1", objects.namespace, "talosoperations", "up",
        {"status": {
            "phase": "Running", "jobName": name, "startedAt": "2026-12-03T08:00:00Z",
            "conditions": [{
                "type": "Complete", "status": "False", "reason": "JobCreating", "message": "",
                "lastTransitionTime": "2026-12-03T08:00:00Z",
            }],
        }},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    owner = {
        "apiVersion": "ichor.dev/v1alpha1", "kind": "TalosOperation", "name": "up",
        "uid": created["metadata"]["uid"], "controller": True,
    }  # fmt: skip
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "ownerReferences": [owner]},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "talosctl", "image": "talosctl:test"}],
        }}},
    }  # fmt: skip
    await objects.batch.create_namespaced_job(objects.namespace, job)  # type: ignore[arg-type]
    await objects.play_job(name, succeeded=succeeded, message="" if succeeded else "boom")
    await operator.start()
    end = "Succeeded" if succeeded else "Failed"
    done = await eventually(lambda: objects.operation("up"), lambda b: phase(b) == end, what=end)
    assert done["status"]["jobName"] == name
    assert len(await objects.jobs()) == 1
    found = await objects.saw_events("up", "Started", end)
    assert found.count("Started") == 1
    assert found.count(end) == 1
    cluster = await objects.saw_events("prod", "UpgradeStarted", f"Upgrade{end}")
    assert cluster.count("UpgradeStarted") == 1


async def test_a_conflict_on_a_status_write_is_retried_not_lost(
    operator: Operator, workload: Workload, objects: Objects, phases: Phases
) -> None:
    touched: list[str] = []

    async def write_in_between(op: Operation) -> None:
        # another writer moves the object between the read and the status write, once
        if touched:
            return
        touched.append(op.resource_version)
        # runs in the operator's loop: use its client
        await client.CustomObjectsApi(executor.api).patch_namespaced_custom_object(
            "ichor.dev",
            "v1alpha1",
            op.namespace,
            "talosoperations",
            op.name,
            {"metadata": {"annotations": {"example.com/touched": "yes"}}},
            _content_type="application/merge-patch+json",
        )

    executor = operator.executor
    before = executor.conflicts
    executor.before_write = write_in_between
    try:
        await objects.create_cluster()
        await objects.create_operation("up", "talos", "v1.14.4")
        _, _job = await running_job(objects, "up")
    finally:
        executor.before_write = None
    assert touched
    assert executor.conflicts > before
    done = await play_nodes(
        objects, workload, "up", version="v1.14.4", nodes=["ops-cp-1", "ops-cp-2", "ops-worker-1"]
    )
    assert phase(done) == "Succeeded"
    await phases.saw("up", ["Pending", "Running", "Succeeded"])
    assert len(await objects.jobs()) == 3


async def test_a_cni_operation_naming_an_image_patch_is_refused_with_the_adrs_message(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await objects.create_cluster()
    await objects.custom.create_namespaced_custom_object(
        "ichor.dev",
        "v1alpha1",
        objects.namespace,
        "talosoperations",
        {
            "apiVersion": "ichor.dev/v1alpha1",
            "kind": "TalosOperation",
            "metadata": {"name": "patch"},
            "spec": {
                "clusterRef": {"name": "prod"},
                "type": "cni",
                "cni": {"imageVersion": "1.20.5"},
            },
        },
    )
    body = await eventually(
        lambda: objects.operation("patch"), lambda b: phase(b) == "Failed", what="refused"
    )
    assert condition(body, "Accepted")["reason"] == "CniVersion"
    assert "delete it and run `ichor cni upgrade` again" in body["status"]["message"]
    assert await objects.jobs() == []
