"""How an operation fails for real on the node: the Job's container exits non-zero, or its
image tag is not in the registry.

- Non-zero exit: the workload cluster runs Cilium from a plain manifest (as Talos's
  inline manifests install it), so there is no Helm release to upgrade; the real helm in
  the Job exits 1 and the operation ends Failed with helm's own words in its status.
- A missing tag: the executor's helm image names a tag the node's registry does not hold;
  the kubelet cannot pull it, the Job stays Running (the kubelet keeps retrying: a tag
  may be pushed later) and the operation says which container cannot start and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ichor.release.release_set import PINNED
from tests.component.chart import helm
from tests.harness import images, workload
from tests.node import story
from tests.node.conftest import CILIUM_CHART_PATH, OnNode, run_helm, wait_available

#: The node tier's session fixtures (node start, image build) are charged to the first
#: test that asks for them.
pytestmark = pytest.mark.timeout(1200)


def test_a_job_whose_helm_exits_non_zero_fails_the_operation_with_helms_words(
    on_node: OnNode, node_registry: images.NodeRegistry, workload_plane: workload.WorkloadPlane
) -> None:
    # the chart is there: what fails is the upgrade itself
    images.push_chart(node_registry, chart=CILIUM_CHART_PATH, version=PINNED.cilium_chart)
    story.talos_node(workload_plane, "edge-cp-1", address="10.201.1.10")
    story.plain_cilium(workload_plane, story.EDGE_CILIUM)
    cluster = story.edge_cluster(on_node, workload_plane)
    operation = cluster.start("edge-cni", type_="cni")
    assert operation.wait_ended() == "Failed", operation.explain()
    message = operation.message()
    assert "exited 1" in message, message
    assert '"cilium" has no deployed releases' in message, message
    (job,) = cluster.jobs()
    assert job["status"].get("failed") == 1
    # nothing moved on the workload cluster
    shown = workload_plane.kubectl("get", "daemonset", "cilium", "-n", "kube-system", "-o", "json")
    image = json.loads(shown.stdout)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(f":v{story.EDGE_CILIUM}")


def test_an_image_tag_not_in_the_registry_is_named_in_the_operations_status(
    on_node: OnNode, workload_plane: workload.WorkloadPlane, tmp_path: Path
) -> None:
    values = yaml.safe_load(on_node.values_file.read_text())
    good = values["executor"]["helmImage"]
    missing = good.rsplit(":", 1)[0] + ":not-pushed"
    values["executor"]["helmImage"] = missing
    changed = tmp_path / "values.yaml"
    changed.write_text(yaml.safe_dump(values))
    release = [str(helm.CHART), "-n", on_node.namespace]
    run_helm(on_node.cluster, "upgrade", helm.RELEASE, *release, "-f", str(changed))
    wait_available(on_node.cluster, on_node.namespace)
    try:
        story.talos_node(workload_plane, "edge-cp-1", address="10.201.1.10")
        story.plain_cilium(workload_plane, story.EDGE_CILIUM)
        cluster = story.edge_cluster(on_node, workload_plane)
        operation = cluster.start("edge-cni", type_="cni")
        message = story.wait(
            "the operation names the image it cannot pull",
            operation.message,
            lambda m: "cannot start" in m,
            explain=operation.explain,
        )
        assert "container helm-upgrade cannot start" in message, message
        assert "ErrImagePull" in message or "ImagePullBackOff" in message, message
        assert missing in message, message
        assert operation.phase() == "Running"
        assert len(cluster.jobs()) == 1
        # deleting the operation stops its Job (the operation's finalizer)
        on_node.kubectl("delete", "talosoperation", operation.name, "-n", cluster.namespace)
        story.wait("the Job is gone", cluster.jobs, lambda jobs: jobs == [])
    finally:
        run_helm(on_node.cluster, "upgrade", helm.RELEASE, *release, "-f", str(on_node.values_file))
        wait_available(on_node.cluster, on_node.namespace)
