"""The node starts, runs Pods behind a Service, and stops leaving the machine as it was.

Its own node (not the shared one), so the whole life is inside the test: a snapshot of the
machine before (sysctls, links, iptables and ip6tables rules, mounts, cgroups, the
default paths of kubelet, containerd and CNI), a Pod that runs to completion with a
projected token mounted, a long-running Pod behind a Service (so kube-proxy writes its
chains and the CNI plugin its bridge and veths), the stop, and the snapshot again: it
must be the same, and no process, network namespace or cgroup of the node may be left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import binaries, images, machine, netns, node
from tests.node import isolation

#: The node tier's session fixtures (node start, image build) are charged to the first
#: test that asks for them.
pytestmark = pytest.mark.timeout(1200)

#: This module starts its own node: it runs before the shared one starts (conftest.py).
OWN_NODE = True


def _pod(name: str, image: str, args: list[str], *, restart: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": image, "args": args}],
        },
    }


def _wait_phase(cluster: node.Node, name: str, phase: str, *, within: float = 90) -> None:
    deadline = time.monotonic() + within
    seen = ""
    while time.monotonic() < deadline:
        seen = cluster.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}").stdout
        if seen == phase:
            return
        time.sleep(0.2)
    described = cluster.kubectl("describe", "pod", name, check=False).stdout
    raise AssertionError(f"pod {name} is {seen!r}, not {phase}, after {within} s:\n{described}")


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_node_runs_pods_and_leaves_nothing(
    tmp_path: Path, node_registry: images.NodeRegistry, pause_image: str, helm_image: str
) -> None:
    before = machine.Snapshot.take()
    cluster = node.Node(workdir=tmp_path / "node", registry_port=node_registry.port)
    try:
        cluster.start()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        cluster.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "List",
                    "items": [
                        _pod("once", helm_image, ["version"], restart="Never"),
                        _pod("long", pause_image, [], restart="Always"),
                        {
                            "apiVersion": "v1",
                            "kind": "Service",
                            "metadata": {"name": "long"},
                            "spec": {
                                "selector": {"app": "long"},
                                "ports": [{"port": 80, "targetPort": 8080}],
                            },
                        },
                    ],
                }
            ),
        )
        _wait_phase(cluster, "once", "Succeeded")
        _wait_phase(cluster, "long", "Running")
        logs = cluster.kubectl("logs", "once").stdout
        assert "v4." in logs, logs

        namespace = cluster.namespace
        assert namespace is not None
        routes = namespace.run("ip", "route", "show").stdout
        assert "default" not in routes, f"the node has a route out: {routes}"
        for tool in ("iptables", "ip6tables"):
            isolation.assert_backstops(namespace, tool)
        chains = namespace.run("iptables-save").stdout
        assert "KUBE-SERVICES" in chains, "kube-proxy wrote no chains: the test proves nothing"
        assert "-j MASQUERADE" in chains, "kube-proxy's own masquerade: the check sees rules"
        isolation.assert_no_masquerade_out(namespace)

        node_pids = cluster.cgroups.pids()
        assert len(node_pids) > 8, node_pids
        starts = {pid: _cmdline(pid) for pid in node_pids}
        netns_inodes = {i for i in (_netns_inode(pid) for pid in node_pids) if i is not None}
        assert len(netns_inodes) >= 2, "the node's and the running Pod's namespaces"
        assert os.stat(namespace.path).st_ino in netns_inodes
        runtime, workdir = str(cluster.runtime), str(cluster.workdir)
    finally:
        cluster.stop()

    after = machine.Snapshot.take()
    assert before.diff(after) == []
    alive = {pid: starts[pid] for pid in node_pids if _cmdline(pid) == starts[pid] != ""}
    assert alive == {}, "processes of the node still run"
    for pid in _all_pids():
        assert _netns_inode(pid) not in netns_inodes, f"{pid} ({_cmdline(pid)}) holds a node netns"
        command = _cmdline(pid)
        assert runtime not in command, command
        assert workdir not in command, command
    assert not Path(runtime).exists()
    assert cluster.cgroups.exists() == []
    assert node.KUBELET_SYSCTLS  # the values are compared through the snapshot above


def test_a_forwarder_refuses_a_machine_address_that_is_not_loopback() -> None:
    """The machine's side of a forwarder only ever dials loopback."""
    with pytest.raises(netns.NamespaceError, match="only loopback"):
        netns.Forwarder(
            listen=("127.0.0.1", 0),
            target=("10.201.0.2", 80),
            listen_ns=netns.HOST,
            target_ns=netns.HOST,
        )


KILLED_RUN = """
import json, sys, time
from pathlib import Path
from tests.harness import node
cluster = node.Node(workdir=Path(sys.argv[1]), registry_port=int(sys.argv[2])).start()
cluster.kubectl("run", "long", "--image", sys.argv[3], "--restart=Never")
for _ in range(300):
    if cluster.kubectl("get", "pod", "long", "-o", "jsonpath={.status.phase}").stdout == "Running":
        break
    time.sleep(0.2)
print(json.dumps({"id": cluster.id, "pids": sorted(cluster.cgroups.pids())}), flush=True)
time.sleep(600)
"""


def test_a_killed_run_is_swept_by_the_next(
    tmp_path: Path, node_registry: images.NodeRegistry, pause_image: str
) -> None:
    """A run killed before its stop (SIGKILL: no atexit) leaves shims, containers, mounts,
    cgroups, a namespace and changed sysctls; the next node's start sweeps them."""
    before = machine.Snapshot.take()
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(tmp_path / "node"), str(node_registry.port),
         pause_image],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, "the killed run did not start its node"
        state = json.loads(line)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    runtime = Path(f"/run/ichor-node-{state['id']}")
    assert runtime.exists(), "nothing left to sweep: the test proves nothing"
    survivors = [pid for pid in state["pids"] if _cmdline(pid)]
    assert survivors, "no shim or container outlived the run: the test proves nothing"
    # the machine-wide lock went with the process: no shim or container it left holds it
    lock = node.MachineLock()
    lock.acquire(owner="sweep-test", wait=30, say=lambda _: None)
    lock.release()
    assert node.sweep_stale() == [state["id"]]
    assert not runtime.exists()
    assert [pid for pid in state["pids"] if _cmdline(pid)] == []
    assert before.diff(machine.Snapshot.take()) == []
