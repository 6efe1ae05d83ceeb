"""``make demo`` end to end: its script runs the whole story and prints what it promises.

The demo runs as a person runs it (``python -m tests.harness.demo``, what ``make demo``
calls) under a cache folder of its own, so a demo a person left running is not touched;
the binaries are the ones ``make testenv`` cached. It runs its Jobs on the node (the
default; a node that cannot start fails the demo, and so this test): the Talos step's
and the Cilium step's Jobs must really have run, as the API tells it afterwards (the
Pods Succeeded, every container exited 0) and as the workload clusters show it (the
Nodes report the Talos the stand-in booted, helm's release moved the DaemonSet).
Afterwards ``stack down --name demo`` (what ``make demo-down`` calls) must stop every
process the demo started, the operator, the registry and the node included, and leave no
mount, network namespace or cgroup of the node: the machine as it was before the demo
(:class:`tests.harness.machine.Snapshot`, the same check as the node tier's shared node).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ichor.release.release_set import PINNED
from tests.harness import binaries, cgroups, controlplane, machine, node

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class DemoRun:
    returncode: int
    output: str
    seconds: float
    state: dict[str, object]
    #: the machine before the demo started
    before: machine.Snapshot


def _env(cache: Path) -> dict[str, str]:
    return controlplane.loopback_env(
        {"ICHOR_CACHE": str(cache), "ICHOR_TESTENV": str(binaries.testenv_dir())}
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRun]:
    for name in ("etcd", "kube-apiserver", "kubectl", "registry"):
        try:
            binaries.find(name)
        except binaries.MissingBinaryError as error:
            pytest.fail(str(error), pytrace=False)
    cache = tmp_path_factory.mktemp("demo-cache")
    # another run's node would be in this snapshot (and gone after): wait for it first
    lock = node.MachineLock()
    lock.acquire(owner="demo-test-snapshot", wait=node.LOCK_WAIT, say=print)
    try:
        before = machine.Snapshot.take()
    finally:
        lock.release()
    began = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tests.harness.demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(cache),
        # beyond its own minutes, the node may wait for another run's node to stop
        timeout=900,
        check=False,
    )
    seconds = time.monotonic() - began
    state_file = cache / "stacks" / "demo" / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    try:
        yield DemoRun(result.returncode, result.stdout, seconds, state, before)
    finally:
        subprocess.run(
            [sys.executable, "-m", "tests.harness.stack", "down", "--name", "demo"],
            env=_env(cache),
            capture_output=True,
            timeout=120,
            check=False,
        )


def _lock_wait(output: str) -> float:
    """Seconds the demo said its node waited for another run's node (0 when it did not)."""
    found = re.search(r"of which (\d+) s waiting for another run's node", output)
    return float(found[1]) if found else 0.0


@pytest.mark.timeout(1200)
def test_the_demo_runs_to_the_end_within_minutes(demo: DemoRun) -> None:
    assert demo.returncode == 0, demo.output
    seconds = demo.seconds - _lock_wait(demo.output)
    assert seconds < 300, f"the demo took {seconds:.0f} s (beyond waiting for the node lock)"
    assert "Everything keeps running:" in demo.output
    assert "export KUBECONFIG=" in demo.output
    assert "make demo-down" in demo.output


