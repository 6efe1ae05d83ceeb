"""A named local control plane that outlives the command starting it.

``make cluster-up`` / ``make cluster-down`` (and the demo) run
``python -m tests.harness.stack up|down --name NAME``: ``up`` starts etcd and
kube-apiserver detached, writes their pids, ports and the admin kubeconfig under
``$ICHOR_CACHE/stacks/NAME/`` and prints how to use it; ``down`` stops them and removes
the folder. A second ``up`` of a running stack only prints it again.

It refuses to stop a process it did not start: a pid is signalled only while its
command line is still the binary recorded for it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

from tests.harness import binaries, controlplane, node

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
_STOP_GRACE = 10.0


class StackError(RuntimeError):
    """A stack name or state that cannot be used."""


def stack_dir(name: str) -> Path:
    if not _NAME.match(name):
        raise StackError(f"stack name {name!r} is refused: use letters, digits, '-' and '_'")
    return binaries.cache_dir() / "stacks" / name


def load(name: str) -> controlplane.State | None:
    """The recorded state of stack ``name``, or None when none was started."""
    path = stack_dir(name) / "state.json"
    try:
        state: controlplane.State = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state


def _ours(process: controlplane.ProcessState) -> bool:
    """True while pid still runs the binary we started (pids are reused)."""
    try:
        cmdline = Path(f"/proc/{process['pid']}/cmdline").read_bytes()
    except OSError:
        return False
    return cmdline.split(b"\0", 1)[0].decode(errors="replace") == process["binary"]


def is_running(state: controlplane.State) -> bool:
    return bool(state["processes"]) and all(_ours(p) for p in state["processes"])


def up(name: str) -> controlplane.State:
    """Start stack ``name`` unless it already runs; return its state."""
    directory = stack_dir(name)
    state = load(name)
    if state is not None and is_running(state):
        return state
    if state is not None:
        _stop(state)
    shutil.rmtree(directory, ignore_errors=True)
    plane = controlplane.ControlPlane(workdir=directory, detached=True).start()
    state = plane.state()
    (directory / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    (directory / "timings.json").write_text(
        json.dumps(
            {
                "etcd_start_seconds": round(plane.etcd_start_seconds, 3),
                "apiserver_start_seconds": round(plane.apiserver_start_seconds, 3),
            }
        )
        + "\n"
    )
    return state


def _stop(state: controlplane.State) -> None:
    # the last started first: kube-apiserver before etcd, the demo's operator before the
    # node it runs in
    for process in reversed(state["processes"]):
        if _ours(process):
            os.kill(process["pid"], signal.SIGTERM)
            deadline = time.monotonic() + process.get("grace", _STOP_GRACE)
            while _ours(process) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _ours(process):
                os.kill(process["pid"], signal.SIGKILL)
        if process.get("holds_node"):
            # a holder killed (here or before) leaves the node's cgroups, mounts and
            # network namespace: the node harness ends what a dead holder left
            node.sweep_stale()


def down(name: str) -> bool:
    """Stop stack ``name`` and remove its folder; False when there was nothing to stop."""
    directory = stack_dir(name)
    state = load(name)
    if state is not None:
        _stop(state)
    existed = directory.exists()
    shutil.rmtree(directory, ignore_errors=True)
    return state is not None or existed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.harness.stack",
        description="Start or stop a local etcd + kube-apiserver that keeps running.",
    )
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--name", default="dev", help="stack name (default: dev)")
    args = parser.parse_args(argv)
    try:
        if args.command == "down":
            stopped = down(args.name)
            print(f"stack {args.name}: {'stopped' if stopped else 'was not running'}")
            return 0
        if args.command == "status":
            state = load(args.name)
            if state is None or not is_running(state):
                print(f"stack {args.name}: not running")
                return 1
        else:
            started = time.monotonic()
            state = up(args.name)
            print(f"stack {args.name}: ready in {time.monotonic() - started:.1f} s")
    except (StackError, binaries.MissingBinaryError, controlplane.ControlPlaneError) as error:
        print(f"stack {args.name}: {error}", file=sys.stderr)
        return 1
    kubectl = binaries.testenv_dir() / "bin" / "kubectl"
    print(f"kube-apiserver {state['server']}  (etcd {state['etcd_url']})")
    print(f"kubeconfig {state['kubeconfig']}")
    print(f"export KUBECONFIG={state['kubeconfig']}")
    print(f"# kubectl of the same minor: {kubectl}")
    print(f"# stop with: python -m tests.harness.stack down --name {args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
