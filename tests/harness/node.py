"""A real one-node Kubernetes from upstream parts, inside a network namespace of its own.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd (with runc and
the CNI bridge plugin), kubelet and kube-proxy: the binaries ``make testenv`` builds, the
same parts kind assembles, started here in a few seconds. Pods, Jobs, Deployments,
Services, probes, ``kubectl logs``/``exec`` and webhooks behind a Service all work.

Where things are:

- Everything the node uses lives in a network namespace this harness creates
  (:mod:`tests.harness.netns`). Its links: ``lo``, the port-less bridge ``ichor0`` holding the node
  address :data:`NODE_IP` (and any extra address a test asks for), and the CNI bridge of
  the Pods. It has no route out: the only routes are the Pod range on the bridge and the
  Service range on the dummy (so connections made in the node to a ClusterIP reach
  kube-proxy's DNAT), so a connection to any other address fails at once as unreachable.
  The bridge does no masquerading (kube-proxy's own MASQUERADE, for the Service traffic
  it marks, applies to packets that stay on the Pods' bridge). Two ``mangle`` rules, IPv4
  and IPv6, are backstops should a route out ever appear: anything forwarded off the
  bridge is dropped, and so is anything the node sends out of a link that is not ``lo``,
  its own link, the bridge or a Pod's veth (the chain :data:`OUTPUT_CHAIN`).
- The tests reach the API server at ``127.0.0.1:<port>`` of the machine through a
  forwarder; the node reaches the machine's loopback servers (the registry, a workload
  cluster's API server) at ``NODE_IP:<same port>`` through forwarders
  (:meth:`Node.expose`). The machine's own interface addresses are never used.
- Processes, containers and the shims containerd leaves behind live in the cgroup tree
  ``/ichor-node-<id>`` (:mod:`tests.harness.cgroups`); state under
  ``/run/ichor-node-<id>`` and the work folder.
- They all run in a mount namespace of the node's own (:mod:`tests.harness.mountns`):
  the mounts of the kubelet and containerd stay in it, and in it ``/var/log`` is the work
  folder's ``var-log``, where the kubelet creates its fixed ``/var/log/containers``.
  Every other folder a part would write by default is set to one in the work folder.

:meth:`Node.stop` leaves nothing: it kills the cgroup tree (the mount namespace ends
with its last process, and every mount made in it), unmounts what is left under the
node's folders, removes the cgroups and the network namespace (with it the bridge, veths,
iptables chains and the namespace's own sysctls), and writes
back the machine-wide sysctls the kubelet sets (``kernel.panic``,
``vm.overcommit_memory``...). ``tests/node/test_node_cleanup.py`` checks each of these.

What this machine needs and a laptop would not: cgroup v1 (``failCgroupV1: false``,
``cgroupfs``), no CAP_SYS_RESOURCE (containerd ``restrict_oom_score_adj``, kubelet
``oomScoreAdj: 0``), and relaxed eviction thresholds (the disk may be full of caches).

It refuses to be a cluster for anything else: one node, no DNS (a Pod's resolver is
127.0.0.1), no image pulls from outside (containerd knows only the node's registry), and
certificates that last a day.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.harness import binaries, certs, cgroups, controlplane, mountns, netns

NODE_NAME = "ichor-node"
NODE_IP = "10.201.0.2"
#: Extra addresses a test may put on the node (workload "nodes" such as a Talos API).
EXTRA_RANGE = "10.201.1."
POD_CIDR = "10.244.0.0/24"
POD_GATEWAY = "10.244.0.1"
SERVICE_CIDR = controlplane.SERVICE_CLUSTER_IP_RANGE
KUBERNETES_SERVICE_IP = "10.0.0.1"
APISERVER_PORT = 6443
ETCD_PORT = 2379
BRIDGE = "ichor-cni0"
DUMMY = "ichor0"
#: The node's own chain in the ``mangle`` table's OUTPUT (IPv4 and IPv6): what the node
#: sends leaves by lo, its link, the Pods' bridge or their veths, or is dropped.
OUTPUT_CHAIN = "ICHOR-NODE-OUTPUT"
PAUSE_IMAGE_PATH = "ichor/pause:3.10"

#: The one path the kubelet writes whatever its flags say (the device plugins' folder is a
#: constant in its code), and the CNI library's result cache (containerd sets no other):
#: removed at stop when the node made them, else only the node's own entries.
KUBELET_FIXED_PATH = Path("/var/lib/kubelet")
CNI_CACHE = Path("/var/lib/cni")
CNI_NETWORK = "ichor-node"
#: The kubelet creates ``/var/log/containers`` whatever its flags say (its container-log
#: folder is a constant in its code): in the node's mount namespace (:mod:`mountns`) this
#: folder is the work folder's :data:`VAR_LOG_FOLDER`, so the machine's is never written.
VAR_LOG = Path("/var/log")
VAR_LOG_FOLDER = "var-log"

#: Sysctls the kubelet sets machine-wide (not per network namespace) when it starts.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)

_READY_TIMEOUT = 90.0
_STOP_GRACE = 10.0
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


SYSCTLS_FILE = "sysctls.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """End what a node of a process that died without its stop left (a SIGKILLed test
    run): its cgroup tree (the shims and containers outlive it), its mounts, its network
    namespace, its runtime folder, and the machine-wide sysctls it recorded. A node whose
    process still runs is left alone. Returns the ids swept."""
    swept = []
    for runtime in sorted(Path("/run").glob("ichor-node-*")):
        node_id = runtime.name.removeprefix("ichor-node-")
        owner = node_id.split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)):
            continue
        tree = cgroups.CgroupTree(f"ichor-node-{node_id}")
        tree.kill_all()
        roots = [runtime]
        with contextlib.suppress(OSError, ValueError, KeyError):
            roots.append(Path(json.loads((runtime / SYSCTLS_FILE).read_text())["workdir"]))
        for point in netns.mounts_under(roots):
            with contextlib.suppress(netns.NamespaceError):
                netns.unmount(point)
        tree.remove()
        recorded = runtime / SYSCTLS_FILE
        with contextlib.suppress(OSError, ValueError):
            state = json.loads(recorded.read_text())
            for name, value in state["sysctls"].items():
                if name in KUBELET_SYSCTLS:
                    Path("/proc/sys", name).write_text(value)
            for made in state["made"]:
                if Path(made) in (KUBELET_FIXED_PATH, CNI_CACHE):
                    shutil.rmtree(made, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)
        swept.append(node_id)
    for hierarchy in cgroups.hierarchies():
        for stale in hierarchy.glob("ichor-node-*"):
            owner = stale.name.removeprefix("ichor-node-").split("-", 1)[0]
            if owner.isdigit() and not _alive(int(owner)):
                tree = cgroups.CgroupTree(stale.name)
                tree.kill_all()
                tree.remove()
    return swept


#: Held from a node's start to the end of its stop, by whichever process runs it: two
#: nodes on one machine would share the kubelet's fixed folder (and the first to stop
#: would remove it under the other). The kernel releases it when the holder dies.
MACHINE_LOCK = Path("/run/ichor-node.lock")
#: Seconds a start waits for another process's node to stop (a whole node tier may run).
LOCK_WAIT = 3600.0


class MachineLock:
    """The machine-wide lock of nodes: ``flock`` on :data:`MACHINE_LOCK`, which names its
    holder (pid, node id, since when) for whoever waits."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or MACHINE_LOCK
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> str:
        """Who holds it, as the holder wrote it (empty when nobody ever did)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def acquire(self, *, owner: str, wait: float, say: Callable[[str], None]) -> float:
        """Take the lock within ``wait`` seconds; the seconds waited. Raises ``NodeError``
        naming the holder when it is not free by then."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        started = time.monotonic()
        told = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    waited = time.monotonic() - started
                    holder = self.holder() or "holder unknown"
                    if waited >= wait:
                        raise NodeError(
                            f"another node runs on this machine ({holder};"
                            f" lock {self.path}) and did not stop within {wait:.0f} s: one node"
                            f" runs at a time, as two kubelets share {KUBELET_FIXED_PATH};"
                            f" wait for that run to end, or end it"
                        ) from None
                    if not told:
                        say(
                            f"waiting up to {wait:.0f} s for the node of {holder} to stop"
                            f" (machine-wide lock {self.path})"
                        )
                        told = True
                    time.sleep(min(1.0, wait - waited))
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(
            fd,
            f"process {os.getpid()}, node {owner}, since {time.strftime('%H:%M:%S')}\n".encode(),
            0,
        )
        self._fd = fd
        return time.monotonic() - started

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)


