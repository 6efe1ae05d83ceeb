"""A Talos operation node by node on the node: a drain a PodDisruptionBudget holds, a
single-node cluster with such a budget, and a node's Job kept off the node it upgrades.

The workload is an API server of its own (no kubelet, no disruption controller): a Pod
bound to a Node and a PodDisruptionBudget over it that allows no eviction, as a real
cluster's budget at its minimum does. talosctl in the executor's Job drains through the
workload's Kubernetes API (the kubeconfig the Talos API stand-in hands out), so the
budget holds its drain until the policy's ``drainTimeout``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ichor.api.talosoperation import OperationType
from ichor.controller.talosoperation import jobs, lifecycle
from ichor.release.release_set import PINNED
from ichor.settings import ExecutorSettings
from tests.harness import binaries, node, talos_standin, workload
from tests.harness.talos_standin import TalosNode
from tests.node import story
from tests.node.conftest import OnNode

pytestmark = pytest.mark.timeout(1200)

TARGET = "v1.14.4"


def _guarded_pod(plane: workload.WorkloadPlane, node_name: str) -> None:
    """A Pod on ``node_name`` and a PodDisruptionBudget that allows it no disruption."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "guarded", "namespace": "default", "labels": {"app": "guarded"}},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "x.invalid/c"}]},
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    for body in (pod, budget):
        plane.kubectl("apply", "-f", "-", input=json.dumps(body))


def _standin(
    plane: workload.WorkloadPlane, tmp_path: Path, nodes: list[TalosNode]
) -> talos_standin.TalosApi:
    try:
        talos_standin.binary()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    return talos_standin.TalosApi(
        workdir=tmp_path / "talos", endpoint_host=nodes[0].address, nodes=nodes,
        kubeconfig=plane.kubeconfig, served_kubeconfig=plane.node_kubeconfig(), down=1.0,
    )  # fmt: skip


def _nodes(plane: workload.WorkloadPlane, nodes: list[TalosNode]) -> None:
    for talos_node in nodes:
        story.talos_node(plane, talos_node.name, address=talos_node.address,
                         talos=PINNED.talos, kubelet=PINNED.kubernetes)  # fmt: skip
        if not talos_node.control_plane:
            plane.kubectl(
                "label", "node", talos_node.name, "node-role.kubernetes.io/control-plane-"
            )
    story.plain_cilium(plane, PINNED.cilium_chart)


def test_a_drain_a_budget_holds_ends_naming_the_cordoned_node_and_the_staged_image(
    on_node: OnNode, workload_plane: workload.WorkloadPlane, one_node: node.Node, tmp_path: Path
) -> None:
    cp = TalosNode("pdb-cp-1", "10.201.1.50", control_plane=True)
    worker = TalosNode("pdb-worker-1", "10.201.1.51", control_plane=False)
    one_node.add_address(cp.address)
    _nodes(workload_plane, [cp, worker])
    _guarded_pod(workload_plane, worker.name)
    with (
        _standin(workload_plane, tmp_path, [cp, worker]) as api,
        one_node.expose(api.port, address=cp.address) as exposed,
    ):
        cluster = story.edge_cluster(
            on_node, workload_plane, name="pdb", talos=PINNED.talos,
            kubernetes=PINNED.kubernetes, contract=PINNED.contract, cilium=PINNED.cilium_chart,
            talosconfig=api.talosconfig(endpoint=exposed.endpoint),
        )  # fmt: skip
        on_node.kubectl(
            "patch", "taloscluster", "pdb", "-n", cluster.namespace, "--type=merge", "-p",
            json.dumps({"spec": {"upgradePolicy": {"drainTimeout": "15s"}}}),
        )  # fmt: skip
        operation = cluster.start("pdb-talos", type_="talos", version=TARGET)
        ended = operation.wait_ended()
        explain = f"{operation.explain()}\nstand-in:\n{api.log()}"
        records = api.records()
    assert ended == "Failed", explain
    status = operation.status()
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert complete["reason"] == "DrainTimedOut", explain
    message = status["message"]
    image = f"factory.talos.dev/metal-installer/{talos_standin.DEFAULT_SCHEMATIC}:{TARGET}"
    assert f"the drain of {worker.name} did not finish within 15s: {image} is staged" in message
    assert f"talosctl --nodes {worker.address} reboot, then kubectl uncordon {worker.name}" in (
        message
    )
    assert f"talosctl --nodes {worker.address} rollback" in message
    assert status["failure"] == "Interrupted"  # a budget held it: nothing said of the version
    assert status["nodes"]["done"] == [cp.name]
    # the stand-in: the control plane node upgraded and booted; the worker installed
    # (staged) and never rebooted
    assert records[cp.name].boots == (TARGET,), explain
    assert records[worker.name].images == (image,), explain
    assert records[worker.name].reboots == 0, explain
    reported = json.loads(workload_plane.kubectl("get", "node", worker.name, "-o", "json").stdout)
    assert reported["spec"].get("unschedulable") is True


