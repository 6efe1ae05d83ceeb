"""What the tools that wait on objects read of an operation and its cluster, with the
real kstatus (cli-utils, tests/gotools/kstatus) and the real ``kubectl wait`` on objects
the operator (the chart's ServiceAccount) wrote to the test API server.

Each state is seen as kstatus computes it: a cluster Current when settled, InProgress
while its operation is Pending or Running (``Reconciling``) and Current again after; an
operation InProgress while it runs, Current once Succeeded, Failed (``Stalled``) once
its Job failed. ``kubectl wait --for=condition=Ready`` returns when the Job succeeds and
not before, and does not return for a failed operation.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from ichor.api import kinds
from tests.component.operations.conftest import (
    Objects,
    Operator,
    Workload,
    condition,
    eventually,
    phase,
    play_nodes,
    running_job,
)
from tests.harness import binaries, controlplane
from tests.support import kstatus
from tests.support.kstatus import Ref, Status

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]


def _ref(kind: kinds.Kind, namespace: str, name: str) -> Ref:
    return Ref(kinds.GROUP, kinds.VERSION, kinds.PLURALS[kind].value, namespace, name)


async def _kstatus(plane: controlplane.ControlPlane, ref: Ref) -> kstatus.Result:
    (result,) = await asyncio.to_thread(kstatus.read, plane.kubeconfig, [ref])
    return result


async def _until(
    plane: controlplane.ControlPlane, ref: Ref, status: Status, *, message: str | None = None
) -> kstatus.Result:
    """kstatus of ``ref`` until it says ``status`` (and ``message``), bounded."""
    return await eventually(
        lambda: _kstatus(plane, ref),
        lambda r: r.status is status and (message is None or r.message == message),
        what=f"kstatus {status} of {ref}",
        within=20,
    )


async def _kubectl_wait(
    plane: controlplane.ControlPlane, *, namespace: str, target: str, wanted: str, limit: str
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(binaries.find("kubectl")),
        "--kubeconfig", str(plane.kubeconfig), "-n", namespace,
        "wait", f"--for=condition={wanted}", target, f"--timeout={limit}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


def _no_abnormal_false(body: dict[str, object]) -> None:
    """Reconciling and Stalled are present only while True; every condition names the
    generation it was computed for."""
    status = body.get("status")
    assert isinstance(status, dict)
    generation = body["metadata"]["generation"]  # type: ignore[index]
    for found in status.get("conditions") or ():
        if found["type"] in ("Reconciling", "Stalled"):
            assert found["status"] == "True", found
        assert found.get("observedGeneration") == generation, found


async def test_kstatus_and_kubectl_wait_follow_an_operation_to_succeeded(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    namespace: str,
) -> None:
    plane = control_plane
    cluster_ref = _ref(kinds.Kind.TALOS_CLUSTER, namespace, "prod")
    op_ref = _ref(kinds.Kind.TALOS_OPERATION, namespace, "up")
    await objects.create_cluster()
    settled = await _until(plane, cluster_ref, Status.CURRENT, message="Resource is Ready")
    assert settled.condition("Reconciling") is None

    await objects.create_operation("up", "talos", "v1.14.4")
    waiter = await _kubectl_wait(
        plane, namespace=namespace, target="talosoperation/up", wanted="Ready", limit="60s"
    )
    body, _job = await running_job(objects, "up")
    _no_abnormal_false(body)
    running = await _until(plane, op_ref, Status.IN_PROGRESS)
    reconciling = running.condition("Reconciling")
    assert reconciling is not None, running
    assert reconciling.reason == "NodesUpgrading", running  # a Talos operation, node by node
    busy = await _until(
        plane,
        cluster_ref,
        Status.IN_PROGRESS,
        message="TalosOperation up (talos v1.14.4) is Running",
    )
    assert busy.condition("Reconciling") is not None

    await asyncio.sleep(1.0)
    assert waiter.returncode is None, "kubectl wait returned before the Job succeeded"
    started = time.monotonic()
    await play_nodes(
        objects, workload, "up", version="v1.14.4", nodes=["ops-cp-1", "ops-cp-2", "ops-worker-1"]
    )
    out, err = await asyncio.wait_for(waiter.communicate(), timeout=60)
    assert waiter.returncode == 0, err.decode()
    assert out.decode().strip() == "talosoperation.ichor.dev/up condition met"
    done = await objects.operation("up")
    assert phase(done) == "Succeeded"
    assert condition(done, "Ready")["status"] == "True"
    assert condition(done, "Reconciling") == {}
    _no_abnormal_false(done)
    print(f"kubectl wait returned {time.monotonic() - started:.1f} s after the Job succeeded")

    current = await _until(plane, op_ref, Status.CURRENT)
    assert current.message == "Resource is Ready"
    # the cluster's spec moved (a new generation), then it settles on it
    after = await _until(plane, cluster_ref, Status.CURRENT, message="Resource is Ready")
    assert after.generation == 2
    cluster = await objects.cluster()
    assert condition(cluster, "Reconciling") == {}
    _no_abnormal_false(cluster)


async def test_a_failed_operation_is_failed_for_kstatus_and_stalled_for_kubectl_wait(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    namespace: str,
) -> None:
    plane = control_plane
    op_ref = _ref(kinds.Kind.TALOS_OPERATION, namespace, "up")
    cluster_ref = _ref(kinds.Kind.TALOS_CLUSTER, namespace, "prod")
    await objects.create_cluster()
    await objects.create_operation("up", "talos", "v1.14.4")
    _, job = await running_job(objects, "up")
    stalled_waiter = await _kubectl_wait(
        plane, namespace=namespace, target="talosoperation/up", wanted="Stalled", limit="60s"
    )
    await objects.play_job(job["metadata"]["name"], succeeded=False)
    _out, err = await asyncio.wait_for(stalled_waiter.communicate(), timeout=60)
    assert stalled_waiter.returncode == 0, err.decode()

    failed = await _until(plane, op_ref, Status.FAILED)
    stalled = failed.condition("Stalled")
    assert stalled is not None
    assert stalled.reason == "JobFailed"
    assert "BackoffLimitExceeded" in failed.message
    body = await objects.operation("up")
    assert condition(body, "Ready")["status"] == "False"
    assert condition(body, "Reconciling") == {}
    _no_abnormal_false(body)

    # Ready never comes: kubectl wait gives up at its timeout, it does not return early
    ready_waiter = await _kubectl_wait(
        plane, namespace=namespace, target="talosoperation/up", wanted="Ready", limit="3s"
    )
    _, err = await asyncio.wait_for(ready_waiter.communicate(), timeout=30)
    assert ready_waiter.returncode == 1
    assert "timed out" in err.decode()

    # the cluster is no longer reconciling: its operation ended (the spec stays)
    await _until(plane, cluster_ref, Status.CURRENT, message="Resource is Ready")


async def test_a_cluster_whose_nodes_differ_is_in_progress_until_they_agree(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    namespace: str,
) -> None:
    plane = control_plane
    cluster_ref = _ref(kinds.Kind.TALOS_CLUSTER, namespace, "prod")
    await objects.create_cluster()
    await _until(plane, cluster_ref, Status.CURRENT, message="Resource is Ready")
    await workload.add_node("ops-worker-2", address="10.0.0.12", talos="v1.14.4")
    differ = await _until(plane, cluster_ref, Status.IN_PROGRESS)
    reconciling = differ.condition("Reconciling")
    assert reconciling is not None
    assert reconciling.reason == "NodesDiffer"
    assert "v1.14.3, v1.14.4" in differ.message
    cluster = await objects.cluster()
    assert condition(cluster, "Ready")["reason"] == "NodesDiffer"  # Ready keeps its meaning
    _no_abnormal_false(cluster)
    await workload.core.delete_node("ops-worker-2")
    workload.nodes.discard("ops-worker-2")
    await _until(plane, cluster_ref, Status.CURRENT, message="Resource is Ready")