STORY = [
    "=== Step 1: What this build installs",
    "Versions a new install gets: Talos v1.14.3, Kubernetes v1.36.6, contract v1.14, Cilium 1.20.4",
    "=== Step 2: A cluster created with `ichor init`",
    "Refused: --kubernetes-version v1.37.2 is refused",
    "$ ichor init prod",
    "TalosCluster default/prod created",
    "=== Step 3: `kubectl get talosclusters`",
    "$ kubectl get talosclusters",
    "=== Step 4:",
    "$ ichor upgrade kubernetes prod --list",
    "v1.36.7  (default)",
    "Not offered:",
    "Kubernetes v1.37.2: Cilium 1.20.4 runs Kubernetes 1.33 to 1.36; "
    "a newer Ichor release is needed",
    "=== Step 5:",
    "$ ichor --kubeconfig users/nadia.kubeconfig upgrade kubernetes prod v1.37.2",
    "Refused: Kubernetes v1.37.2 is refused: Cilium 1.20.4 runs Kubernetes 1.33 to 1.36",
    "Rerun with --override",
    "user 'nadia' does not hold the RBAC verb `override`",
    "=== Step 6:",
    "$ ichor --kubeconfig users/olivia.kubeconfig upgrade kubernetes prod v1.37.2 --override",
    "Warning: override by olivia (CiliumKubernetes)",
    "$ kubectl get events --field-selector reason=Override",
    "User olivia overrode a refusal",
    "=== Step 7: An operation followed to Succeeded",
    "prod's nodes differ",
    "$ ichor upgrade talos prod --wait",
    "the default choice is Talos v1.14.5",
    "stopped after prod-cp-1: health check storage-ready",
    "not upgraded: prod-cp-2, prod-worker-1",
    "the gate stopped the operation after its first node",
    "Each node's Job runs for real on the node ichor-node",
    "$ ichor upgrade talos prod --wait",
    "  Succeeded:",
    "Ran for real: Job ichor-talos-",
    "phase Succeeded; container exit codes (from the API): upgrade 0",
    "Talos (v1.14.5)",
    "IMAGES",
    "3 images",
    "the nodes differ, each is upgraded to its own image:",
    "=== Step 8:",
    "$ ichor upgrade plan prod",
    "What the rules reach instead",
    "ichor upgrade kubernetes prod v1.36.7",
    "=== Step 9: An older cluster, adopted as it runs",
    "$ ichor adopt edge --workload-kubeconfig edge/kubeconfig",
    "runs Talos v1.13.9, Kubernetes v1.35.5, Cilium 1.19.10",
    "TalosCluster default/edge adopted",
    "=== Step 10: A Cilium-order refusal that names the step",
    "$ ichor upgrade kubernetes edge v1.36.7",
    "upgrade Cilium to 1.20.4 first, the chart this Ichor embeds",
    "$ ichor upgrade plan edge",
    "1. ichor cni upgrade edge",
    "2. ichor upgrade kubernetes edge v1.36.7",
    "=== Step 11:",
    "The Job runs for real on the node ichor-node",
    "$ ichor cni upgrade edge --wait",
    "  Succeeded:",
    "Ran for real: Job ichor-cni-",
    "container exit codes (from the API): helm-upgrade 0",
    'Release "cilium" has been upgraded',
    "Plan accepted: Kubernetes to v1.36.7 for TalosCluster default/edge",
    "=== Step 12:",
    "$ ichor status",
    "=== Step 13: An open window patches a cluster unattended (auto-patch)",
    "the demo plays the Job once more",
    "$ kubectl get validatingadmissionpolicy ichor-demo-plays-upgrade-k8s",
    "$ kubectl patch taloscluster prod --type=merge",
    "AutoPatchStarted",
    "Kubernetes v1.36.7, the newest patch of the running minor",
    "$ ichor status",
    "AUTO-PATCH",
    "with a window open, auto-patch started TalosOperation auto-patch-prod-kubernetes-v1-36-7-",
]


def test_the_demo_tells_the_story_in_order(demo: DemoRun) -> None:
    position = 0
    for expected in STORY:
        found = demo.output.find(expected, position)
        assert found >= 0, f"{expected!r} missing after position {position}:\n{demo.output}"
        position = found + len(expected)


def test_the_demo_says_what_the_workload_cluster_is(demo: DemoRun) -> None:
    # on the node, prod's workload cluster is an API server of its own (the node's own
    # API server has a real Node, which is no Talos node)
    assert "workload cluster of prod: a small API server of its own" in demo.output
    assert "with 3 Node objects" in demo.output
    assert "that the demo created" in demo.output


def test_the_demo_says_plainly_what_stands_in(demo: DemoRun) -> None:
    said = demo.output.split("What is real here and what stands in:", 1)[1]
    assert "real: the management cluster is a one-node Kubernetes" in said
    assert "stand-ins: the Talos nodes themselves (a Talos API stand-in" in said
    assert "the workload clusters (small API servers" in said
    assert "the Cilium chart (a stand-in" in said
    assert "the auto-patch step's Kubernetes Job, whose outcome the demo plays" in said
    ending = demo.output.rsplit("Jobs that ran for real on the node:", 1)[1]
    assert re.search(r"Talos Job ichor-talos-\S+: \d+ s \(followed [\d.]+ s\)", ending)
    assert re.search(r"Cilium Job ichor-cni-\S+: \d+ s \(followed [\d.]+ s\)", ending)


def test_the_listing_is_offered_from_the_seeded_registry(demo: DemoRun) -> None:
    table = demo.output.split("$ kubectl get talosclusters", 1)[1].split("-->", 1)[0]
    row = next(line for line in table.splitlines() if line.startswith("prod "))
    assert row.split()[:6] == ["prod", "v1.14.3", "v1.36.6", "1.20.4", "v1.14.5", "v1.36.7"]


