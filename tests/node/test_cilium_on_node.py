"""A Cilium operation whose Job runs the real helm, on the node, against a workload cluster.

The workload cluster is a second API server (tests/harness/workload.py) with a Talos Node
object and a stand-in Cilium chart the tests own, installed at an older version from the
node's registry. The operator (in its Pod, installed by the chart) reads the cluster
through the kubeconfig Secret the TalosCluster names; a ``cni`` TalosOperation makes it
create the Job, whose container runs helm from the helm image (pulled from the node's
registry) with the value names the executor sets. The test asserts what helm really did:
the workload cluster's Helm release moved to the chart this Ichor embeds, its DaemonSet
runs that version, the observer reads it back into the TalosCluster's status, and the
operation ends Succeeded with exactly one Job that ran the helm image.
"""

from __future__ import annotations

import json
import time

import pytest

from ichor.release.release_set import PINNED
from tests.harness import images, workload
from tests.node import story
from tests.node.conftest import CILIUM_CHART_PATH, NodeImages, OnNode, record

#: The node tier's session fixtures (node start, image build) are charged to the first
#: test that asks for them.
pytestmark = pytest.mark.timeout(1200)


def test_a_cilium_operation_runs_helm_in_its_job_and_the_cluster_moves(
    on_node: OnNode,
    node_images: NodeImages,
    node_registry: images.NodeRegistry,
    workload_plane: workload.WorkloadPlane,
) -> None:
    chart = images.push_chart(node_registry, chart=CILIUM_CHART_PATH, version=story.EDGE_CILIUM)
    images.push_chart(node_registry, chart=CILIUM_CHART_PATH, version=PINNED.cilium_chart)
    story.talos_node(workload_plane, "edge-cp-1", address="10.201.1.10")
    story.helm_on(
        workload_plane, "install", "cilium", chart, "--version", story.EDGE_CILIUM,
        "--namespace", "kube-system", "--plain-http", "--wait", "--timeout", "2m",
    )  # fmt: skip
    cluster = story.edge_cluster(on_node, workload_plane)

    started = time.monotonic()
    operation = cluster.start("edge-cni", type_="cni")
    assert operation.wait_ended() == "Succeeded", operation.explain()
    record("cilium operation", f"{time.monotonic() - started:.1f} s")

    (job,) = cluster.jobs()
    (pod,) = cluster.pods()
    assert pod["metadata"]["labels"]["job-name"] == job["metadata"]["name"]
    (container,) = pod["status"]["containerStatuses"]
    assert container["image"] == node_images.helm
    assert container["state"]["terminated"]["exitCode"] == 0
    logs = on_node.kubectl("logs", "-n", cluster.namespace, pod["metadata"]["name"]).stdout
    assert 'Release "cilium" has been upgraded' in logs, logs

    # what helm really did to the workload cluster
    history = json.loads(
        story.helm_on(workload_plane, "history", "cilium", "-n", "kube-system", "-o", "json")
    )
    assert [entry["chart"] for entry in history] == [
        f"cilium-{story.EDGE_CILIUM}",
        f"cilium-{PINNED.cilium_chart}",
    ]
    assert history[-1]["status"] == "deployed"
    shown = workload_plane.kubectl("get", "daemonset", "cilium", "-n", "kube-system", "-o", "json")
    image = json.loads(shown.stdout)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(f":v{PINNED.cilium_chart}"), image
    story.wait(
        f"Cilium {PINNED.cilium_chart} observed",
        cluster.cni_version,
        lambda v: v == PINNED.cilium_chart,
        explain=on_node.logs,
    )
