"""Each node of a Talos operation is asked for its own image, on the node.

Three Talos nodes played by one Talos API stand-in, all different: a control plane node
on metal with a storage schematic, a GPU worker on aws with another schematic from a
private Image Factory, and a SecureBoot worker on metal. The operator (the chart's
Deployment) reads them with its read Job (the real talosctl in a Pod, through the
talosconfig Secret), then its Talos Job runs ``talosctl upgrade`` once per node with that
node's own installer. The stand-in records the installer each node was asked for.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ichor.release.release_set import PINNED
from tests.harness import binaries, node, talos_standin, workload
from tests.harness.talos_standin import Extension, TalosNode
from tests.node import story
from tests.node.conftest import OnNode

pytestmark = pytest.mark.timeout(1200)

ISCSI = Extension("iscsi-tools", "v0.2.0")
NVIDIA = Extension("nonfree-kmod-nvidia-production", "570.172.08-v1.14.3")
STORAGE = "c9078f9419961640c712a8bf2bb9174933dfcf1da383fd8ea2b7dc21493f8bac"
GPU = "0b2b2c0f8a6e1d3b7d1d6d9a4c5e0f3e9d2a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"
CP = TalosNode(
    "img-cp-1", "10.201.1.30", control_plane=True, schematic=STORAGE, extensions=(ISCSI,)
)
GPU_WORKER = TalosNode(
    "img-gpu-1", "10.201.1.31", control_plane=False, platform="aws", schematic=GPU,
    factory="https://factory.example.com", extensions=(NVIDIA,),
)  # fmt: skip
SB_WORKER = TalosNode(
    "img-sb-1", "10.201.1.32", control_plane=False, secure_boot=True, schematic=STORAGE,
    extensions=(ISCSI,),
)  # fmt: skip
NODES = (CP, GPU_WORKER, SB_WORKER)
TARGET = "v1.14.4"


def _own_installer(talos_node: TalosNode) -> str:
    kind = f"{talos_node.platform}-installer" + ("-secureboot" if talos_node.secure_boot else "")
    host = talos_node.factory.removeprefix("https://")
    return f"{host}/{kind}/{talos_node.schematic}:{TARGET}"


def test_each_node_is_asked_for_its_own_image_and_the_operation_succeeds(
    on_node: OnNode,
    workload_plane: workload.WorkloadPlane,
    one_node: node.Node,
    tmp_path: Path,
) -> None:
    endpoint = CP.address
    one_node.add_address(endpoint)
    for talos_node in NODES:
        story.talos_node(workload_plane, talos_node.name, address=talos_node.address,
                         talos=PINNED.talos, kubelet=PINNED.kubernetes)  # fmt: skip
        if not talos_node.control_plane:
            workload_plane.kubectl(
                "label", "node", talos_node.name, "node-role.kubernetes.io/control-plane-"
            )
    story.plain_cilium(workload_plane, PINNED.cilium_chart)
    try:
        talos_standin.binary()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    standin = talos_standin.TalosApi(
        workdir=tmp_path / "talos", endpoint_host=endpoint, nodes=NODES,
        kubeconfig=workload_plane.kubeconfig, served_kubeconfig=workload_plane.node_kubeconfig(),
        down=1.0, schematics={STORAGE: (ISCSI,), GPU: (NVIDIA,)},
    )  # fmt: skip
    with standin as api, one_node.expose(api.port, address=endpoint) as exposed:
        cluster = story.edge_cluster(
            on_node, workload_plane, name="images", talos=PINNED.talos,
            kubernetes=PINNED.kubernetes, contract=PINNED.contract, cilium=PINNED.cilium_chart,
            talosconfig=api.talosconfig(endpoint=exposed.endpoint),
        )  # fmt: skip
        operation = cluster.start("images-talos", type_="talos", version=TARGET)
        ended = operation.wait_ended()
        explain = f"{operation.explain()}\nstand-in:\n{api.log()}"
        records = api.records()
    assert ended == "Succeeded", explain
    for talos_node in NODES:
        record = records[talos_node.name]
        assert record.images == (_own_installer(talos_node),), (talos_node.name, explain)
        assert record.upgrades == 1
        assert record.boots == (TARGET,)
    status = operation.status()
    assert len(status["nodes"]["images"]) == 3
    images = cluster.status()["nodeImages"]
    assert images["summary"] == "3 images", images
    assert images["differ"] is True
    by_node = {n: g for g in images["groups"] for n in g["nodes"]}
    assert by_node[GPU_WORKER.name]["platform"] == "aws"
    assert by_node[GPU_WORKER.name]["factory"] == "factory.example.com"
    assert by_node[SB_WORKER.name]["secureBoot"] is True
    assert by_node[CP.name]["extensions"] == ["iscsi-tools"]
    # the read Job is gone once what it read was recorded; one upgrade Job per node stays
    names = sorted(j["metadata"]["annotations"]["ichor.dev/node"] for j in cluster.jobs())
    assert names == sorted(n.name for n in NODES), json.dumps(
        [j["metadata"] for j in cluster.jobs()]
    )
