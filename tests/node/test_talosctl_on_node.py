"""talosctl for real in the executor's Jobs, on the node.

Where no Talos API answers: the workload cluster's Node reports the address 10.201.1.10,
which the test puts on the node's own link with nothing listening on it; the real
talosctl in the executor's first Job (from the talosctl image, with the talosconfig
Secret the TalosCluster names) connects, is refused, and exits non-zero. What must hold
is that talosctl's own error reaches the operation's status as a clear failure before
any upgrade Job: the etcd check before ``upgrade-k8s`` (a Kubernetes operation), the read
of each node's image before ``upgrade`` (a Talos operation, one Job per node).

Where the Talos API stand-in (tests/talos_standin) plays the Talos node: the same Job's
``talosctl upgrade --wait`` succeeds against it, and the operation follows the Node's
version: Succeeded once it reports the target, Failed when it booted its previous
version back. A Kubernetes operation's ``talosctl upgrade-k8s`` gets what it asks of the
node from the stand-in and then fails on the workload cluster, which has no control plane
Pods to read; its own words reach the operation's status.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from ichor.release.release_set import PINNED
from tests.harness import binaries, certs, node, talos_standin, workload
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
    ("type_", "version", "reason", "said"),
    [
        (
            "kubernetes", "v1.36.7", "CheckFailed",
            "stopped before talosctl upgrade-k8s: etcd is not healthy with every member: "
            "etcd on edge-cp-1 does not answer",
        ),
        ("talos", "v1.14.4", "NodeImageRefused",
         "Node edge-cp-1: cannot be read through the Talos API"),
    ],
)  # fmt: skip
def test_talosctls_own_error_reaches_the_operations_status(
    on_node: OnNode,
    node_images: NodeImages,
    workload_plane: workload.WorkloadPlane,
    one_node: node.Node,
    type_: str,
    version: str,
    reason: str,
    said: str,
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
    assert said in message, message
    # talosctl's own words, from the real talosctl in the read or check Job's Pod
    assert "connection refused" in message, message
    status = operation.status()
    accepted = next(c for c in status["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", reason), status
    # refused before any upgrade Job: the read or check Job was deleted once read
    assert cluster.jobs() == [], [j["metadata"]["name"] for j in cluster.jobs()]
    spec = story.get(on_node, "taloscluster", cluster.name, "-n", cluster.namespace)["spec"]
    assert spec["talosVersion"] == PINNED.talos
    assert spec["kubernetesVersion"] == PINNED.kubernetes


class Ran(NamedTuple):
    """An operation run against the Talos API stand-in, and what the stand-in was asked."""

    cluster: story.Cluster
    operation: story.Operation
    #: The phase it ended in.
    ended: str
    #: (call, node) of every request the stand-in answered.
    calls: list[tuple[str, str | None]]
    #: The operation's explanation and the stand-in's log, for a failed assertion.
    explain: str


def _run_against_the_standin(
    on_node: OnNode,
    workload_plane: workload.WorkloadPlane,
    one_node: node.Node,
    tmp_path: Path,
    *,
    name: str,
    address: str,
    operation: str,
    type_: str,
    version: str,
    boot_old: Sequence[str] = (),
) -> Ran:
    """A Talos node ``name`` at ``address`` played by the stand-in (its API exposed on the
    node's link), a TalosCluster over it, and operation ``operation`` run to its end."""
    one_node.add_address(address)
    story.talos_node(
        workload_plane, name, address=address, talos=PINNED.talos, kubelet=PINNED.kubernetes
    )
    story.plain_cilium(workload_plane, PINNED.cilium_chart)
    standin = talos_standin.TalosApi(
        workdir=tmp_path / "talos",
        endpoint_host=address,
        nodes=[talos_standin.TalosNode(name, address)],
        kubeconfig=workload_plane.kubeconfig,
        served_kubeconfig=workload_plane.node_kubeconfig(),
        down=1.0,
        boot_old=list(boot_old),
    )
    try:
        talos_standin.binary()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    with standin as api, one_node.expose(api.port, address=address) as exposed:
        cluster = story.edge_cluster(
            on_node, workload_plane, talos=PINNED.talos, kubernetes=PINNED.kubernetes,
            contract=PINNED.contract, cilium=PINNED.cilium_chart,
            talosconfig=api.talosconfig(endpoint=exposed.endpoint),
        )  # fmt: skip
        started = cluster.start(operation, type_=type_, version=version)
        ended = started.wait_ended()
        calls = [(line["call"], line.get("node")) for line in api.calls()]
        explain = f"{started.explain()}\nstand-in:\n{api.log()}"
    return Ran(cluster=cluster, operation=started, ended=ended, calls=calls, explain=explain)


#: The address of the Talos node the stand-in plays (on the node's link, one per test).
STANDIN_NODES = {"upgrades": "10.201.1.12", "boots-back": "10.201.1.13"}


@pytest.mark.parametrize("case", ["upgrades", "boots-back"])
def test_a_talos_operation_runs_talosctl_upgrade_against_the_talos_api_standin(
    on_node: OnNode,
    node_images: NodeImages,
    workload_plane: workload.WorkloadPlane,
    one_node: node.Node,
    tmp_path: Path,
    case: str,
) -> None:
    """The executor's Talos Job, its talosctl from the talosctl image, in a Pod of the
    node, against the stand-in at the Talos node's address (mutual TLS, the talosconfig
    Secret the TalosCluster names): pull, install, drain through the workload's API,
    reboot, wait. A node that boots into the target ends the operation Succeeded with the
    spec moved; one that boots its previous version back passes talosctl's wait, and the
    operation fails once the Node still reports the old version at the deadline
    (ICHOR_NODE_VERSION_DEADLINE on the node), the spec unchanged."""
    address = STANDIN_NODES[case]
    name = f"edge-cp-{case}"
    target = "v1.14.4"
    cluster, operation, ended, calls, explain = _run_against_the_standin(
        on_node, workload_plane, one_node, tmp_path,
        name=name, address=address, operation=f"edge-talos-{case}", type_="talos",
        version=target, boot_old=[name] if case == "boots-back" else [],
    )  # fmt: skip
    (job,) = cluster.jobs()
    pod_spec = job["spec"]["template"]["spec"]
    # one Job per node: this node's, its one container (the read Job is deleted once read)
    (upgrade,) = pod_spec["containers"]
    assert upgrade["image"] == node_images.talosctl
    assert upgrade["args"][:3] == ["upgrade", "--nodes", address]
    assert "--wait" in upgrade["args"]
    assert job["status"].get("succeeded") == 1, explain
    mine = [call for call, node_name in calls if node_name == name]
    for step in ("pull", "upgrade", "reboot", "boot"):
        assert step in mine, (step, mine)
    assert mine.index("pull") < mine.index("upgrade") < mine.index("reboot") < mine.index("boot")
    assert mine.count("reboot") == 1, mine
    reported = json.loads(workload_plane.kubectl("get", "node", name, "-o", "json").stdout)
    os_image = reported["status"]["nodeInfo"]["osImage"]
    spec = story.get(on_node, "taloscluster", cluster.name, "-n", cluster.namespace)["spec"]
    if case == "upgrades":
        assert ended == "Succeeded", explain
        assert os_image == f"Talos ({target})"
        assert spec["talosVersion"] == target
        assert f"Talos {target} is installed" in operation.message(), operation.message()
    else:
        assert ended == "Failed", explain
        assert os_image == f"Talos ({PINNED.talos})"
        assert spec["talosVersion"] == PINNED.talos
        message = operation.message()
        assert f"Node {name} reports {PINNED.talos}, not {target}" in message, message
        assert "boots its previous version back" in message, message
        complete = next(c for c in operation.status()["conditions"] if c["type"] == "Complete")
        assert complete["reason"] == "NodesNotUpgraded"


#: The Talos node the stand-in plays for the Kubernetes operation.
STANDIN_K8S_NODE = ("edge-cp-k8s", "10.201.1.14")


def test_a_kubernetes_operation_runs_talosctl_upgrade_k8s_against_the_talos_api_standin(
    on_node: OnNode,
    node_images: NodeImages,
    workload_plane: workload.WorkloadPlane,
    one_node: node.Node,
    tmp_path: Path,
) -> None:
    """The executor's Kubernetes Job, the real ``talosctl upgrade-k8s`` in its container,
    against the stand-in at the control plane node's address: talosctl gets the node's
    version and the workload's kubeconfig from it, then looks in the workload cluster for
    the control plane's static Pods to find the versions it upgrades from. A stand-in
    cluster has none (no kubelet runs them), so talosctl fails in its own words, and those
    words end the operation Failed: what a real cluster whose control plane cannot be read
    would show."""
    name, address = STANDIN_K8S_NODE
    target = "v1.36.7"
    cluster, operation, ended, calls, explain = _run_against_the_standin(
        on_node, workload_plane, one_node, tmp_path,
        name=name, address=address, operation="edge-kubernetes", type_="kubernetes",
        version=target,
    )  # fmt: skip
    assert ended == "Failed", explain
    message = operation.message()
    assert "container upgrade-k8s exited 1" in message, message
    # talosctl's own words (github.com/siderolabs/talos cmd/talosctl, upgrade-k8s)
    assert "failed to detect lowest Kubernetes version" in message, message
    # it did reach the stand-in: the failure is not a connection's
    assert ("version", name) in calls, calls
    assert ("kubeconfig", name) in calls, calls
    assert "connection refused" not in message, message
    (job,) = cluster.jobs()
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == node_images.talosctl
    assert container["args"][:5] == ["upgrade-k8s", "--nodes", address, "--to", target]
    spec = story.get(on_node, "taloscluster", cluster.name, "-n", cluster.namespace)["spec"]
    assert spec["kubernetesVersion"] == PINNED.kubernetes
