"""A Talos operation node by node, against the real API server: restarts between nodes,
the checks between them, the policy, and the pre-flight.

Each node's Job is played (the node reports the target, the Job succeeds); the read and
check Jobs' output is played in talosctl's format (``tests/support/talos_reads.py``),
etcd included. The operator is stopped and started again where a crash would leave it:
it must resume at the right node and never create a node's Job twice.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
import yaml

from tests.component.operations.conftest import (
    Objects,
    Operator,
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
from tests.support import credential_files

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

ALL = ["ops-cp-1", "ops-cp-2", "ops-worker-1"]
TARGET = "v1.14.4"


async def _node_jobs(objects: Objects) -> dict[str, list[str]]:
    """Each node's Jobs (names), as stored."""
    found: dict[str, list[str]] = {}
    for job in await objects.jobs():
        if "ichor.dev/node" in (job["metadata"].get("annotations") or {}):
            found.setdefault(node_of(job), []).append(job["metadata"]["name"])
    return found


async def _status_nodes(objects: Objects, name: str = "up") -> dict[str, Any]:
    nodes: dict[str, Any] = (await objects.operation(name))["status"]["nodes"]
    return nodes


async def test_killed_between_two_nodes_it_resumes_at_the_next_and_upgrades_none_twice(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await objects.create_cluster()
    await objects.create_operation("up", "talos", TARGET)
    await running_job(objects, "up")
    await play_node(objects, workload, "up", "ops-cp-1", version=TARGET)
    # killed as soon as the first node is recorded done, before or just after the next
    # node's Job is created (whichever the operator reached)
    await eventually(
        lambda: _status_nodes(objects),
        lambda n: "ops-cp-1" in (n.get("done") or []),
        what="ops-cp-1 done",
    )
    await operator.stop()
    stopped = await _status_nodes(objects)
    await operator.start()
    job = await node_job(objects, "up", "ops-cp-2")
    assert stopped["done"] == ["ops-cp-1"]
    # and once more while the second node's Job runs
    await operator.stop()
    await operator.start()
    await play_node(objects, workload, "up", "ops-cp-2", version=TARGET)
    done = await play_nodes(objects, workload, "up", version=TARGET, nodes=["ops-worker-1"])
    assert phase(done) == "Succeeded", done["status"]
    assert await _node_jobs(objects) == {
        "ops-cp-1": [(await node_job(objects, "up", "ops-cp-1"))["metadata"]["name"]],
        "ops-cp-2": [job["metadata"]["name"]],
        "ops-worker-1": [(await node_job(objects, "up", "ops-worker-1"))["metadata"]["name"]],
    }
    assert done["status"]["nodes"]["done"] == ALL
    assert done["status"]["nodes"]["started"] == ALL


async def test_a_restart_with_the_next_node_recorded_done_picks_the_node_after_it(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """What a run stopped right after recording a node done leaves behind: the next
    start goes on with the next node, never the one done."""
    await objects.create_cluster()
    await objects.create_operation("up", "talos", TARGET)
    await running_job(objects, "up")
    await play_node(objects, workload, "up", "ops-cp-1", version=TARGET)
    await play_node(objects, workload, "up", "ops-cp-2", version=TARGET)
    await eventually(
        lambda: _status_nodes(objects),
        lambda n: n.get("done") == ["ops-cp-1", "ops-cp-2"],
        what="two nodes done",
    )
    await operator.stop()
    # someone removes the done nodes' Jobs meanwhile: they are not created again
    for job in await objects.jobs():
        await objects.batch.delete_namespaced_job(
            job["metadata"]["name"], objects.namespace, propagation_policy="Background"
        )
    await operator.start()
    done = await play_nodes(objects, workload, "up", version=TARGET, nodes=["ops-worker-1"])
    assert phase(done) == "Succeeded", done["status"]
    assert set(await _node_jobs(objects)) == {"ops-worker-1"}


async def test_a_node_whose_job_went_missing_after_it_started_is_never_upgraded_again(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await objects.create_cluster()
    await objects.create_operation("up", "talos", TARGET)
    _, job = await running_job(objects, "up")
    await operator.stop()
    await objects.batch.delete_namespaced_job(
        job["metadata"]["name"], objects.namespace, propagation_policy="Background"
    )
    await operator.start()
    failed = await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Failed", what="Failed"
    )
    assert condition(failed, "Complete")["reason"] == "JobDeleted"
    assert "the upgrade of ops-cp-1 may be half done" in failed["status"]["message"]
    await eventually(objects.jobs, lambda found: found == [], what="no Job left")


async def test_an_unhealthy_etcd_member_between_two_control_plane_nodes_stops_before_the_second(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await objects.create_cluster()
    await objects.create_operation("up", "talos", TARGET)
    await running_job(objects, "up")
    # while the first node upgrades, the second's etcd member starts failing
    operator.reads.etcd_errors["10.0.0.2"] = "memberID:42 alarm:NOSPACE"
    await play_node(objects, workload, "up", "ops-cp-1", version=TARGET)
    failed = await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Failed", what="Failed"
    )
    message = failed["status"]["message"]
    assert message.startswith(
        "stopped before ops-cp-2: etcd is not healthy with every member: etcd on ops-cp-2 "
        "reports: memberID:42 alarm:NOSPACE; done: ops-cp-1; not upgraded: ops-cp-2, "
        "ops-worker-1. Make etcd healthy"
    ), message
    assert condition(failed, "Complete")["reason"] == "CheckFailed"
    assert failed["status"]["failure"] == "UpgradeFailed"
    nodes = failed["status"]["nodes"]
    assert nodes["done"] == ["ops-cp-1"]
    assert "ops-cp-2" not in nodes["started"]
    assert "after ops-cp-1: etcd member back" in nodes["checks"]
    assert set(await _node_jobs(objects)) == {"ops-cp-1"}
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.3"


async def test_a_failing_health_check_between_two_workers_stops_before_the_second(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """The cluster's own CEL health check (auto-patch's), asked after each node of a
    person's operation: it fails once a Node carries the label ``canary: down``, which
    the test sets while the first worker upgrades."""
    await workload.add_node("ops-worker-2", address="10.0.0.12")
    check = {
        "name": "canary",
        "apiVersion": "v1",
        "resource": "nodes",
        "expression": (
            "objects.all(n, !has(n.metadata.labels) || !('canary' in n.metadata.labels))"
        ),
    }
    await objects.create_cluster(autoPatch={"healthChecks": [check]})
    await objects.create_operation("up", "talos", TARGET)
    await running_job(objects, "up")
    for node in ["ops-cp-1", "ops-cp-2"]:
        try:
            await play_node(objects, workload, "up", node, version=TARGET)
        except AssertionError:
            raise AssertionError(
                str((await objects.operation("up"))["status"]["message"])
            ) from None
    await node_job(objects, "up", "ops-worker-1")
    await workload.core.patch_node("ops-cp-1", {"metadata": {"labels": {"canary": "down"}}})
    await play_node(objects, workload, "up", "ops-worker-1", version=TARGET)
    failed = await eventually(
        lambda: objects.operation("up"),
        lambda b: phase(b) == "Failed",
        what="Failed at the deadline",
        within=60,
    )
    message = failed["status"]["message"]
    assert message.startswith("stopped after ops-worker-1: health check canary"), message
    assert (
        "done: ops-cp-1, ops-cp-2; upgraded, its checks not passed: ops-worker-1; "
        "not upgraded: ops-worker-2" in message
    ), message
    assert condition(failed, "Complete")["reason"] == "CheckFailed"
    assert "ops-worker-2" not in failed["status"]["nodes"]["started"]
    assert "after ops-cp-2: 1 health check(s) pass" in failed["status"]["nodes"]["checks"]


async def test_workers_go_as_many_at_once_as_the_policy_says_control_plane_one_by_one(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await workload.add_node("ops-worker-2", address="10.0.0.12")
    await objects.create_cluster(
        upgradePolicy={"maxUnavailableWorkers": 2, "drain": False, "rebootMode": "powercycle"}
    )
    await objects.create_operation("up", "talos", TARGET)
    _, first = await running_job(objects, "up")
    ((_, _, args),) = [(c["name"], c["image"], c["args"]) for c in
                       first["spec"]["template"]["spec"]["containers"]]  # fmt: skip
    assert "--drain=false" in args
    assert "--reboot-mode=powercycle" in args
    for node in ["ops-cp-1", "ops-cp-2"]:
        await play_node(objects, workload, "up", node, version=TARGET)
    await node_job(objects, "up", "ops-worker-1")
    await node_job(objects, "up", "ops-worker-2")
    nodes = await _status_nodes(objects)
    assert nodes["current"] == ["ops-worker-1", "ops-worker-2"]
    done = await play_nodes(
        objects, workload, "up", version=TARGET, nodes=["ops-worker-1", "ops-worker-2"]
    )
    assert phase(done) == "Succeeded"


def _talosconfig(*, roles: tuple[str, ...], not_after: datetime.datetime | None) -> str:
    authority = credential_files.authority()
    client = authority.issue_client(user="ops", groups=roles, not_after=not_after)
    config = credential_files.talosconfig()
    context = config["contexts"]["prod"]
    context["crt"] = base64.b64encode(client.cert).decode()
    context["key"] = base64.b64encode(client.key).decode()
    return yaml.safe_dump(config)


@pytest.mark.parametrize("case", ["expired", "no-role"])
async def test_a_talosconfig_that_cannot_upgrade_is_refused_before_any_job(
    operator: Operator, workload: Workload, objects: Objects, case: str
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    if case == "expired":
        text = _talosconfig(roles=("os:admin",), not_after=now - datetime.timedelta(hours=2))
    else:
        text = _talosconfig(roles=("os:reader",), not_after=None)
    await objects.create_cluster()
    secret = {"data": {"talosconfig": base64.b64encode(text.encode()).decode()}}
    await objects.core.patch_namespaced_secret("prod-talosconfig", objects.namespace, secret)
    await objects.create_operation("up", "talos", TARGET)
    failed = await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Failed", what="Failed"
    )
    message = failed["status"]["message"]
    if case == "expired":
        assert "expired on" in message, message
    else:
        assert "has the Talos roles os:reader, and an upgrade needs os:admin" in message
    assert message.endswith("no node was touched"), message
    assert condition(failed, "Accepted")["reason"] == "PreflightFailed"
    assert await objects.jobs() == []
    assert operator.reads.answered == []


async def test_a_node_already_on_the_target_and_its_image_is_not_upgraded_again(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """An operation that stopped after a node leaves it on the target; the next one
    checks it and goes on, it does not reboot it again."""
    await objects.create_cluster()
    await workload.report(talos=TARGET, only="ops-cp-2")
    await objects.create_operation("up", "talos", TARGET)
    await running_job(objects, "up")
    await play_node(objects, workload, "up", "ops-cp-1", version=TARGET)
    done = await play_nodes(objects, workload, "up", version=TARGET, nodes=["ops-worker-1"])
    assert phase(done) == "Succeeded", done["status"]
    assert set(await _node_jobs(objects)) == {"ops-cp-1", "ops-worker-1"}
    checks = done["status"]["nodes"]["checks"]
    assert "ops-cp-2 already runs v1.14.4: not upgraded again" in checks, checks
    assert "before ops-cp-2: etcd healthy with 2 members" in checks, checks
    assert done["status"]["nodes"]["done"] == ALL


async def test_a_pod_that_upgrades_a_node_of_the_cluster_it_runs_in_is_kept_off_it(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """These clusters name no kubeconfig: their workload is the cluster the operator runs
    in, and talosctl would drain the Job's own Pod off the node it upgrades. An
    unschedulable Pod is said in the operation's message."""
    await objects.create_cluster()
    await objects.create_operation("up", "talos", TARGET)
    _, job = await running_job(objects, "up")
    pod = job["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchFields"] == [
        {"key": "metadata.name", "operator": "NotIn", "values": ["ops-cp-1"]}
    ]
    # the scheduler finds no other node (no scheduler runs here: played as it reports it)
    name = job["metadata"]["name"]
    pod_body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-x1", "labels": {"job-name": name}},
        "spec": {"containers": [{"name": "upgrade", "image": "x.invalid/talosctl"}]},
    }
    await objects.core.create_namespaced_pod(objects.namespace, pod_body)  # type: ignore[arg-type]
    reason = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    condition_ = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                  "message": reason}  # fmt: skip
    pending = {"status": {"phase": "Pending", "conditions": [condition_]}}
    await objects.core.patch_namespaced_pod_status(f"{name}-x1", objects.namespace, pending)
    said = await eventually(
        lambda: objects.operation("up"),
        lambda b: "its Pod cannot be scheduled" in b["status"].get("message", ""),
        what="the unschedulable Pod said",
    )
    assert "didn't match Pod's node affinity" in said["status"]["message"]


async def test_a_kubernetes_operation_with_an_unhealthy_etcd_member_is_stopped_before_its_job(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """talosctl upgrade-k8s is one command over every node: etcd is checked before it."""
    operator.reads.etcd_errors["10.0.0.2"] = "memberID:42 alarm:NOSPACE"
    await objects.create_cluster()
    await objects.create_operation("k8s", "kubernetes", "v1.37.1")
    failed = await eventually(
        lambda: objects.operation("k8s"), lambda b: phase(b) == "Failed", what="Failed"
    )
    message = failed["status"]["message"]
    assert message.startswith(
        "stopped before talosctl upgrade-k8s: etcd is not healthy with every member: etcd on "
        "ops-cp-2 reports: memberID:42 alarm:NOSPACE; no node was touched. Make etcd healthy"
    ), message
    assert condition(failed, "Accepted")["reason"] == "CheckFailed"
    assert failed["status"]["failure"] == "NotStarted"
    assert any("check-before" in name for name in operator.reads.answered)
    # the check Job was read and deleted; no upgrade-k8s Job was made
    assert await objects.jobs() == []


async def test_a_kubernetes_operation_checks_etcd_and_health_after_upgrade_k8s(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """After upgrade-k8s (which checks each kubelet itself) the cluster's own CEL health
    checks and etcd are asked, until the deadline; a check that keeps failing fails the
    operation and the spec stays."""
    check = {
        "name": "canary",
        "apiVersion": "v1",
        "resource": "nodes",
        "expression": (
            "objects.all(n, !has(n.metadata.labels) || !('canary' in n.metadata.labels))"
        ),
    }
    await objects.create_cluster(autoPatch={"healthChecks": [check]})
    await objects.create_operation("k8s", "kubernetes", "v1.37.1")
    body, job = await running_job(objects, "k8s")
    assert "before it: etcd healthy with 2 members" in body["status"]["message"], body["status"]
    await workload.core.patch_node("ops-worker-1", {"metadata": {"labels": {"canary": "down"}}})
    await workload.report(kubelet="v1.37.1")
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    failed = await eventually(
        lambda: objects.operation("k8s"),
        lambda b: phase(b) == "Failed",
        what="Failed at the deadline",
        within=60,
    )
    message = failed["status"]["message"]
    assert message.startswith("stopped after talosctl upgrade-k8s: health check canary"), message
    assert condition(failed, "Complete")["reason"] == "CheckFailed"
    assert failed["status"]["failure"] == "UpgradeFailed"
    assert any("check-after" in name for name in operator.reads.answered)
    assert (await objects.cluster())["spec"]["kubernetesVersion"] == "v1.36.6"
    # the upgrade-k8s Job stays; every check Job was deleted once read
    assert [j["metadata"]["name"] for j in await objects.jobs()] == [job["metadata"]["name"]]
