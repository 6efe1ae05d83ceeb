"""What a test run may leave changed on the machine, read before and after the node.

A snapshot holds the machine's (root network namespace's) sysctls, links, iptables and
ip6tables rules, mount points and cgroup folders, the loaded kernel modules, and the
well-known paths a kubelet, containerd or CNI plugin would write to when left at their
defaults. ``diff`` names what changed; ``tests/node/test_node_cleanup.py`` requires it to
be empty after a node ran a Pod and stopped, and the node tier's shared node
(``tests/node/conftest.py``) and the demo's (``tests/e2e/test_demo.py``) after their stop.

Kernel modules: the kernel loads some on demand for what the node does inside its own
namespace (the bridge and veth links, overlay mounts, iptables matches, conntrack, NAT).
They cannot always be unloaded (``rmmod`` refuses a module in use, and another process may
use it by then), they keep no state of the run once its namespace is gone, and they
change nothing in the machine's own namespace: those in :data:`ALLOWED_MODULES` are
allowed to stay, and ``allowed_modules`` names them. Any other module the run loaded is a
change, ``br_netfilter`` among them: it would send the traffic of the machine's own
bridges through iptables (``net.bridge.bridge-nf-call-*`` is 1 when it loads), and the
node does not need it. A sysctl key that was not there before is a change too, except the
keys of an allowed module (:data:`ALLOWED_MODULE_SYSCTLS`). On a kernel without loadable
modules (no ``/proc/modules``) there is nothing to compare.

A machine where no node ever ran (:class:`FreshView`): a process's own mount namespace in
which none of the default paths exists. The folders holding them are overlays on the
machine's, the paths removed in the overlay, so a reused machine cannot hide what a
node makes there, and the machine itself is not changed. ``/run`` is left as it is: the
machine-wide node lock is a file there.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.harness import cgroups, mountns

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

#: Modules the kernel may load for the node's own namespace and that may stay loaded
#: (shell patterns): the links (bridge, veth), overlay mounts, and netfilter's tables,
#: matches, conntrack and NAT. br_netfilter is deliberately not one of them.
ALLOWED_MODULES = (
    "bridge",
    "stp",
    "llc",
    "veth",
    "overlay",
    "x_tables",
    "ip_tables",
    "ip6_tables",
    "iptable_*",
    "ip6table_*",
    "ipt_*",
    "ip6t_*",
    "xt_*",
    "nf_*",
    "nft_*",
    "nfnetlink*",
    "libcrc32c",
)
#: The sysctl keys those modules bring (conntrack's): not changes when they appear.
ALLOWED_MODULE_SYSCTLS = ("net/netfilter/", "net/nf_conntrack_max")

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


def loaded_modules() -> tuple[str, ...] | None:
    """The loaded kernel modules' names, sorted; None on a kernel that has no loadable
    modules (no ``/proc/modules``)."""
    try:
        text = Path("/proc/modules").read_text()
    except FileNotFoundError:
        return None
    return tuple(sorted(line.split()[0] for line in text.splitlines() if line.strip()))


def _allowed_module(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in ALLOWED_MODULES)


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
    #: None: the kernel has no loadable modules
    modules: tuple[str, ...] | None = None

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
            modules=loaded_modules(),
        )

    def _new_modules(self, after: Snapshot) -> list[str]:
        if self.modules is None or after.modules is None:
            return []
        return sorted(set(after.modules) - set(self.modules))

    def allowed_modules(self, after: Snapshot) -> list[str]:
        """The modules loaded meanwhile that may stay (:data:`ALLOWED_MODULES`)."""
        return [name for name in self._new_modules(after) if _allowed_module(name)]

    def diff(self, after: Snapshot) -> list[str]:
        """What ``after`` changed, one line each: sysctl values and keys that appeared
        (but an allowed module's), rules, links, mounts and cgroups that appeared, and
        modules loaded that are not allowed to stay (see the module's text)."""
        changes = [
            f"sysctl {key}: {value.strip()!r} -> {after.sysctls[key].strip()!r}"
            for key, value in self.sysctls.items()
            if key in after.sysctls and after.sysctls[key] != value
        ]
        # a key that went away was another link's or module's; one that appeared is new
        # state on the machine unless an allowed module brought it
        changes += [
            f"new sysctl {key}: {value.strip()!r}"
            for key, value in sorted(after.sysctls.items())
            if key not in self.sysctls and not key.startswith(ALLOWED_MODULE_SYSCTLS)
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
        # only what was loaded: a module another process unloaded meanwhile is not ours
        changes += [
            f"module loaded: {name}"
            for name in self._new_modules(after)
            if not _allowed_module(name)
        ]
        return changes


def lasting_diff(before: Snapshot, *, within: float = 10.0) -> tuple[Snapshot, list[str]]:
    """``before.diff`` against the machine now, taken again once a second while it is not
    empty, at most ``within`` seconds: another process on the machine (another developer's
    component test) has mounts and cgroups that come and go; what a run left stays."""
    deadline = time.monotonic() + within
    while True:
        after = Snapshot.take()
        changes = before.diff(after)
        if not changes or time.monotonic() >= deadline:
            return after, changes
        time.sleep(1.0)


#: What a fresh view leaves as it is (see the module's text).
UNFENCED = Path("/run")


def fence_of(path: str) -> Path | None:
    """The folder a fresh view covers to hide ``path``: its nearest existing parent
    (symbolic links resolved), or None under :data:`UNFENCED` or at ``/``."""
    folder = Path(os.path.realpath(Path(path).parent))
    while not folder.is_dir():
        folder = folder.parent
    if folder == UNFENCED or UNFENCED in folder.parents or folder == Path("/"):
        return None
    return folder


def _entries(root: Path) -> list[str]:
    """What is under ``root``, one ``relative path (kind)`` each; a whiteout is a
    character device 0:0 in an overlay's upper folder."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(folder, name)
            info = path.lstat()
            if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                kind = "removed"
            elif stat.S_ISDIR(info.st_mode):
                kind = "folder"
            elif stat.S_ISLNK(info.st_mode):
                kind = "link"
            else:
                kind = "file"
            found.append(f"{path.relative_to(root)} ({kind})")
    return sorted(found)


@dataclass(frozen=True)
class FreshView:
    """This process's view of the machine as if no node ever ran (see the module's text).

    ``fences`` maps each covered folder to its overlay's upper folder, where whatever is
    written in that folder lands; ``hidden`` the default paths removed from the view."""

    fences: dict[Path, Path]
    hidden: list[str]
    #: each upper folder's entries right after the paths were removed
    start: dict[Path, list[str]]

    @classmethod
    def enter(cls, scratch: Path) -> FreshView:
        """Move this process (one thread only) into a mount namespace of its own and make
        the default paths outside :data:`UNFENCED` absent there; ``scratch`` (a folder
        that exists) holds the overlays' upper folders, on a tmpfs that ends with the
        namespace."""
        folders = sorted({f for f in map(fence_of, DEFAULT_PATHS) if f is not None})
        # an overlay covers the folders under it: one for the outermost
        folders = [f for f in folders if not any(o in f.parents for o in folders)]
        mountns.unshare_private()
        mountns.mount("fresh-view", scratch, "tmpfs", "mode=0700")
        fences = {}
        for number, folder in enumerate(folders):
            upper, work = scratch / str(number) / "upper", scratch / str(number) / "work"
            upper.mkdir(parents=True)
            work.mkdir()
            mountns.mount(
                "fresh-view", folder, "overlay",
                f"lowerdir={folder},upperdir={upper},workdir={work}",
            )  # fmt: skip
            fences[folder] = upper
        hidden = []
        for path in DEFAULT_PATHS:
            if os.path.lexists(path) and fence_of(path) is not None:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
                hidden.append(path)
        return cls(fences, hidden, {folder: _entries(upper) for folder, upper in fences.items()})

    def written(self) -> list[str]:
        """What was written in the covered folders since :meth:`enter`, as
        ``folder/relative path (kind)``: anything of the view's own removals changed."""
        changes = []
        for folder, upper in self.fences.items():
            for entry in sorted(set(_entries(upper)) ^ set(self.start[folder])):
                changes.append(f"{folder}/{entry}")
        return changes