def test_a_single_node_cluster_with_a_budget_is_upgraded_without_a_drain(
    on_node: OnNode, workload_plane: workload.WorkloadPlane, one_node: node.Node, tmp_path: Path
) -> None:
    only = TalosNode("single-cp-1", "10.201.1.52", control_plane=True)
    one_node.add_address(only.address)
    _nodes(workload_plane, [only])
    _guarded_pod(workload_plane, only.name)
    with (
        _standin(workload_plane, tmp_path, [only]) as api,
        one_node.expose(api.port, address=only.address) as exposed,
    ):
        cluster = story.edge_cluster(
            on_node, workload_plane, name="single", talos=PINNED.talos,
            kubernetes=PINNED.kubernetes, contract=PINNED.contract, cilium=PINNED.cilium_chart,
            talosconfig=api.talosconfig(endpoint=exposed.endpoint),
        )  # fmt: skip
        operation = cluster.start("single-talos", type_="talos", version=TARGET)
        ended = operation.wait_ended()
        explain = f"{operation.explain()}\nstand-in:\n{api.log()}"
        records = api.records()
    assert ended == "Succeeded", explain
    status = operation.status()
    assert status["nodes"]["policy"]["singleNode"] is True
    assert status["nodes"]["policy"]["drain"] is False
    (job,) = cluster.jobs()
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--drain=false" in args
    assert records[only.name].boots == (TARGET,), explain
    events = on_node.kubectl("get", "events", "-n", cluster.namespace, "-o", "json").stdout
    started = [e["message"] for e in json.loads(events)["items"] if e["reason"] == "Started"]
    assert any("a single-node cluster: the node reboots into Talos" in m for m in started), started


def _job_pod(one_node: node.Node, namespace: str, job: str) -> dict[str, Any] | None:
    listed = one_node.kubectl("get", "pods", "-n", namespace, "-l", f"job-name={job}", "-o", "json")
    found: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return found[0] if found else None


def _scheduled(pod: dict[str, Any] | None) -> str | None:
    """Where the scheduler put the Pod, or its Unschedulable condition's words."""
    if pod is None:
        return None
    if pod["spec"].get("nodeName"):
        return f"bound to {pod['spec']['nodeName']}"
    for condition in pod.get("status", {}).get("conditions") or ():
        if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return f"unschedulable: {condition.get('message', '')}"
    return None


def test_a_nodes_job_in_the_cluster_it_upgrades_is_never_scheduled_on_that_node(
    one_node: node.Node, talosctl_image: str
) -> None:
    """The Job the executor makes for a node of a cluster without a kubeconfig (the one it
    runs in), given to the real scheduler of the node: its Pod is kept off the node it
    upgrades, here the only node, so it stays Pending and the operation's message says
    why. The same Job without the rule is bound to that node (the rule is what keeps it
    off)."""
    namespace = f"avoid-{uuid.uuid4().hex[:6]}"
    one_node.kubectl("create", "namespace", namespace)
    one_node.kubectl(
        "create", "secret", "generic", "self-talosconfig", "-n", namespace,
        "--from-literal=talosconfig=context: self", )  # fmt: skip
    target = jobs.TargetNode(node.NODE_NAME, node.NODE_IP, jobs.NodeRole.CONTROL_PLANE)
    ref = jobs.OperationRef(namespace=namespace, name="self-talos", uid=str(uuid.uuid4()),
                            cluster="self", type=OperationType.TALOS)  # fmt: skip
    made: list[str] = []
    for avoid in (True, False):
        name = f"ichor-talos-self-node-{'kept-off' if avoid else 'no-rule'}"
        manifest = jobs.node_job(
            operation=ref, name=name, version=TARGET, node=target,
            image=f"factory.talos.dev/metal-installer/{talos_standin.DEFAULT_SCHEMATIC}:{TARGET}",
            drain=False, drain_timeout="5m", reboot_mode="default", avoid_node=avoid,
            talosconfig=jobs.SecretMount(secret="self-talosconfig", key="talosconfig"),
            settings=ExecutorSettings(talosctl_image=talosctl_image),
        )  # fmt: skip
        # no owner here: the operation is not made, only its Job
        manifest["metadata"].pop("ownerReferences", None)
        one_node.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
        made.append(name)
    kept_off, no_rule = made
    try:
        said = story.wait(
            "the kept-off Job's Pod judged by the scheduler",
            lambda: _scheduled(_job_pod(one_node, namespace, kept_off)),
            lambda s: s is not None,
            within=120,
        )
        assert said is not None
        assert said.startswith("unschedulable:"), said
        assert "node affinity" in said, said
        bound = story.wait(
            "the Job without the rule bound to the node",
            lambda: _scheduled(_job_pod(one_node, namespace, no_rule)),
            lambda s: s is not None,
            within=120,
        )
        assert bound == f"bound to {node.NODE_NAME}", bound
        # once the other was bound, the kept-off Pod is still on no node
        pod = _job_pod(one_node, namespace, kept_off)
        assert pod is not None
        assert not pod["spec"].get("nodeName"), pod
        job = json.loads(
            one_node.kubectl("get", "job", kept_off, "-n", namespace, "-o", "json").stdout
        )
        outcome = lifecycle.job_outcome(job, [pod])
        assert outcome.state is lifecycle.JobState.RUNNING
        assert outcome.message.startswith("its Pod cannot be scheduled: "), outcome.message
        assert "node affinity" in outcome.message, outcome.message
    finally:
        one_node.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