def _say(message: str) -> None:
    print(f"[node] {message}", file=sys.stderr, flush=True)


_running_nodes: set[Node] = set()
_one_at_a_time = threading.Lock()


class NodeError(RuntimeError):
    """The node did not start; the message names the part and the end of its log."""


def runc_binary() -> Path:
    return _debian("runc", Path("/usr/sbin/runc"))


def cni_dir() -> Path:
    return _debian("containernetworking-plugins", Path("/usr/lib/cni/bridge")).parent


def _debian(package: str, path: Path) -> Path:
    if not os.access(path, os.X_OK):
        raise binaries.MissingBinaryError(
            f"{path} is missing: run `make testenv`, which installs the Debian package"
            f" {package} (apt-get) with the node's other parts"
        )
    return path


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def running(self) -> bool:
        return self.popen.poll() is None

    def terminate(self) -> None:
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _read_sysctl(name: str) -> str:
    return Path("/proc/sys", name).read_text().strip()


@dataclass
class Timings:
    etcd: float = 0.0
    apiserver: float = 0.0
    node_ready: float = 0.0
    service_account: float = 0.0
    stop: float = 0.0
    #: seconds the start waited for another process's node (machine-wide lock)
    lock_wait: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)


@dataclass
class Exposure:
    """A machine's loopback server made reachable in the node (:meth:`Node.expose`):
    ``endpoint`` is ``address:port`` as the node and its Pods name it; ``close()`` (or the
    end of a ``with`` block) stops the forwarder. Closing twice, or after the node's stop,
    does nothing."""

    endpoint: str
    node: Node
    forwarder: netns.Forwarder

    def close(self) -> None:
        self.node._close_forwarder(self.forwarder)

    def __enter__(self) -> Exposure:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Node(controlplane.ControlPlane):
    """The control plane plus containerd, kubelet, controller-manager, scheduler and
    kube-proxy, all inside the node's network namespace.

    ``registry_port``: the machine's loopback port of the registry the node pulls from
    (``NODE_IP:<port>``, plain HTTP). Client methods (``kubectl``, ``user_kubeconfig``,
    ``kubeconfig``, ``server``) are those of :class:`ControlPlane`: ``server`` is the
    forwarder on the machine's loopback.
    """

    def __init__(self, *, workdir: Path, registry_port: int, lock_wait: float = LOCK_WAIT) -> None:
        resolved = workdir.resolve()
        if resolved == VAR_LOG or VAR_LOG in resolved.parents:
            raise NodeError(
                f"the node's work folder {resolved} is under {VAR_LOG}, which the node's"
                f" mount namespace replaces with a folder of its own: choose one elsewhere"
            )
        super().__init__(workdir=workdir)
        self.id = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.runtime = Path(f"/run/ichor-node-{self.id}")
        self.cgroups = cgroups.CgroupTree(f"ichor-node-{self.id}")
        self.namespace: netns.NetworkNamespace | None = None
        self.mounts: mountns.MountNamespace | None = None
        self.registry_port = registry_port
        self.timings = Timings()
        self._processes: list[_Process] = []
        self._forwarders: list[netns.Forwarder] = []
        self._sysctls: dict[str, str] = {}
        self._addresses: list[str] = []
        self._stopped = False
        self._made_kubelet_path = False
        self._made_cni_cache = False
        self._lock = threading.Lock()
        self._machine_lock = MachineLock()
        self._lock_wait = lock_wait

    # -- addresses -----------------------------------------------------------------

    @property
    def registry(self) -> str:
        """The registry host as the node and its Pods name it."""
        return f"{NODE_IP}:{self.registry_port}"

    @property
    def pause_image(self) -> str:
        return f"{self.registry}/{PAUSE_IMAGE_PATH}"

    def image(self, path: str) -> str:
        """``<node registry>/<path>``: how a Pod names an image pushed to the registry."""
        return f"{self.registry}/{path}"

    def expose(self, port: int, *, address: str = NODE_IP) -> Exposure:
        """Make the machine's ``127.0.0.1:port`` reachable in the node at ``address:port``
        (for Pods too) until the returned handle is closed, or the node stops; its
        ``endpoint`` is ``address:port``. Whoever exposes a server that stops before the
        node closes the handle with it (:meth:`WorkloadPlane.stop
        <tests.harness.workload.WorkloadPlane.stop>` does), so nothing in the node
        accepts for a server that is gone."""
        assert self.namespace is not None
        forwarder = netns.Forwarder(
            listen=(address, port),
            target=("127.0.0.1", port),
            listen_ns=self.namespace.path,
            target_ns=netns.HOST,
        )
        with self._lock:
            self._forwarders.append(forwarder)
        return Exposure(endpoint=f"{address}:{port}", node=self, forwarder=forwarder)

    def _close_forwarder(self, forwarder: netns.Forwarder) -> None:
        with self._lock:
            if forwarder not in self._forwarders:
                return  # closed before, or by the node's stop
            self._forwarders.remove(forwarder)
        forwarder.stop()

    def add_address(self, address: str) -> None:
        """One more address on the node's own link (must be in ``EXTRA_RANGE``)."""
        if not address.startswith(EXTRA_RANGE):
            raise NodeError(f"extra node addresses are in {EXTRA_RANGE}0/24, not {address}")
        assert self.namespace is not None
        if address not in self._addresses:
            self.namespace.run("ip", "addr", "add", f"{address}/32", "dev", DUMMY)
            self._addresses.append(address)

    # -- lifecycle -----------------------------------------------------------------

    def start(self, *, locked: Callable[[], None] | None = None) -> Node:
        """Start every part and return once the Node is Ready and the default
        ServiceAccount exists. A missing binary raises ``MissingBinaryError``.

        ``locked`` is called once this process holds the machine-wide lock and a killed
        run's leftovers are swept, before anything of this node exists (a snapshot of the
        machine taken there holds no other node's state)."""
        found = {
            name: binaries.find(name)
            for name in (
                "etcd",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubelet",
                "kube-proxy",
                "containerd",
                "containerd-shim-runc-v2",
                "kubectl",
            )
        }
        runc_binary()
        cni_dir()
        if os.geteuid() != 0:
            raise NodeError("the node needs root (network namespace, cgroups, mounts)")
        with _one_at_a_time:
            if _running_nodes:
                raise NodeError(
                    "another node of this process is running: two kubelets on one machine"
                    f" share {KUBELET_FIXED_PATH}/device-plugins; stop it first"
                )
            _running_nodes.add(self)
        try:
            self.timings.lock_wait = self._machine_lock.acquire(
                owner=self.id, wait=self._lock_wait, say=_say
            )
        except BaseException:
            with _one_at_a_time:
                _running_nodes.discard(self)
            raise
        started = time.monotonic()
        atexit.register(self.stop)
        try:
            sweep_stale()
            if locked is not None:
                locked()
            self._made_kubelet_path = not KUBELET_FIXED_PATH.exists()
            self._made_cni_cache = not CNI_CACHE.exists()
            self._sysctls = {name: _read_sysctl(name) for name in KUBELET_SYSCTLS}
            for directory in (self.pki, self.logs, self.runtime):
                directory.mkdir(parents=True, exist_ok=True)
            # for a later run to put back if this process is killed before its stop
            made = [
                str(path)
                for path, flag in (
                    (KUBELET_FIXED_PATH, self._made_kubelet_path),
                    (CNI_CACHE, self._made_cni_cache),
                )
                if flag
            ]
            (self.runtime / SYSCTLS_FILE).write_text(
                json.dumps({"sysctls": self._sysctls, "made": made, "workdir": str(self.workdir)})
            )
            self._write_pki()
            self._network()
            self.cgroups.create("system")
            self.cgroups.create("runtime")
            self._mount_namespace()
            self._start_etcd_in_node(found["etcd"])
            self._start_apiserver_in_node(found["kube-apiserver"])
            self._start_containerd(found["containerd"])
            self._start_kubelet(found["kubelet"])
            self._start_proxy(found["kube-proxy"])
            self._start_controller_manager(found["kube-controller-manager"])
            self._start_scheduler(found["kube-scheduler"])
            self._wait_node_ready()
            self.timings.node_ready = time.monotonic() - started
            self._wait_service_account()
            self.timings.service_account = time.monotonic() - started
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, *, locked: Callable[[], None] | None = None) -> None:
        """Stop everything and leave nothing behind (idempotent).

        ``locked`` is called once nothing of this node is left, while this process still
        holds the machine-wide lock (a snapshot taken there holds no other node's state)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        started = time.monotonic()
        problems: list[str] = []

        def step(what: str, action: Callable[[], None]) -> None:
            try:
                action()
            except Exception as error:
                problems.append(f"{what}: {error}")

        # the kubelet first, so it restarts nothing it sees dying
        for process in self._processes:
            if process.name == "kubelet":
                process.terminate()
                process.wait(_STOP_GRACE)
        step("kill the node's cgroups", self.cgroups.kill_all)
        for process in reversed(self._processes):
            process.terminate()
        for process in reversed(self._processes):
            process.wait(_STOP_GRACE)
        self._processes.clear()
        step("kill the node's cgroups", self.cgroups.kill_all)
        with self._lock:
            forwarders, self._forwarders = self._forwarders, []
        for forwarder in forwarders:
            step("stop a forwarder", forwarder.stop)
        step("unmount", self._unmount)
        step("remove the node's cgroups", self.cgroups.remove)
        if self.namespace is not None:
            step("remove the network namespace", self.namespace.remove)
        step("restore sysctls", self._restore_sysctls)
        step("remove the runtime folder", lambda: shutil.rmtree(self.runtime))
        if self._made_kubelet_path:
            step("remove the kubelet's fixed folder", lambda: shutil.rmtree(KUBELET_FIXED_PATH))
        step("remove the CNI cache entries", self._clean_cni_cache)
        shutil.rmtree(self.workdir / "etcd", ignore_errors=True)
        shutil.rmtree(self.workdir / "containerd", ignore_errors=True)
        atexit.unregister(self.stop)
        if locked is not None:
            step("the call under the lock after the stop", locked)
        # last: the next node (of any process) may start once nothing of this one is left
        self._machine_lock.release()
        with _one_at_a_time:
            _running_nodes.discard(self)
        self.timings.stop = time.monotonic() - started
        if problems:
            raise NodeError("the node did not stop cleanly: " + "; ".join(problems))

    @property
    def running(self) -> bool:
        return bool(self._processes) and all(p.running() for p in self._processes)

    def process_names(self) -> list[str]:
        return [p.name for p in self._processes if p.running()]

    def process_states(self) -> list[controlplane.ProcessState]:
        """Its running parts as a stack's ``state.json`` records processes."""
        return [
            {
                "name": p.name,
                "pid": p.popen.pid,
                "binary": str(p.popen.args[0]) if isinstance(p.popen.args, list) else "",
                "log": str(p.log),
            }
            for p in self._processes
            if p.running()
        ]

    # -- internals -----------------------------------------------------------------

    def _unmount(self) -> None:
        roots = [self.runtime, self.workdir]
        for _ in range(5):
            points = netns.mounts_under(roots)
            if self.namespace is not None:
                points = [p for p in points if p != str(self.namespace.path)]
            if not points:
                return
            for point in points:
                with contextlib.suppress(netns.NamespaceError):
                    netns.unmount(point)
        left = netns.mounts_under(roots)
        if self.namespace is not None:
            left = [p for p in left if p != str(self.namespace.path)]
        if left:
            raise NodeError(f"mounts left: {left}")

    def _clean_cni_cache(self) -> None:
        if self._made_cni_cache:
            shutil.rmtree(CNI_CACHE, ignore_errors=True)
            return
        for entry in (CNI_CACHE / "results").glob(f"{CNI_NETWORK}-*"):
            entry.unlink(missing_ok=True)

    def _restore_sysctls(self) -> None:
        for name, value in self._sysctls.items():
            path = Path("/proc/sys", name)
            if path.read_text().strip() != value:
                path.write_text(value)

    def _mount_namespace(self) -> None:
        """The mount namespace every part of the node runs in, ``/var/log`` there being the
        work folder's :data:`VAR_LOG_FOLDER`; its holder is the node's first process."""
        var_log = self.workdir.resolve() / VAR_LOG_FOLDER
        var_log.mkdir(parents=True, exist_ok=True)
        log = self.logs / "mount-namespace.log"
        assert self.namespace is not None
        network = self.namespace
        tree = self.cgroups
        main = threading.current_thread() is threading.main_thread()

        def enter() -> None:
            # a process of the node like the others: its cgroup tree, its network namespace
            tree.enter("system")
            network.preexec()
            if main:
                _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

        try:
            self.mounts = mountns.MountNamespace.create({VAR_LOG: var_log}, log=log, preexec=enter)
        except mountns.MountNamespaceError as error:
            raise NodeError(f"{error}; end of {log}:\n{_log_tail(log)}") from None
        self._processes.append(_Process(name="mount-namespace", popen=self.mounts.holder, log=log))

    def _network(self) -> None:
        namespace = netns.NetworkNamespace.create(self.runtime / "net")
        self.namespace = namespace
        run = namespace.run
        # a bridge without ports: this kernel has no dummy links, and a bridge with nothing
        # attached holds addresses and swallows what is routed to it, as a dummy would
        run("ip", "link", "add", DUMMY, "type", "bridge")
        run("ip", "addr", "add", f"{NODE_IP}/32", "dev", DUMMY)
        run("ip", "link", "set", DUMMY, "up")
        # connections the node itself makes to a ClusterIP need a route before kube-proxy's
        # OUTPUT DNAT sees them; the dummy link drops whatever is not rewritten
        run("ip", "route", "add", SERVICE_CIDR, "dev", DUMMY)
        for tool in ("iptables", "ip6tables"):
            # backstops, should a route out ever appear: nothing is forwarded off the Pods'
            # bridge, and the node sends nothing out of a link other than its own
            run(tool, "-t", "mangle", "-A", "FORWARD", "!", "-o", BRIDGE, "-j", "DROP")
            run(tool, "-t", "mangle", "-N", OUTPUT_CHAIN)
            for link in ("lo", DUMMY, BRIDGE, "veth+"):
                run(tool, "-t", "mangle", "-A", OUTPUT_CHAIN, "-o", link, "-j", "RETURN")
            run(tool, "-t", "mangle", "-A", OUTPUT_CHAIN, "-j", "DROP")
            run(tool, "-t", "mangle", "-A", "OUTPUT", "-j", OUTPUT_CHAIN)
        # the machine's registry, for containerd (pulls) and Pods (charts)
        self.expose(self.registry_port)
        # the node's API server, for the tests on the machine's loopback
        self._forwarders.append(
            netns.Forwarder(
                listen=("127.0.0.1", 0),
                target=("127.0.0.1", APISERVER_PORT),
                listen_ns=netns.HOST,
                target_ns=namespace.path,
            )
        )
        self.server = f"https://127.0.0.1:{self._forwarders[-1].port}"

    def _write_pki(self) -> None:
        super()._write_pki()
        authority = self.authority
        pki = self.pki
        serving = authority.issue_server(
            hosts=[
                "127.0.0.1",
                "localhost",
                NODE_IP,
                KUBERNETES_SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            common_name="kube-apiserver",
        )
        serving.write(cert_path=pki / "apiserver.crt", key_path=pki / "apiserver.key")
        for name, user, groups in (
            ("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
            ("controller-manager", "system:kube-controller-manager", ()),
            ("scheduler", "system:kube-scheduler", ()),
            ("kubelet-client", f"system:node:{NODE_NAME}", ("system:nodes",)),
            ("kube-proxy", "system:kube-proxy", ()),
        ):
            pem = authority.issue_client(user=user, groups=groups)
            pem.write(cert_path=pki / f"{name}.crt", key_path=pki / f"{name}.key")
            controlplane.write_kubeconfig(
                pki / f"{name}.kubeconfig",
                server=f"https://127.0.0.1:{APISERVER_PORT}",
                ca_pem=authority.cert_pem,
                user=user,
                client=pem,
            )
        kubelet_serving = authority.issue_server(hosts=[NODE_IP, NODE_NAME])
        kubelet_serving.write(
            cert_path=pki / "kubelet-serving.crt", key_path=pki / "kubelet-serving.key"
        )

    def _launch(
        self,
        name: str,
        binary: Path,
        args: Sequence[str],
        *,
        cgroup: str = "system",
        env: dict[str, str] | None = None,
    ) -> _Process:
        assert self.namespace is not None
        namespace = self.namespace
        tree = self.cgroups
        log = self.logs / f"{name}.log"
        main = threading.current_thread() is threading.main_thread()

        mounts = self.mounts
        workdir = self.workdir

        def enter() -> None:
            tree.enter(cgroup)
            namespace.preexec()
            if mounts is not None:
                mounts.preexec(workdir)
            if main:
                _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

        with log.open("ab") as sink:
            popen = subprocess.Popen(
                [str(binary), *args],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=controlplane.loopback_env(env),
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=enter,
            )
        process = _Process(name=name, popen=popen, log=log)
        self._processes.append(process)
        return process

    def _wait_for(self, process: _Process, ready: Callable[[], bool], *, what: str) -> float:
        started = time.monotonic()
        deadline = started + _READY_TIMEOUT
        while time.monotonic() < deadline:
            if not process.running():
                raise NodeError(
                    f"{process.name} exited with {process.popen.returncode} while starting;"
                    f" end of {process.log}:\n{_log_tail(process.log)}"
                )
            if ready():
                seconds = time.monotonic() - started
                self.timings.parts[process.name] = seconds
                return seconds
            time.sleep(0.1)
        raise NodeError(
            f"{process.name}: {what} not reached after {_READY_TIMEOUT:.0f} s;"
            f" end of {process.log}:\n{_log_tail(process.log)}"
        )

    def _in_node(self, probe: Callable[[], bool]) -> bool:
        assert self.namespace is not None
        return netns.in_thread(self.namespace.path, probe)

    def _start_etcd_in_node(self, binary: Path) -> None:
        data = self.workdir / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        url = f"http://127.0.0.1:{ETCD_PORT}"
        peer = "http://127.0.0.1:2380"
        process = self._launch(
            "etcd",
            binary,
            [
                "--name=default",
                f"--data-dir={data}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--listen-metrics-urls=http://127.0.0.1:2381",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self.etcd_url = url
        self.timings.etcd = self._wait_for(
            process, lambda: self._in_node(lambda: _http_ok(f"{url}/health")), what="/health"
        )
        self.etcd_start_seconds = self.timings.etcd

    def _start_apiserver_in_node(self, binary: Path) -> None:
        pki = self.pki
        process = self._launch(
            "kube-apiserver",
            binary,
            [
                f"--advertise-address={NODE_IP}",
                "--bind-address=0.0.0.0",
                f"--secure-port={APISERVER_PORT}",
                f"--cert-dir={pki / 'apiserver-generated'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={self.ca_file}",
                f"--etcd-servers={self.etcd_url}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                # the webhook client certificate, as the component tests' API server
                # presents it (ControlPlane writes the configuration with its PKI)
                f"--admission-control-config-file={pki / 'admission.yaml'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                f"--kubelet-certificate-authority={self.ca_file}",
                "--kubelet-preferred-address-types=InternalIP",
                "--profiling=false",
            ],
        )
        context = self.ssl_context()
        self.timings.apiserver = self._wait_for(
            process, lambda: _https_ok(f"{self.server}/readyz", context), what="/readyz"
        )
        self.apiserver_start_seconds = self.timings.apiserver
        controlplane.write_kubeconfig(
            self.kubeconfig,
            server=self.server,
            ca_pem=self.authority.cert_pem,
            user=controlplane.ADMIN_USER,
            client=certs.Pem(
                cert=(pki / "admin.crt").read_bytes(), key=(pki / "admin.key").read_bytes()
            ),
        )

    @property
    def containerd_socket(self) -> Path:
        return self.runtime / "containerd.sock"

    def _containerd_config(self) -> str:
        root = self.workdir / "containerd"
        certs_d = root / "certs.d"
        host_dir = certs_d / self.registry
        host_dir.mkdir(parents=True, exist_ok=True)
        (host_dir / "hosts.toml").write_text(
            f'server = "http://{self.registry}"\n\n'
            f'[host."http://{self.registry}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
            "  skip_verify = true\n"
        )
        cni_conf = self.workdir / "cni" / "net.d"
        cni_conf.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-ichor.conflist").write_text(json.dumps(self._cni_config(), indent=2))
        runtime = "plugins.'io.containerd.cri.v1.runtime'"
        images = "plugins.'io.containerd.cri.v1.images'"
        state = self.runtime / "containerd"
        # every path containerd would default to outside its root/state is set or its
        # plugin disabled, so it writes nothing under /opt, /etc or /var
        return f"""version = 4
root = '{root / "root"}'
state = '{state}'
imports = []
disabled_plugins = [
  'io.containerd.nri.v1.nri',
  'io.containerd.internal.v1.opt',
  'io.containerd.image-verifier.v1.bindir',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.tracing.processor.v1.otlp',
  'io.containerd.internal.v1.tracing',
]

[debug]
  level = 'info'

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = '{self.containerd_socket}'
  [plugins.'io.containerd.server.v1.ttrpc']
    address = '{self.runtime / "containerd.sock.ttrpc"}'
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = '{self.runtime / "s"}'
  [plugins.'io.containerd.server.v1.debug']
    address = ''
  [plugins.'io.containerd.server.v1.metrics']
    address = ''
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
  [{runtime}]
    restrict_oom_score_adj = true
    enable_selinux = false
    netns_mounts_under_state_dir = true
    enable_cdi = false
    [{runtime}.containerd]
      default_runtime_name = 'runc'
      [{runtime}.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [{runtime}.containerd.runtimes.runc.options]
          BinaryName = '{runc_binary()}'
          Root = '{self.runtime / "runc"}'
          SystemdCgroup = false
    [{runtime}.cni]
      bin_dirs = ['{cni_dir()}']
      conf_dir = '{cni_conf}'
      max_conf_num = 1
  [{images}]
    snapshotter = 'overlayfs'
    [{images}.pinned_images]
      sandbox = '{self.pause_image}'
    [{images}.registry]
      config_path = '{certs_d}'
  [plugins.'io.containerd.transfer.v1.local']
    config_path = '{certs_d}'
"""

    def _cni_config(self) -> dict[str, Any]:
        return {
            "cniVersion": "1.0.0",
            "name": CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "gateway": POD_GATEWAY}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.workdir / "cni" / "ipam"),
                    },
                }
            ],
        }

    def _start_containerd(self, binary: Path) -> None:
        config = self.workdir / "containerd.toml"
        config.write_text(self._containerd_config())
        shim_dir = str(binary.resolve().parent)
        env = {"PATH": f"{shim_dir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"}
        process = self._launch(
            "containerd", binary, ["--config", str(config)], cgroup="runtime", env=env
        )
        ctr = binaries.find("ctr")

        def ready() -> bool:
            if not self.containerd_socket.exists():
                return False
            result = subprocess.run(
                [str(ctr), "--address", str(self.containerd_socket), "version"],
                capture_output=True,
                timeout=10,
                check=False,
            )
            return result.returncode == 0

        self._wait_for(process, ready, what="its socket")

    def _start_kubelet(self, binary: Path) -> None:
        pki = self.pki
        root = self.workdir / "kubelet"
        root.mkdir(parents=True, exist_ok=True)
        resolv = self.workdir / "resolv.conf"
        resolv.write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "tlsCertFile": str(pki / "kubelet-serving.crt"),
            "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.ca_file)},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroups.path,
            "failCgroupV1": False,
            "failSwapOn": False,
            "oomScoreAdj": 0,
            "resolvConf": str(resolv),
            "podLogsDir": str(self.workdir / "pod-logs"),
            "podCIDR": POD_CIDR,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "volumePluginDir": str(root / "volume-plugins"),
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "clusterDomain": "cluster.local",
            "protectKernelDefaults": False,
            "shutdownGracePeriod": "0s",
            "syncFrequency": "10s",
            "fileCheckFrequency": "60s",
            "nodeStatusReportFrequency": "10s",
            "runtimeRequestTimeout": "2m",
            "logging": {"format": "text"},
        }
        path = self.workdir / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        process = self._launch(
            "kubelet",
            binary,
            [
                f"--config={path}",
                f"--kubeconfig={pki / 'kubelet-client.kubeconfig'}",
                f"--root-dir={root}",
                f"--cert-dir={pki / 'kubelet-generated'}",
                f"--node-ip={NODE_IP}",
                f"--hostname-override={NODE_NAME}",
                "--v=1",
            ],
        )
        self._wait_for(
            process,
            lambda: self._in_node(lambda: _http_ok("http://127.0.0.1:10248/healthz")),
            what="/healthz",
        )

    def _start_proxy(self, binary: Path) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.pki / "kube-proxy.kubeconfig")},
            "mode": "iptables",
            "clusterCIDR": POD_CIDR,
            "hostnameOverride": NODE_NAME,
            "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            # localhost NodePorts would set route_localnet; 0 leaves conntrack sysctls as
            # they are (nf_conntrack_max is machine-wide)
            "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "nodePortAddresses": [f"{NODE_IP}/32"],
        }
        path = self.workdir / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        process = self._launch("kube-proxy", binary, [f"--config={path}"])
        self._wait_for(
            process,
            lambda: self._in_node(lambda: _http_ok("http://127.0.0.1:10256/livez")),
            what="/livez",
        )

    def _component_args(self, name: str) -> list[str]:
        kubeconfig = self.pki / f"{name}.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
        ]

    def _start_controller_manager(self, binary: Path) -> None:
        pki = self.pki
        self._launch(
            "kube-controller-manager",
            binary,
            [
                *self._component_args("controller-manager"),
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
                f"--cluster-signing-cert-file={self.ca_file}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allocate-node-cidrs=false",
                "--secure-port=10257",
                # its FlexVolume prober creates this folder when missing (by default
                # /usr/libexec/kubernetes/kubelet-plugins/volume/exec on the machine)
                f"--flex-volume-plugin-dir={self.workdir / 'controller-manager' / 'flexvolume'}",
            ],
        )

    def _start_scheduler(self, binary: Path) -> None:
        self._launch(
            "kube-scheduler", binary, [*self._component_args("scheduler"), "--secure-port=10259"]
        )

    def _wait_node_ready(self) -> None:
        kubelet = next(p for p in self._processes if p.name == "kubelet")

        def ready() -> bool:
            for process in self._processes:
                if not process.running():
                    raise NodeError(
                        f"{process.name} exited with {process.popen.returncode};"
                        f" end of {process.log}:\n{_log_tail(process.log)}"
                    )
            result = self.kubectl(
                "get",
                "node",
                NODE_NAME,
                "-o",
                "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
                check=False,
            )
            return result.stdout.strip() == "True"

        self._wait_for(kubelet, ready, what=f"Node {NODE_NAME} Ready")

    def _wait_service_account(self) -> None:
        manager = next(p for p in self._processes if p.name == "kube-controller-manager")
        self._wait_for(
            manager,
            lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
            what="the default ServiceAccount",
        )


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http_ok(url: str) -> bool:
    try:
        with _NO_PROXY.open(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False


def _https_ok(url: str, context: ssl.SSLContext) -> bool:
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    try:
        with opener.open(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False
