"""A network namespace of the harness's own, and TCP forwarders across its boundary.

The node lives in a network namespace this module creates: a persistent namespace is a
bind mount of ``/proc/<tid>/ns/net`` on a file in the harness's runtime folder, made by a
thread that ``unshare``-d itself (so no ``ip netns`` state under ``/run/netns`` is left
behind), and ended by unmounting that file. Nothing inside it has a route out: the only
links are ``lo``, a dummy link holding the node's addresses, and the bridge and veths the
CNI plugin adds for Pods.

Crossing the boundary is done by :class:`Forwarder`, in this process: it listens in one
namespace (a socket keeps the namespace it was made in) and, per connection, connects
from the other. So the tests reach the node's API server at ``127.0.0.1:PORT`` of the
machine, and the node (its containerd, its Pods) reaches the machine's loopback servers
(registry, workload API server) at the node's own address, without a veth to the
machine, a route, NAT, or any address of the machine's own interfaces.

It refuses to forward to anything but loopback on the machine's side: a forwarder's
target in the machine's namespace must be a 127.0.0.0/8 address.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import selectors
import socket
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
_MNT_DETACH = 2
_BUFFER = 65536
_libc = ctypes.CDLL(None, use_errno=True)


class NamespaceError(RuntimeError):
    """A namespace could not be made, entered or removed."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise NamespaceError(f"{what}: {os.strerror(errno)} (errno {errno})")


def setns(path: Path | str) -> None:
    """Move the calling *thread* into the network namespace at ``path``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, CLONE_NEWNET), f"setns({path})")
    finally:
        os.close(fd)


def in_thread(path: Path | str, work: Callable[[], T]) -> T:
    """Run ``work`` in a fresh thread that entered the namespace at ``path``; return its
    result (sockets it made stay in that namespace)."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            setns(path)
            box.append(work())
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, name=f"netns:{Path(path).name}", daemon=True)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return box[0]


#: The namespace this process started in (the machine's), to return to from a thread.
HOST = f"/proc/{os.getpid()}/ns/net"


class NetworkNamespace:
    """A persistent network namespace bound on ``path``; :meth:`remove` ends it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, path: Path) -> NetworkNamespace:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

        def make() -> None:
            _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
            source = f"/proc/self/task/{threading.get_native_id()}/ns/net"
            result = _libc.mount(source.encode(), str(path).encode(), None, 4096, None)  # MS_BIND
            _check(result, f"bind {source} on {path}")

        # the thread that unshared ends with its namespace bound, so nothing else of this
        # process ever runs in it by accident
        errors: list[BaseException] = []

        def run() -> None:
            try:
                make()
            except BaseException as error:
                errors.append(error)

        thread = threading.Thread(target=run, name="netns-create", daemon=True)
        thread.start()
        thread.join()
        if errors:
            path.unlink(missing_ok=True)
            raise errors[0]
        namespace = cls(path)
        namespace.run("ip", "link", "set", "lo", "up")
        return namespace

    def run(
        self, *command: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a short command (ip, iptables, sysctl) inside the namespace."""
        result = subprocess.run(
            ["nsenter", f"--net={self.path}", "--", *command],
            capture_output=True,
            text=True,
            input=input,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise NamespaceError(
                f"{' '.join(command)} in {self.path.name} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}"
            )
        return result

    def preexec(self) -> None:
        """For ``Popen(preexec_fn=...)``: the child enters the namespace before exec."""
        setns(self.path)

    @property
    def exists(self) -> bool:
        return _is_mountpoint(self.path)

    def remove(self) -> None:
        """Unmount the namespace's file; the namespace ends with its last process."""
        if _is_mountpoint(self.path):
            _check(_libc.umount2(str(self.path).encode(), _MNT_DETACH), f"umount {self.path}")
        self.path.unlink(missing_ok=True)


def _is_mountpoint(path: Path) -> bool:
    target = str(path)
    return any(
        line.split()[4] == target for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )


def mounts_under(roots: Sequence[Path]) -> list[str]:
    """Mount points at or below any of ``roots`` (deepest first)."""
    prefixes = [str(root).rstrip("/") for root in roots]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == p or point.startswith(p + "/") for p in prefixes):
            found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def unmount(point: str) -> None:
    _check(_libc.umount2(point.encode(), _MNT_DETACH), f"umount {point}")


class Forwarder:
    """Accepts on ``listen`` in namespace ``listen_ns`` and connects each connection to
    ``target`` from namespace ``target_ns`` (paths of ``ns/net`` files; ``HOST`` for the
    machine's). ``stop`` closes the listener and every open connection."""

    def __init__(
        self,
        *,
        listen: tuple[str, int],
        target: tuple[str, int],
        listen_ns: str | Path,
        target_ns: str | Path,
    ) -> None:
        if str(target_ns) == HOST and not ipaddress.ip_address(target[0]).is_loopback:
            raise NamespaceError(
                f"refusing to forward to {target[0]} on the machine: only loopback is allowed"
            )
        self.listen = listen
        self.target = target
        self.listen_ns = str(listen_ns)
        self.target_ns = str(target_ns)
        self._stopping = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.connections = 0

        def bind() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(listen)
            sock.listen(64)
            return sock

        self._listener = in_thread(self.listen_ns, bind)
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(
            target=self._accept, name=f"forward:{listen[0]}:{self.port}", daemon=True
        )
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            setns(self.target_ns)
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._open.update((client, upstream))
        try:
            _pump(client, upstream, self._stopping)
        finally:
            with self._lock:
                self._open.difference_update((client, upstream))
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)
        with self._lock:
            open_sockets = list(self._open)
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _pump(a: socket.socket, b: socket.socket, stopping: threading.Event) -> None:
    """Copy both ways until either side closes (half-closes are passed on)."""
    peers = {a: b, b: a}
    open_reads = {a, b}
    with selectors.DefaultSelector() as selector:
        for each in open_reads:
            selector.register(each, selectors.EVENT_READ, data=each)
        while open_reads and not stopping.is_set():
            for key, _ in selector.select(timeout=1.0):
                sock: socket.socket = key.data
                try:
                    data = sock.recv(_BUFFER)
                except OSError:
                    return
                if not data:
                    selector.unregister(sock)
                    open_reads.discard(sock)
                    with contextlib.suppress(OSError):
                        peers[sock].shutdown(socket.SHUT_WR)
                    continue
                try:
                    peers[sock].sendall(data)
                except OSError:
                    return
