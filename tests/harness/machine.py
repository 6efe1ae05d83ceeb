"""What a test run may leave changed on the machine, read before and after the node.

A snapshot holds the machine's (root network namespace's) sysctls, links, iptables and
ip6tables rules, mount points and cgroup folders, and the well-known paths a kubelet,
containerd or CNI plugin would write to when left at their defaults. ``diff`` names what
changed; ``tests/node/test_node_cleanup.py`` requires it to be empty after a node ran a
Pod and stopped.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.harness import cgroups

#: Counters the kernel moves by itself.
VOLATILE_SYSCTLS = frozenset(
    {
        "fs/dentry-state",
        "fs/file-nr",
        "fs/inode-nr",
        "fs/inode-state",
        "fs/aio-nr",
        "kernel/ns_last_pid",
        "kernel/random/uuid",
        "kernel/random/entropy_avail",
        "kernel/pty/nr",
        "net/netfilter/nf_conntrack_count",
    }
)
#: Folders of counters (fs/quota: the quota subsystem's statistics).
VOLATILE_PREFIXES = ("fs/quota/",)

#: Where the parts write when nothing tells them otherwise.
DEFAULT_PATHS = (
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/run/containerd",
    "/var/lib/cni",
    "/etc/cni",
    "/opt/cni",
    "/opt/containerd",
    "/etc/containerd",
    "/var/log/pods",
    "/var/log/containers",
    "/etc/kubernetes",
    "/usr/libexec/kubernetes",
    "/var/run/nri",
    "/run/netns",
    "/var/run/netns",
)

_COUNTERS = re.compile(r"\[\d+:\d+\]")


def sysctls() -> dict[str, str]:
    found: dict[str, str] = {}
    for root, _, files in os.walk("/proc/sys"):
        for name in files:
            path = os.path.join(root, name)
            key = path.removeprefix("/proc/sys/")
            if key in VOLATILE_SYSCTLS or key.startswith(VOLATILE_PREFIXES):
                continue
            try:
                with open(path) as handle:
                    found[key] = handle.read()
            except OSError:
                continue
    return found


def _rules(tool: str) -> str:
    try:
        result = subprocess.run([tool], capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        return f"({tool} not installed)"
    lines = [
        _COUNTERS.sub("", line) for line in result.stdout.splitlines() if not line.startswith("#")
    ]
    return "\n".join(lines)


def links() -> list[str]:
    result = subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=30, check=True
    )
    return sorted(line.split(":")[1].strip().split("@")[0] for line in result.stdout.splitlines())


def mount_points() -> list[str]:
    return sorted(line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())


def cgroup_dirs() -> list[str]:
    return sorted(
        str(child)
        for hierarchy in cgroups.hierarchies()
        for child in hierarchy.iterdir()
        if child.is_dir()
    )


@dataclass(frozen=True)
class Snapshot:
    sysctls: dict[str, str]
    iptables: str
    ip6tables: str
    links: list[str]
    mounts: list[str]
    cgroups: list[str]
    paths: dict[str, bool]

    @classmethod
    def take(cls) -> Snapshot:
        return cls(
            sysctls=sysctls(),
            iptables=_rules("iptables-save"),
            ip6tables=_rules("ip6tables-save"),
            links=links(),
            mounts=mount_points(),
            cgroups=cgroup_dirs(),
            paths={path: os.path.lexists(path) for path in DEFAULT_PATHS},
        )

    def diff(self, after: Snapshot) -> list[str]:
        """What ``after`` changed, one line each: sysctl values, rules, and links, mounts
        and cgroups that appeared (sysctl keys only present after are a newly loaded
        kernel module's, not changes, and are not listed)."""
        changes = [
            f"sysctl {key}: {value.strip()!r} -> {after.sysctls[key].strip()!r}"
            for key, value in self.sysctls.items()
            if key in after.sysctls and after.sysctls[key] != value
        ]
        for name, before_rules, after_rules in (
            ("iptables", self.iptables, after.iptables),
            ("ip6tables", self.ip6tables, after.ip6tables),
        ):
            if before_rules != after_rules:
                added = set(after_rules.splitlines()) - set(before_rules.splitlines())
                removed = set(before_rules.splitlines()) - set(after_rules.splitlines())
                changes.append(f"{name}: added {sorted(added)}, removed {sorted(removed)}")
        for what, before_items, after_items in (
            ("link", self.links, after.links),
            ("mount", self.mounts, after.mounts),
            ("cgroup", self.cgroups, after.cgroups),
        ):
            # only what appeared: the node removes nothing it did not make, and another
            # process's mount or link may go meanwhile
            for item in sorted(set(after_items) - set(before_items)):
                changes.append(f"new {what}: {item}")
        for path, existed in self.paths.items():
            if after.paths[path] != existed:
                changes.append(f"{path}: {'existed' if existed else 'absent'} before, not after")
        return changes
