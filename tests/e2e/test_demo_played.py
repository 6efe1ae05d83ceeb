"""``ICHOR_DEMO_JOBS=played make demo``: the story for a machine without the node.

The played mode is documented (README, docs/development.md) for a machine where the node
cannot start: one API server, every Job's outcome written by the demo and said so at each
step. It must still run the whole story, say plainly that its Jobs are played, never
claim a Job ran for real, start no node, and leave no process behind after ``stack down``
(what ``make demo-down`` calls). A mode name it does not know is refused with a sentence.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_demo import _alive, _env, _running_under
from tests.harness import binaries

pytestmark = pytest.mark.e2e


def _demo(cache: Path, mode: str, *, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.harness.demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**_env(cache), "ICHOR_DEMO_JOBS": mode},
        timeout=timeout,
        check=False,
    )


def _down(cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.harness.stack", "down", "--name", "demo"],
        env=_env(cache),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.timeout(900)
def test_the_played_story_runs_says_its_jobs_are_played_and_demo_down_stops_it(
    tmp_path: Path,
) -> None:
    for name in ("etcd", "kube-apiserver", "kubectl", "registry"):
        try:
            binaries.find(name)
        except binaries.MissingBinaryError as error:
            pytest.fail(str(error), pytrace=False)
    cache = tmp_path / "cache"
    cache.mkdir()
    try:
        result = _demo(cache, "played", timeout=600)
        output = result.stdout
        assert result.returncode == 0, output
        for step in range(1, 14):
            assert f"=== Step {step}:" in output, f"step {step} missing:\n{output}"
        assert "PLAYED JOBS (ICHOR_DEMO_JOBS=played)" in output
        assert "  Succeeded:" in output
        assert "Everything keeps running:" in output
        # it never claims what did not happen
        assert "Ran for real" not in output
        assert "Jobs that ran for real on the node:" not in output
        state = json.loads((cache / "stacks" / "demo" / "state.json").read_text())
        processes = state["processes"]
        names = {str(p["name"]) for p in processes}
        assert {"etcd", "kube-apiserver", "registry", "operator"} <= names
        assert not names & {"node", "kubelet", "containerd"}, names
        assert all(_alive(int(p["pid"])) for p in processes), "a process died before demo-down"
        down = _down(cache)
        assert down.returncode == 0, down.stdout + down.stderr
        deadline = time.monotonic() + 15
        while any(_alive(int(p["pid"])) for p in processes) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p["name"] for p in processes if _alive(int(p["pid"]))]
        assert _running_under(cache) == []
    finally:
        _down(cache)


def test_a_mode_the_demo_does_not_know_is_refused_with_a_sentence(tmp_path: Path) -> None:
    result = _demo(tmp_path, "kind", timeout=60)
    assert result.returncode != 0
    assert "ICHOR_DEMO_JOBS=kind is refused: use node (the default) or played" in result.stdout
    assert "Traceback" not in result.stdout
    assert _running_under(tmp_path) == []
