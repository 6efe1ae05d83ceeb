"""The node's cgroups: one tree per hierarchy, emptied and removed at the end.

Every process the node starts (control plane, containerd and so the shims it spawns,
kubelet, and through the kubelet every container) lives under ``/<root>`` of every
mounted hierarchy (cgroup v1 on this machine, plus the empty cgroup2 of the hybrid
layout). That tree is the list of what to kill: a shim is made to outlive containerd, so
"the processes we started" is not enough. At the end each tree is killed until empty and
removed, deepest first.

It refuses to touch a cgroup outside ``/<root>``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

_KILL_ROUNDS = 100


def hierarchies() -> list[Path]:
    """Mount points of every cgroup (v1) and cgroup2 hierarchy."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype = right.split()[0] if right else ""
        if fstype in ("cgroup", "cgroup2"):
            points.append(Path(left.split()[4]))
    return points


class CgroupTree:
    """``/<root>`` in every hierarchy."""

    def __init__(self, root: str) -> None:
        if "/" in root.strip("/") or not root.strip("/"):
            raise ValueError(f"cgroup root must be one path segment, not {root!r}")
        self.root = root.strip("/")

    @property
    def path(self) -> str:
        """The path kubelet's ``cgroupRoot`` takes."""
        return f"/{self.root}"

    def dirs(self) -> list[Path]:
        return [h / self.root for h in hierarchies()]

    def create(self, child: str) -> None:
        """``/<root>/<child>`` in every hierarchy (cpuset given its parent's cpus/mems)."""
        for hierarchy in hierarchies():
            parent = hierarchy
            for part in (self.root, child):
                path = parent / part
                path.mkdir(exist_ok=True)
                for name in ("cpuset.cpus", "cpuset.mems"):
                    mine = path / name
                    if mine.exists() and not mine.read_text().strip():
                        mine.write_text((parent / name).read_text())
                parent = path

    def enter(self, child: str) -> None:
        """Move the calling process into ``/<root>/<child>`` everywhere (for preexec)."""
        pid = str(os.getpid())
        for hierarchy in hierarchies():
            procs = hierarchy / self.root / child / "cgroup.procs"
            if procs.exists():
                procs.write_text(pid)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for top in self.dirs():
            if not top.is_dir():
                continue
            # os.walk, not rglob: the kubelet removes a Pod's cgroup while this walks, and
            # rglob raises on a folder gone between its listing and its scan
            for folder, _, files in os.walk(top):
                if "cgroup.procs" not in files:
                    continue
                with contextlib.suppress(OSError, ValueError):
                    text = (Path(folder) / "cgroup.procs").read_text()
                    found.update(int(p) for p in text.split())
        return found

    def kill_all(self) -> None:
        """SIGKILL every process in the tree until none is left (bounded)."""
        for _ in range(_KILL_ROUNDS):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        raise RuntimeError(f"processes left in cgroup {self.path}: {sorted(self.pids())}")

    def remove(self) -> None:
        """Remove the (empty) tree in every hierarchy, deepest first."""
        for top in self.dirs():
            if not top.is_dir():
                continue
            for directory in sorted(
                (p for p in top.rglob("*") if p.is_dir()),
                key=lambda p: len(p.parts),
                reverse=True,
            ):
                _rmdir(directory)
            _rmdir(top)

    def exists(self) -> list[Path]:
        return [d for d in self.dirs() if d.exists()]


def _rmdir(path: Path) -> None:
    for _ in range(_KILL_ROUNDS):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    path.rmdir()
