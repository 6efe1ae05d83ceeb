"""One node per machine, whichever process starts it: a start waits for the machine-wide
lock, within a bound, and names the holder when it gives up; the kernel frees the lock
when its holder dies, so a killed run never blocks the next.

Two nodes at once would share the kubelet's fixed folder (``/var/lib/kubelet``), and the
first to stop would remove it under the other. These tests use a lock file of their own,
so a node another process runs on this machine meanwhile is not disturbed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import cgroups, node

#: Starts no shared node; keeps to the front of the tier with the other such modules.
OWN_NODE = True

HOLD = """
import sys, time
from pathlib import Path
from tests.harness import node
lock = node.MachineLock(Path(sys.argv[1]))
lock.acquire(owner="holder-under-test", wait=5, say=print)
print("held", flush=True)
time.sleep(600)
"""

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    return tmp_path / "ichor-node.lock"


@pytest.fixture
def holder(lock_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process that holds the lock until it is killed."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock_path)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        yield child
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_a_second_process_waits_and_gets_the_lock_when_the_holder_dies(
    lock_path: Path, holder: subprocess.Popen[str]
) -> None:
    said: list[str] = []
    lock = node.MachineLock(lock_path)
    started = time.monotonic()
    with pytest.raises(node.NodeError) as refused:
        lock.acquire(owner="second", wait=2, say=said.append)
    assert time.monotonic() - started >= 2
    message = str(refused.value)
    assert f"process {holder.pid}, node holder-under-test" in message, message
    assert "did not stop within 2 s" in message, message
    assert str(node.KUBELET_FIXED_PATH) in message, message
    assert len(said) == 1, said
    assert f"process {holder.pid}" in said[0], said
    assert not lock.held

    holder.send_signal(signal.SIGKILL)  # no clean-up of its own: the kernel frees it
    holder.wait()
    waited = lock.acquire(owner="second", wait=10, say=said.append)
    try:
        assert waited < 5, waited
        assert lock.held
        assert f"process {os.getpid()}, node second" in lock.holder()
    finally:
        lock.release()
    assert lock.holder() == "", "a released lock still names its holder"


def test_a_node_does_not_start_while_another_process_holds_the_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lock_path: Path, holder: subprocess.Popen[str]
) -> None:
    monkeypatch.setattr(node, "MACHINE_LOCK", lock_path)
    cluster = node.Node(workdir=tmp_path / "node", registry_port=1, lock_wait=1)
    with pytest.raises(node.NodeError) as refused:
        cluster.start()
    assert f"process {holder.pid}" in str(refused.value)
    # nothing of it was made, and this process may start a node afterwards
    assert not cluster.runtime.exists()
    assert not (tmp_path / "node" / "pki").exists()
    for hierarchy in cgroups.hierarchies():
        assert not (hierarchy / f"ichor-node-{cluster.id}").exists()
    assert cluster not in node._running_nodes
