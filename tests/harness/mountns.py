"""The node's own mount namespace, where the machine's ``/var/log`` is the node's folder.

The kubelet creates ``/var/log/containers`` when it starts and links every container's
log there: the path is a constant of its code (``ContainerLogsDir``), not a setting. So
every process of the node runs in one mount namespace of the node's own, in which
``/var/log`` is a folder of the node's work folder, bound over it. One namespace for all:
runc, started by containerd's shim, binds the volumes the kubelet mounted into a
container, so they must see the same mounts. It is a slave of the machine's: the
machine's mounts are seen in it, and nothing mounted in it (the node's ``/var/log``, the
Pods' volumes, overlays and network namespace files) reaches the machine.

A holder process (``sleep infinity``, in the node's cgroup tree) keeps it from the
node's start; the namespace ends with its last process, so killing the node's cgroup
tree ends it and every mount made in it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_SLAVE = 1 << 19
_libc = ctypes.CDLL(None, use_errno=True)


class MountNamespaceError(RuntimeError):
    """The namespace could not be made or entered."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise MountNamespaceError(f"{what}: {os.strerror(errno)} (errno {errno})")


def unshare_private() -> None:
    """Move this process into a mount namespace of its own, private both ways: nothing
    mounted in it reaches the machine, nothing the machine mounts later reaches it. Only
    a process with one thread may (``unshare(2)``: EINVAL otherwise)."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "make / rprivate")


def mount(source: str, target: Path, fstype: str, options: str = "") -> None:
    """``mount -t fstype -o options source target`` in this process's namespace."""
    result = _libc.mount(
        source.encode(), bytes(target), fstype.encode(), 0, options.encode() or None
    )
    _check(result, f"mount {fstype} {source} on {target} ({options})")


def inode(pid: int | str = "self") -> int | None:
    """The inode of a process's mount namespace (None once the process is gone)."""
    try:
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino
    except OSError:
        return None


class MountNamespace:
    """A mount namespace held by ``holder``, with ``binds`` (target: source) made in it."""

    def __init__(self, holder: subprocess.Popen[bytes], binds: Mapping[Path, Path]) -> None:
        self.holder = holder
        self.binds = dict(binds)
        self.inode = inode(holder.pid)

    @classmethod
    def create(
        cls,
        binds: Mapping[Path, Path],
        *,
        log: Path,
        preexec: Callable[[], None] = lambda: None,
    ) -> MountNamespace:
        """Start the holder in a new namespace, a slave of this process's, in which each
        target of ``binds`` (a folder that exists) is its source (a folder too); the holder
        runs ``preexec`` first (its cgroup, its parent-death signal)."""
        for target, source in binds.items():
            if not target.is_dir() or not source.is_dir():
                raise MountNamespaceError(f"bind {source} on {target}: both must be folders")
        sleep = shutil.which("sleep") or "/bin/sleep"

        def enter() -> None:
            preexec()
            _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
            _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_SLAVE, None), "make / rslave")
            for target, source in binds.items():
                bind = _libc.mount(bytes(source), bytes(target), None, _MS_BIND, None)
                _check(bind, f"bind {source} on {target}")

        with log.open("ab") as sink:
            try:
                holder = subprocess.Popen(
                    [sleep, "infinity"],
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=enter,
                )
            except subprocess.SubprocessError as error:
                # the holder's own error is lost in the fork; say which step it was
                raise MountNamespaceError(
                    f"could not make the node's mount namespace (unshare, then bind"
                    f" {', '.join(f'{s} on {t}' for t, s in binds.items())}): {error}"
                ) from None
        namespace = cls(holder, binds)
        if namespace.inode is None or namespace.inode == inode():
            holder.kill()
            holder.wait()
            raise MountNamespaceError("the holder of the node's mount namespace is not in one")
        return namespace

    @property
    def path(self) -> str:
        return f"/proc/{self.holder.pid}/ns/mnt"

    def preexec(self, cwd: Path) -> None:
        """For ``Popen(preexec_fn=...)``: the child enters the namespace, and ``cwd`` in it
        (entering a mount namespace moves a process to its root)."""
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _check(_libc.setns(fd, CLONE_NEWNS), f"setns({self.path})")
        finally:
            os.close(fd)
        os.chdir(cwd)
