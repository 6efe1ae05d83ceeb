"""talosctl for real in the executor's Jobs, on the node, where no Talos API answers.

The workload cluster's Node reports the address 10.201.1.10, which the test puts on the
node's own link with nothing listening on it: the real talosctl in the Job's container
(from the talosctl image, with the talosconfig Secret the TalosCluster names) connects,
is refused, and exits non-zero. What must hold is that talosctl's own error reaches the
operation's status as a clear failure, for ``upgrade-k8s`` (a Kubernetes operation) and
for ``upgrade`` (a Talos operation, one init container per node). Until a Talos API
stand-in serves the machine API, this is what the node tier can show of talosctl.
"""

from __future__ import annotations

import base64

import pytest
import yaml

from ichor.release.pinned import PINNED
from tests.harness import certs, node, workload
from tests.node import story
from tests.node.conftest import NodeImages, OnNode

#: The node tier's session fixtures (node start, image build) are charged to the first
#: test that asks for them.
pytestmark = pytest.mark.timeout(1200)

TALOS_NODE = "10.201.1.10"


def talosconfig(address: str) -> str:
    """A talosconfig whose endpoint and node are ``address`` (a throwaway CA and client)."""
    authority = certs.Authority.create("talos-ca")
    client = authority.issue_client(user="os:admin", groups=("os:admin",))

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return yaml.safe_dump(
        {
            "context": "edge",
            "contexts": {
                "edge": {
                    "endpoints": [address],
                    "nodes": [address],
                    "ca": b64(authority.cert_pem),
                    "crt": b64(client.cert),
                    "key": b64(client.key),
                }
            },
        }
    )


@pytest.mark.parametrize(
    ("type_", "version", "container", "command"),
    [
        ("kubernetes", "v1.36.7", "upgrade-k8s", "upgrade-k8s"),
        ("talos", "v1.14.4", "upgrade-000", "upgrade"),
    ],
)
def test_talosctls_own_error_reaches_the_operations_status(
    on_node: OnNode,
    node_images: NodeImages,
    workload_plane: workload.WorkloadPlane,
    one_node: node.Node,
    type_: str,
    version: str,
    container: str,
    command: str,
) -> None:
    one_node.add_address(TALOS_NODE)
    story.talos_node(
        workload_plane, "edge-cp-1", address=TALOS_NODE, talos=PINNED.talos,
        kubelet=PINNED.kubernetes,
    )  # fmt: skip
    story.plain_cilium(workload_plane, PINNED.cilium_chart)
    cluster = story.edge_cluster(
        on_node, workload_plane, talos=PINNED.talos, kubernetes=PINNED.kubernetes,
        contract=PINNED.contract, cilium=PINNED.cilium_chart,
        talosconfig=talosconfig(TALOS_NODE),
    )  # fmt: skip
    operation = cluster.start(f"edge-{type_}", type_=type_, version=version)
    assert operation.wait_ended() == "Failed", operation.explain()
    message = operation.message()
    assert f"container {container} exited 1" in message, message
    assert "connection refused" in message, message
    (job,) = cluster.jobs()
    pod_spec = job["spec"]["template"]["spec"]
    ran = [*pod_spec.get("initContainers", []), *pod_spec["containers"]]
    assert ran[0]["image"] == node_images.talosctl
    assert ran[0]["args"][0] == command
    assert TALOS_NODE in ran[0]["args"]
