"""`make cluster-up` / `cluster-down`: a named stack that outlives the command starting it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import binaries, controlplane

pytestmark = pytest.mark.component


def _stack(command: str, *, cache: Path) -> subprocess.CompletedProcess[str]:
    env = controlplane.loopback_env(
        {"ICHOR_CACHE": str(cache), "ICHOR_TESTENV": str(binaries.testenv_dir())}
    )
    return subprocess.run(
        [sys.executable, "-m", "tests.harness.stack", command, "--name", "t"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent, the `up` command, has exited).
    return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


def test_stack_up_survives_its_command_and_down_stops_it(tmp_path: Path) -> None:
    try:
        kubectl = binaries.find("kubectl")
        binaries.find("kube-apiserver")
        binaries.find("etcd")
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)

    up = _stack("up", cache=tmp_path)
    state_dir = tmp_path / "stacks" / "t"
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = state_dir / "kubeconfig"
        assert f"export KUBECONFIG={kubeconfig}" in up.stdout
        state = json.loads((state_dir / "state.json").read_text())
        pids = [process["pid"] for process in state["processes"]]
        assert [process["name"] for process in state["processes"]] == ["etcd", "kube-apiserver"]
        assert all(_alive(pid) for pid in pids)

        # The `up` process has exited; the API server still answers.
        namespaces = subprocess.run(
            [str(kubectl), "--kubeconfig", str(kubeconfig), "get", "namespace", "default"],
            capture_output=True,
            text=True,
            env=controlplane.loopback_env(),
            timeout=30,
            check=False,
        )
        assert namespaces.returncode == 0, namespaces.stderr

        again = _stack("up", cache=tmp_path)
        assert again.returncode == 0, again.stderr
        assert json.loads((state_dir / "state.json").read_text()) == state
    finally:
        down = _stack("down", cache=tmp_path)
    assert down.returncode == 0, down.stderr
    assert "stopped" in down.stdout
    assert not any(_alive(pid) for pid in pids)
    assert not state_dir.exists()
    assert _stack("status", cache=tmp_path).returncode == 1
