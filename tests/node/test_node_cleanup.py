"""The node starts, runs Pods behind a Service, and stops leaving the machine as it was.

Its own node (not the shared one), so the whole life is inside the test: a snapshot of the
machine before (sysctls, links, iptables and ip6tables rules, mounts, cgroups, the
default paths of kubelet, containerd and CNI), a Pod that runs to completion with a
projected token mounted, a long-running Pod behind a Service (so kube-proxy writes its
chains and the CNI plugin its bridge and veths), the stop, and the snapshot again: it
must be the same, and no process, network or mount namespace or cgroup of the node may be
left.

The same again on a machine where no node ever ran (a fresh view of this one,
:class:`machine.FreshView`, in a process of its own): the kubelet makes its fixed
folders only where they are missing, so a machine a node once ran on hides them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import binaries, images, machine, mountns, netns, node
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
        # every part in the node's mount namespace (and the containers in their own)
        mnt_inodes = {i for i in (mountns.inode(pid) for pid in node_pids) if i is not None}
        assert cluster.mounts is not None
        assert cluster.mounts.inode in mnt_inodes
        assert mountns.inode() not in mnt_inodes, "a part of the node runs in the machine's"
        runtime, workdir = str(cluster.runtime), str(cluster.workdir)
    finally:
        cluster.stop()

    after = machine.Snapshot.take()
    assert before.diff(after) == []
    alive = {pid: starts[pid] for pid in node_pids if _cmdline(pid) == starts[pid] != ""}
    assert alive == {}, "processes of the node still run"
    for pid in _all_pids():
        assert _netns_inode(pid) not in netns_inodes, f"{pid} ({_cmdline(pid)}) holds a node netns"
        assert mountns.inode(pid) not in mnt_inodes, f"{pid} ({_cmdline(pid)}) holds a node mnt ns"
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


REUSED_VIEW = """
import json, os, sys
from pathlib import Path
from tests.harness import machine, mountns
scratch = Path(sys.argv[1])
# a machine a node ran on: every default path outside /run exists (in an overlay of its
# own, in this process's mount namespace only)
mountns.unshare_private()
folders = {machine.fence_of(path) for path in machine.DEFAULT_PATHS} - {None}
for number, folder in enumerate(sorted(folders)):
    upper, work = scratch / f"reused-{number}" / "upper", scratch / f"reused-{number}" / "work"
    upper.mkdir(parents=True)
    work.mkdir()
    mountns.mount("reused", folder, "overlay", f"lowerdir={folder},upperdir={upper},workdir={work}")
for path in machine.DEFAULT_PATHS:
    if machine.fence_of(path) is not None:
        os.makedirs(Path(path) / "left-by-a-node", exist_ok=True)
reused = [p for p in machine.DEFAULT_PATHS if os.path.lexists(p)]
(scratch / "fresh").mkdir()
view = machine.FreshView.enter(scratch / "fresh")
fresh = [p for p in machine.DEFAULT_PATHS if os.path.lexists(p)]
os.makedirs("/var/log/containers")
print(json.dumps({"reused": reused, "hidden": view.hidden, "fresh": fresh,
                  "written": view.written()}))
"""


def test_a_fresh_view_hides_what_a_reused_machine_has(tmp_path: Path) -> None:
    """The fresh view works on a machine a node ran on (played in a mount namespace of
    its own): the default paths are gone from it, and a folder made again is seen."""
    existed = {p: os.path.lexists(p) for p in machine.DEFAULT_PATHS}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", REUSED_VIEW, str(scratch)],
        capture_output=True, text=True, timeout=120, check=False,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    outside_run = [p for p in machine.DEFAULT_PATHS if machine.fence_of(p) is not None]
    assert "/var/log/containers" in outside_run
    assert "/usr/libexec/kubernetes" in outside_run
    assert set(outside_run) <= set(seen["reused"]), "the reused machine was not played"
    assert seen["hidden"] == outside_run
    assert not set(seen["fresh"]) & set(outside_run)
    assert "/var/log/containers (folder)" in seen["written"]
    # and the machine itself was changed by neither
    assert [p for p in outside_run if os.path.lexists(Path(p) / "left-by-a-node")] == []
    assert {p: os.path.lexists(p) for p in machine.DEFAULT_PATHS} == existed


FRESH_RUN = """
import json, os, sys, time
from pathlib import Path
from tests.harness import machine, node
scratch, workdir = Path(sys.argv[1]), Path(sys.argv[2])
view = machine.FreshView.enter(scratch)
absent = [p for p in machine.DEFAULT_PATHS if not os.path.lexists(p)]
snapshots = []
cluster = node.Node(workdir=workdir, registry_port=int(sys.argv[3]))
cluster.start(locked=lambda: snapshots.append(machine.Snapshot.take()))
try:
    cluster.kubectl("run", "long", "--image", sys.argv[4], "--restart=Never")
    phase = ""
    for _ in range(450):
        phase = cluster.kubectl("get", "pod", "long", "-o", "jsonpath={.status.phase}").stdout
        if phase == "Running":
            break
        time.sleep(0.2)
    # what the kubelet linked in its fixed folder while the Pod ran, in the node's
    logs = workdir / node.VAR_LOG_FOLDER / "containers"
    linked = sorted(os.listdir(logs)) if logs.is_dir() else []
finally:
    cluster.stop()
after, changes = machine.lasting_diff(snapshots[0])
print(json.dumps({"fences": sorted(map(str, view.fences)), "absent": absent, "phase": phase,
                  "linked": linked, "changes": changes, "written": view.written()}))
"""


def test_a_node_leaves_a_fresh_machine_fresh(
    tmp_path: Path, node_registry: images.NodeRegistry, pause_image: str
) -> None:
    """A node started where none of the default paths exists (a fresh view of this
    machine) leaves none of them, and writes nothing else in the folders holding them:
    the kubelet's ``/var/log/containers`` and the controller-manager's FlexVolume folder
    (``/usr/libexec/kubernetes``) were made on every fresh machine, and left there."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    try:
        result = subprocess.run(
            [sys.executable, "-c", FRESH_RUN, str(scratch), str(tmp_path / "node"),
             str(node_registry.port), pause_image],
            capture_output=True, text=True, timeout=900, check=False,
            cwd=Path(__file__).resolve().parents[2],
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        node.sweep_stale()
        raise
    assert result.returncode == 0, result.stderr[-4000:]
    seen = json.loads(result.stdout.splitlines()[-1])
    assert {"/var/log", "/usr/libexec", "/var/lib", "/etc"} <= set(seen["fences"])
    outside_run = [p for p in machine.DEFAULT_PATHS if machine.fence_of(p) is not None]
    assert set(outside_run) <= set(seen["absent"]), "the view is not fresh: the test proves nothing"
    assert seen["phase"] == "Running"
    assert seen["changes"] == []
    assert seen["written"] == []
    assert [n for n in seen["linked"] if n.startswith("long_default_long-")], (
        "the kubelet linked no container log in the node's folder: the test proves nothing"
    )
