"""Nothing leaves the node's network namespace, shown by behaviour, and what crosses its
boundary on purpose (a forwarder) ends with whatever it was opened for.

No traffic is sent outside the namespaces the harness creates: 192.0.2.1 and 2001:db8::1
are documentation addresses (TEST-NET-1, RFC 5737; RFC 3849), never routed anywhere, and
the point is that nothing in the node even has a route towards them. A connection a Pod
tries fails at once with "network unreachable" (the node's namespace has no route and
answers so), not after a timeout: nothing was sent on its way out.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path

import pytest

from tests.harness import netns, node, workload
from tests.node import isolation, story

#: The node tier's session fixtures (node start, image build) are charged to the first
#: test that asks for them.
pytestmark = pytest.mark.timeout(1200)

UNROUTED = {"ipv4": "192.0.2.1", "ipv6": "2001:db8::1"}

#: Run in a Pod from the operator's image (it has Python): one connection to each
#: unrouted address, with a 20 s timeout; prints what each ended in and how fast.
CONNECT = """
import errno, json, socket, time
found = {}
for family, name, address in (
    (socket.AF_INET, "ipv4", "192.0.2.1"), (socket.AF_INET6, "ipv6", "2001:db8::1")
):
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(20)
    began = time.monotonic()
    try:
        sock.connect((address, 80))
        outcome = "connected"
    except socket.timeout:
        outcome = "timeout"
    except OSError as error:
        outcome = errno.errorcode.get(error.errno or 0, repr(error))
    finally:
        sock.close()
    found[name] = {"outcome": outcome, "seconds": round(time.monotonic() - began, 3)}
print(json.dumps(found))
"""


def test_the_node_has_no_route_to_an_address_outside_its_namespaces(one_node: node.Node) -> None:
    namespace = one_node.namespace
    assert namespace is not None
    for flag, address in (("-4", UNROUTED["ipv4"]), ("-6", UNROUTED["ipv6"])):
        result = namespace.run("ip", flag, "route", "get", address, check=False)
        assert result.returncode != 0, f"the node has a route to {address}: {result.stdout}"
        assert "Network is unreachable" in result.stderr, result.stderr
    routes = namespace.run("ip", "-4", "route", "show").stdout
    assert "default" not in routes, routes
    assert "default" not in namespace.run("ip", "-6", "route", "show").stdout


def test_a_pods_connection_out_fails_at_once_as_unreachable(
    one_node: node.Node, operator_image: str
) -> None:
    name = f"reach-out-{uuid.uuid4().hex[:6]}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": operator_image, "command": ["python3", "-c", CONNECT]}
            ],
        },
    }
    one_node.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:
        story.wait(
            f"Pod {name} done",
            lambda: (
                one_node.kubectl(
                    "get", "pod", name, "-o", "jsonpath={.status.phase}", check=False
                ).stdout
            ),
            lambda phase: phase in ("Succeeded", "Failed"),
            within=180,
            explain=lambda: one_node.kubectl("describe", "pod", name, check=False).stdout,
        )
        logs = one_node.kubectl("logs", name).stdout
    finally:
        one_node.kubectl("delete", "pod", name, "--wait=false", check=False)
    found = json.loads(logs.strip().splitlines()[-1])
    # IPv4: the Pod's default route leads to the node's namespace, which has none and
    # answers "network unreachable"; IPv6: the Pod has no IPv6 route at all
    for family in ("ipv4", "ipv6"):
        assert found[family]["outcome"] == "ENETUNREACH", found
        assert found[family]["seconds"] < 2.0, found


def test_the_node_drops_what_would_leave_its_namespace(one_node: node.Node) -> None:
    """The backstops: nothing the node sends goes out of a link other than its own, and
    nothing is forwarded off the Pods' bridge; no masquerade but kube-proxy's own."""
    namespace = one_node.namespace
    assert namespace is not None
    for tool in ("iptables", "ip6tables"):
        isolation.assert_backstops(namespace, tool)
    isolation.assert_no_masquerade_out(namespace)


def _connects_in_node(cluster: node.Node, address: str, port: int) -> bool:
    """Whether a TCP connection to ``address:port`` inside the node's namespace opens."""
    assert cluster.namespace is not None

    def attempt() -> bool:
        try:
            with socket.create_connection((address, port), timeout=5):
                return True
        except ConnectionRefusedError:
            return False

    return netns.in_thread(cluster.namespace.path, attempt)


def test_a_stopped_workload_plane_leaves_no_forwarder_on_the_node(
    one_node: node.Node, tmp_path: Path
) -> None:
    plane = workload.WorkloadPlane(workdir=tmp_path / "workload", daemonsets=False)
    plane.start()
    try:
        plane.expose(one_node)
        port = int(plane.server.rsplit(":", 1)[1])
        assert _connects_in_node(one_node, node.NODE_IP, port)
    finally:
        plane.stop()
    deadline = time.monotonic() + 5
    while _connects_in_node(one_node, node.NODE_IP, port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _connects_in_node(one_node, node.NODE_IP, port), (
        f"the node still accepts at {node.NODE_IP}:{port} for a workload plane that stopped"
    )
