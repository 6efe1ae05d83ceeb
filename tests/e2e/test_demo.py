"""``make demo`` end to end: its script runs the whole story and prints what it promises.

The demo runs as a person runs it (``python -m tests.harness.demo``, what ``make demo``
calls) under a cache folder of its own, so a demo a person left running is not touched;
the binaries are the ones ``make testenv`` cached. Afterwards ``stack down --name demo``
(what ``make demo-down`` calls) must stop every process the demo started, the operator
and the registry included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness import binaries, controlplane

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class DemoRun:
    returncode: int
    output: str
    seconds: float
    state: dict[str, object]


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
    began = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tests.harness.demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(cache),
        timeout=420,
        check=False,
    )
    seconds = time.monotonic() - began
    state_file = cache / "stacks" / "demo" / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    try:
        yield DemoRun(result.returncode, result.stdout, seconds, state)
    finally:
        subprocess.run(
            [sys.executable, "-m", "tests.harness.stack", "down", "--name", "demo"],
            env=_env(cache),
            capture_output=True,
            timeout=120,
            check=False,
        )


@pytest.mark.timeout(600)
def test_the_demo_runs_to_the_end_within_minutes(demo: DemoRun) -> None:
    assert demo.returncode == 0, demo.output
    assert demo.seconds < 300, f"the demo took {demo.seconds:.0f} s"
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
    "the demo plays the Job's outcome",
    "$ ichor upgrade talos prod --wait",
    "the default choice is Talos v1.14.5",
    "  Running:",
    "  Succeeded:",
    "=== Step 8:",
    "$ ichor upgrade plan prod",
    "What the rules reach instead",
    "ichor upgrade kubernetes prod v1.36.7",
    "=== Step 9: An older cluster, adopted as it runs",
    "$ ichor adopt edge --kubeconfig edge/kubeconfig",
    "runs Talos v1.13.9, Kubernetes v1.35.5, Cilium 1.19.10",
    "TalosCluster default/edge adopted",
    "=== Step 10: A Cilium-order refusal that names the step",
    "$ ichor upgrade kubernetes edge v1.36.7",
    "upgrade Cilium to 1.20.4 first, the chart this Ichor embeds",
    "$ ichor upgrade plan edge",
    "1. ichor cni upgrade edge",
    "2. ichor upgrade kubernetes edge v1.36.7",
    "=== Step 11:",
    "$ ichor cni upgrade edge --wait",
    "  Succeeded:",
    "Plan accepted: Kubernetes to v1.36.7 for TalosCluster default/edge",
    "=== Step 12:",
    "$ ichor status",
    "=== Step 13: An open window patches a cluster unattended (auto-patch)",
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
    assert "workload cluster: this same API server, with 3 Node objects" in demo.output
    assert "that the demo created" in demo.output


def test_the_listing_is_offered_from_the_seeded_registry(demo: DemoRun) -> None:
    table = demo.output.split("$ kubectl get talosclusters", 1)[1].split("-->", 1)[0]
    row = next(line for line in table.splitlines() if line.startswith("prod "))
    assert row.split()[:6] == ["prod", "v1.14.3", "v1.36.6", "1.20.4", "v1.14.5", "v1.36.7"]


def test_demo_down_stops_every_process_it_started(demo: DemoRun, tmp_path: Path) -> None:
    processes = demo.state.get("processes")
    assert isinstance(processes, list)
    names = {str(p["name"]) for p in processes}
    assert {"etcd", "kube-apiserver", "edge-etcd", "edge-kube-apiserver"} <= names
    assert {"registry", "operator"} <= names
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