def _kubectl(kubeconfig: Path, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [str(binaries.find("kubectl")), "--kubeconfig", str(kubeconfig), *args, "-o", "json"],
        capture_output=True,
        text=True,
        env=controlplane.loopback_env(),
        timeout=60,
        check=True,
    )
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_the_talos_and_cilium_jobs_ran_in_containers_on_the_node(demo: DemoRun) -> None:
    """What the API says of the Jobs' Pods, read after the demo: their containers ran on
    the node and exited 0, and the workload clusters moved because of them."""
    assert demo.returncode == 0, demo.output
    stack = Path(str(demo.state["kubeconfig"])).parent
    pods = _kubectl(stack / "kubeconfig", "get", "pods", "-n", "default")["items"]
    by_job: dict[str, dict[str, Any]] = {
        str(p["metadata"]["labels"]["job-name"]): p
        for p in pods
        if str(p["metadata"].get("labels", {}).get("job-name", "")).startswith(
            ("ichor-talos-", "ichor-cni-")
        )
    }
    talos = [p for job, p in by_job.items() if job.startswith("ichor-talos-")]
    cilium = [p for job, p in by_job.items() if job.startswith("ichor-cni-")]
    # one Job per node: prod-cp-1's of the operation the gate stopped, the other two of
    # the one run again (prod-cp-1, already on the target, was not upgraded twice)
    assert sorted(p["metadata"]["annotations"]["ichor.dev/node"] for p in talos) == [
        "prod-cp-1", "prod-cp-2", "prod-worker-1",
    ], sorted(by_job)  # fmt: skip
    assert len(cilium) == 1, sorted(by_job)
    pods = [*((p, "/ichor/talosctl:") for p in talos), (cilium[0], "/ichor/helm:")]
    for pod, image in pods:
        status = pod["status"]
        assert pod["spec"]["nodeName"] == node.NODE_NAME
        assert status["phase"] == "Succeeded", status
        ran = [*status.get("initContainerStatuses", []), *status["containerStatuses"]]
        assert ran, status
        for container in ran:
            assert image in container["image"], container
            assert container["state"]["terminated"]["exitCode"] == 0, container
            assert container["state"]["terminated"]["reason"] == "Completed", container
    for pod in talos:
        assert [c["name"] for c in pod["status"]["containerStatuses"]] == ["upgrade"]
    # the Talos API stand-in moved each Node when talosctl rebooted it into the target
    prod_nodes = _kubectl(stack / "prod" / "kubeconfig", "get", "nodes")["items"]
    assert {n["status"]["nodeInfo"]["osImage"] for n in prod_nodes} == {"Talos (v1.14.5)"}
    # helm's upgrade: a second revision of the release, deployed, and its DaemonSet
    edge = stack / "edge" / "kubeconfig"
    releases = _kubectl(
        edge, "get", "secrets", "-n", "kube-system", "-l", "owner=helm,name=cilium"
    )["items"]
    revisions = {r["metadata"]["labels"]["version"]: r["metadata"]["labels"] for r in releases}
    assert revisions["2"]["status"] == "deployed", revisions
    assert revisions["1"]["status"] == "superseded", revisions
    daemonset = _kubectl(edge, "get", "daemonset", "cilium", "-n", "kube-system")
    assert daemonset["metadata"]["annotations"]["meta.helm.sh/release-name"] == "cilium"
    image = daemonset["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(f":v{PINNED.cilium_chart}"), image


def test_demo_down_stops_every_process_it_started(demo: DemoRun, tmp_path: Path) -> None:
    processes = demo.state.get("processes")
    assert isinstance(processes, list)
    names = {str(p["name"]) for p in processes}
    assert {"etcd", "kube-apiserver", "edge-etcd", "edge-kube-apiserver"} <= names
    assert {"registry", "operator"} <= names
    assert {"node", "kubelet", "containerd", "prod-kube-apiserver"} <= names
    holder = next(int(p["pid"]) for p in processes if p["name"] == "node")
    cache = Path(str(demo.state["kubeconfig"])).parents[2]
    result = subprocess.run(
        [sys.executable, "-m", "tests.harness.stack", "down", "--name", "demo"],
        env=_env(cache),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    deadline = time.monotonic() + 15
    while any(_alive(int(p["pid"])) for p in processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p["name"] for p in processes if _alive(int(p["pid"]))]
    # nor anything they started (the registry binary is the registry server's child)
    assert _running_under(cache) == []
    # nor anything of the node: its runtime folder, mounts, cgroups, network namespace
    prefix = f"ichor-node-{holder}-"
    assert list(Path("/run").glob(f"{prefix}*")) == []
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(cache) not in mounts
    assert f"/run/{prefix}" not in mounts
    assert [p for h in cgroups.hierarchies() for p in h.glob(f"{prefix}*")] == []
    assert not node.MachineLock().holder().startswith(f"process {holder},")
    # and the machine as it was: sysctls, links, rules, mounts, cgroups, modules
    assert machine.lasting_diff(demo.before)[1] == []


def _running_under(cache: Path) -> list[str]:
    found: list[str] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or not _alive(int(proc.name)):
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(cache) in cmdline:
            found.append(cmdline)
    return found
