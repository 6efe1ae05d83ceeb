"""A fleet of TalosClusters on one operator, held against the API server's own limit.

At each size (100, 300 and 1,000 TalosClusters; ``ICHOR_BENCH_FLEET=100,300`` picks
others) every cluster has a kubeconfig Secret of its own; the workload clusters behind
them share one API server of their own (three Talos Nodes and a Cilium DaemonSet), so
the operator reads N Secrets and makes N workload clients, as with N real clusters. The
operator runs in a child process as the chart's ServiceAccount with the chart's
ClusterRole (only the TalosCluster controller: no webhook is registered, so its status
writes meet no admission call), and two times are taken from the process's start:

- *start*: until every cluster's status carries its upgrade choices (and, beside it, the
  time to the operator's first stored write: the fixed cost of its start, imports and
  kopf's lists, which no fleet size changes);
- *change*: from a changed release list until every cluster's choices follow.

The operator's writes are counted in each phase twice: the stored writes of every
cluster (MODIFIED events of the bench's watch, with the status patch each made) and the
requests the API server counted (``apiserver_request_total``: status PATCHes, a write
that changed nothing included, and the Events posted). The limit, in the same run
against the same API server: a bare asyncio client (one aiohttp session, the operator's
certificate, no kopf, no kubernetes client) sends every cluster the very status patches
the operator's writes made in that phase, in their order, at the operator's concurrency
(its worker count). The ratio operator/limit is the figure; the goal (<= 1.5x, RSS under
200 MiB, current and peak) is judged at 1,000 clusters, the size it is set for. Seconds
per 1,000 clusters at each size, the marginal ratio between the smallest and the largest
size ((t_large - t_small) / (limit_large - limit_small), where the fixed start falls
out) and whether the growth is linear are printed with it. Then the operator is left
alone for one observe interval: its CPU time and writes over that window per cluster are
the cost of keeping a cluster observed; its RSS and peak RSS (VmHWM) and the memory per
cluster (growth of RSS from the smallest size to each larger one) are printed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import json
import multiprocessing
import os
import re
import signal
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from ichor.api import kinds
from ichor.kube.bodies import merge_patch
from tests.benches._api import MERGE, Endpoint, Profile, call, clusters_path, pool
from tests.harness import account, controlplane
from tests.support import operator as support

DEFAULT_SIZES = (100, 300, 1000)
#: The workers the fleet's clusters run on (ControllerSettings' default): the limit's
#: concurrency too. The fleet is one namespace, and one namespace runs on all workers but
#: one (ICHOR_NAMESPACE_WORKERS), so the operator is given one more, kept for the others.
WORKERS = 8
#: Seconds between two reads of a workload cluster, and the window CPU is measured over.
OBSERVE_INTERVAL = 30.0
CREATE_CONCURRENCY = 32
FIRST_DEFAULT, CHANGED_DEFAULT = "v1.14.4", "v1.14.5"
TARGETS: dict[str, Any] = {
    "checkedAt": "2026-12-03T07:00:00Z",
    "talos": ["v1.14.3", "v1.14.4", "v1.15.0"],
    "kubernetes": ["v1.36.6", "v1.36.7", "v1.37.1"],
}
CHANGED = {**TARGETS, "talos": ["v1.14.3", "v1.14.4", "v1.14.5"]}
GOAL_RATIO = 1.5
GOAL_RSS_MIB = 200.0
#: The size the goals are set for: smaller fleets are dominated by the
#: operator's fixed start (imports, kopf, the first lists), which is no throughput.
GOAL_SIZE = 1000
#: Linear growth: seconds per cluster at the largest size within this of the next one.
LINEAR_RATIO = 1.5
WAIT_LIMIT = 900.0
ROLE = "ichor-bench-operator"


def sizes() -> tuple[int, ...]:
    given = os.environ.get("ICHOR_BENCH_FLEET", "")
    return tuple(int(part) for part in given.split(",") if part.strip()) or DEFAULT_SIZES


# --- the fleet --------------------------------------------------------------------------


def _name(i: int) -> str:
    return f"cluster-{i:04d}"


async def _workload(session: aiohttp.ClientSession) -> None:
    for n in range(3):
        info = {
            "osImage": "Talos (v1.14.3)", "kubeletVersion": "v1.36.6", "kubeProxyVersion": "",
            "machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.12",
            "containerRuntimeVersion": "containerd://2.1", "operatingSystem": "linux",
            "architecture": "amd64",
        }  # fmt: skip
        await call(session, "POST", "/api/v1/nodes", {"metadata": {"name": f"cp-{n}"}})
        await call(session, "PATCH", f"/api/v1/nodes/cp-{n}/status", {"status": {"nodeInfo": info}})
    labels = {"app": "cilium"}
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "cilium-agent", "image": "cilium:v1.20.4"}]},
            },
        },
    }
    await call(session, "POST", "/apis/apps/v1/namespaces/kube-system/daemonsets", daemonset)


async def workload_nodes(workload: controlplane.ControlPlane) -> None:
    """The workload cluster every TalosCluster of the fleet points at: three Talos Nodes
    and Cilium, written by its admin."""
    async with Endpoint.admin_of(workload).session() as session:
        await _workload(session)


async def _targets(session: aiohttp.ClientSession, targets: Mapping[str, Any]) -> None:
    path = f"/apis/{kinds.GROUP}/{kinds.VERSION}/{kinds.Plural.ICHOR_INSTALLATIONS}"
    body = {
        "apiVersion": kinds.API_VERSION,
        "kind": "IchorInstallation",
        "metadata": {"name": kinds.INSTALLATION_NAME},
    }
    await call(session, "POST", path, body)
    status = {"status": {"upgradeTargets": dict(targets)}}
    await call(session, "PATCH", f"{path}/{kinds.INSTALLATION_NAME}/status", status)


async def _create_fleet(
    session: aiohttp.ClientSession, *, namespace: str, count: int, kubeconfig: bytes
) -> None:
    await call(session, "POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    encoded = base64.b64encode(kubeconfig).decode("ascii")

    async def one(i: int) -> None:
        secret = {"metadata": {"name": f"{_name(i)}-kubeconfig"}, "data": {"kubeconfig": encoded}}
        await call(session, "POST", f"/api/v1/namespaces/{namespace}/secrets", secret)
        body = {
            "apiVersion": kinds.API_VERSION,
            "kind": "TalosCluster",
            "metadata": {"name": _name(i)},
            "spec": {
                "talosVersion": "v1.14.3",
                "kubernetesVersion": "v1.36.6",
                "versionContract": "v1.14",
                "kubeconfigSecretRef": {"name": f"{_name(i)}-kubeconfig"},
            },
        }
        await call(session, "POST", clusters_path(namespace), body)

    await pool(count, CREATE_CONCURRENCY, one)


async def _delete_fleet(session: aiohttp.ClientSession, *, namespace: str) -> None:
    await call(session, "DELETE", clusters_path(namespace))
    await call(session, "DELETE", f"/api/v1/namespaces/{namespace}/secrets")


def _default(body: Mapping[str, Any]) -> str | None:
    choices = (body.get("status") or {}).get("upgradeChoices") or {}
    value = (choices.get("talos") or {}).get("default")
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Write:
    """One stored write of a cluster, as the bench's watch saw it (a MODIFIED event)."""

    at: float
    name: str
    #: The merge patch of ``status`` it made (empty when only metadata changed).
    status_patch: Mapping[str, Any]


class Watcher:
    """Every cluster's last body, from one watch; tells when all carry a default, and
    keeps every stored write (MODIFIED event) with the loop time it was seen."""

    def __init__(self, session: aiohttp.ClientSession, namespace: str, count: int) -> None:
        self.session, self.namespace, self.count = session, namespace, count
        self.bodies: dict[str, Mapping[str, Any]] = {}
        self.writes: list[Write] = []
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = await call(self.session, "GET", clusters_path(self.namespace))
        for item in listed["items"]:
            self.bodies[item["metadata"]["name"]] = item
        version = listed["metadata"]["resourceVersion"]
        self._task = asyncio.create_task(self._watch(version))

    async def _watch(self, version: str) -> None:
        while True:
            params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "600"}
            path = clusters_path(self.namespace)
            timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
            async with self.session.get(path, params=params, timeout=timeout) as response:
                async for line in response.content:
                    event = json.loads(line)
                    body = event["object"]
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"watch ended: {body}")
                    version = body["metadata"]["resourceVersion"]
                    name = body["metadata"]["name"]
                    if event["type"] == "MODIFIED":
                        before = _status(self.bodies.get(name) or {})
                        patch = merge_patch(before, _status(body))
                        self.writes.append(Write(time.monotonic(), name, patch))
                    self.bodies[name] = body
                    self.changed.set()

    def done(self, default: str) -> int:
        return sum(1 for body in self.bodies.values() if _default(body) == default)

    def between(self, start: float, end: float) -> list[Write]:
        """The writes seen from ``start`` to ``end`` (loop times), in order."""
        return [write for write in self.writes if start <= write.at <= end]

    async def wait(self, default: str, *, alive: Any) -> float:
        """Loop time when every cluster's default became ``default``."""
        deadline = time.monotonic() + WAIT_LIMIT
        while (done := self.done(default)) < self.count:
            if self._task is not None and self._task.done():
                self._task.result()
            if not alive():
                raise RuntimeError(f"the operator stopped after {done} of {self.count} clusters")
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {done} of {self.count} clusters reached {default}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=1.0)
        return time.monotonic()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


# --- the operator, in a process of its own ----------------------------------------------


def _operator_main(kubeconfig: str, interval: float) -> None:
    """The TalosCluster controller as the operator runs it, as the chart's account."""
    os.environ["KUBECONFIG"] = kubeconfig
    os.environ.pop("KUBERNETES_SERVICE_HOST", None)
    import logging

    import kopf
    from kubernetes.aio.config import kube_config

    from ichor.controller.taloscluster import wiring as cluster_wiring
    from ichor.kube import allocator
    from ichor.settings import ControllerSettings, Settings

    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = kubeconfig
    logging.basicConfig(level=logging.WARNING)
    allocator.keep_large_buffers_mapped(  # as ichor.operator.run does
        environment_sets=Settings.from_env().malloc_mmap_threshold is not None
    )
    heap = _memory_file()
    if heap is not None:
        # what the memory is made of, written on SIGUSR1 (tracemalloc slows the operator:
        # only for finding what the memory per cluster is, never with the figures)
        import tracemalloc

        if os.environ.get("ICHOR_BENCH_TRACEMALLOC"):
            tracemalloc.start()

        def dump(*_: object) -> None:
            written = Path(f"{heap}.part")
            written.write_text("\n".join(_memory_report()) + "\n")
            written.replace(heap)

        signal.signal(signal.SIGUSR1, dump)
    registry = kopf.OperatorRegistry()
    cluster_wiring.register(registry, settings=Settings.from_env())
    memo = kopf.Memo()
    memo[cluster_wiring.SETTINGS] = ControllerSettings(
        observe_interval=interval, workers=WORKERS + 1, namespace_workers=WORKERS
    )
    asyncio.run(kopf.operator(registry=registry, clusterwide=True, standalone=True, memo=memo))


def _memory_file() -> str | None:
    """Where the operator writes what its memory is made of: ``ICHOR_BENCH_TRACEMALLOC``
    (with the Python heap by file and line) or ``ICHOR_BENCH_MEMORY`` (without)."""
    return os.environ.get("ICHOR_BENCH_TRACEMALLOC") or os.environ.get("ICHOR_BENCH_MEMORY")


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (mallinfo(3))."""

    _fields_ = [
        (field, ctypes.c_size_t)
        for field in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _memory_report() -> list[str]:
    """What this process's memory is made of: the Python heap by file and by line (while
    tracemalloc traces), then what tracemalloc does not see: C malloc's bytes in use and
    free (freed memory it keeps: fragmentation), the RSS by mapping, and the live OpenSSL
    contexts, client sessions and TLS connections (each holds asyncio's 256 KiB read
    buffer), before and after a full garbage collection."""
    import asyncio.sslproto
    import gc
    import ssl
    import tracemalloc

    lines: list[str] = []
    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot()
        stats = snapshot.statistics("filename")
        lines.append(f"python heap {sum(stat.size for stat in stats) / 2**20:.1f} MiB")
        for stat in stats[:15]:
            lines.append(f"{stat.size / 2**20:7.1f} MiB {stat.traceback[0].filename}")
        lines.append("by line:")
        for stat in snapshot.statistics("lineno")[:25]:
            frame = stat.traceback[0]
            lines.append(
                f"{stat.size / 2**20:7.1f} MiB {stat.count:8d} blocks "
                f"{frame.filename}:{frame.lineno}"
            )
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except AttributeError:
        lines.append("malloc: no mallinfo2 (not glibc 2.33 or later)")
    else:
        mallinfo2.restype = _MallInfo2
        info = mallinfo2()
        lines.append(
            f"malloc: heap {info.arena / 2**20:.1f} MiB, in use {info.uordblks / 2**20:.1f}, "
            f"free {info.fordblks / 2**20:.1f}; mapped chunks {info.hblkhd / 2**20:.1f} MiB "
            f"({info.hblks})"
        )
    mappings: dict[str, int] = {}
    mapping = ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        words = line.split()
        if len(words) >= 5 and "-" in words[0]:
            mapping = words[5].rsplit("/", 1)[-1] if len(words) > 5 else "[anon]"
        elif words and words[0] == "Rss:":
            mappings[mapping] = mappings.get(mapping, 0) + int(words[1])
    largest = sorted(mappings.items(), key=lambda item: -item[1])[:6]
    lines.append("RSS by mapping: " + ", ".join(f"{k} {v / 1024:.1f} MiB" for k, v in largest))

    def live() -> str:
        kinds = (ssl.SSLContext, aiohttp.ClientSession, asyncio.sslproto.SSLProtocol)
        counts = dict.fromkeys(kinds, 0)
        states: dict[str, int] = {}
        for obj in gc.get_objects():
            for kind in kinds:
                if isinstance(obj, kind):
                    counts[kind] += 1
            if isinstance(obj, asyncio.sslproto.SSLProtocol):
                state = str(getattr(getattr(obj, "_state", None), "name", "?"))
                states[state] = states.get(state, 0) + 1
        counted = ", ".join(f"{count} {kind.__name__}" for kind, count in counts.items())
        return f"{counted} (TLS connections by state: {states})"

    before, rss_before = live(), _proc(os.getpid())[1]
    freed = gc.collect()
    lines.append(f"live: {before}; RSS {rss_before:.0f} MiB")
    lines.append(
        f"after a full collection ({freed} objects freed): {live()}; "
        f"RSS {_proc(os.getpid())[1]:.0f} MiB"
    )
    return lines


#: Seconds the operator may take to write what its memory is made of (a snapshot of a
#: traced heap with deep tracebacks takes tens of seconds).
DUMP_LIMIT = 300.0


async def _dumped(pid: int, path: Path) -> list[str]:
    """The lines the operator writes to ``path`` once told to (SIGUSR1)."""
    await asyncio.to_thread(path.unlink, missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + DUMP_LIMIT
    while not await asyncio.to_thread(path.exists):  # renamed into place once complete
        if time.monotonic() > deadline:
            return [f"nothing written to {path} in {DUMP_LIMIT:.0f} s"]
        await asyncio.sleep(0.5)
    return (await asyncio.to_thread(path.read_text)).splitlines()


def _proc(pid: int) -> tuple[float, float, float]:
    """CPU seconds (user + system), RSS and peak RSS (VmHWM) in MiB of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return cpu, int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


#: What the API server counts (``apiserver_request_total``), by (verb, resource,
#: subresource): the requests themselves, a write that changed nothing included.
Requests = Mapping[tuple[str, str, str], float]
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def parse_requests(text: str) -> dict[tuple[str, str, str], float]:
    """``apiserver_request_total`` of a /metrics text, summed by verb, resource and
    subresource (over codes, groups, versions and scopes)."""
    counts: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
        labels = dict(_LABEL.findall(labels_text))
        key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
        counts[key] = counts.get(key, 0.0) + float(value)
    return counts


async def _requests(session: aiohttp.ClientSession) -> dict[tuple[str, str, str], float]:
    async with session.get("/metrics") as response:
        text = await response.text()
        if response.status != 200:
            raise RuntimeError(f"GET /metrics answered {response.status}: {text[:200]}")
    return parse_requests(text)


@dataclass(frozen=True)
class Written:
    """The operator's writes in one window: stored ones from the bench's watch, requests
    from the API server's own count."""

    #: Stored writes of TalosClusters (MODIFIED watch events; a write that changed
    #: nothing makes none).
    stored: int = 0
    #: Bytes of their status merge patches, all together.
    status_bytes: int = 0
    #: PATCH requests of talosclusters/status (the API server's count).
    status_requests: float = 0.0
    #: Events posted (core and events.k8s.io; the API server's count).
    events: float = 0.0

    @classmethod
    def of(cls, writes: list[Write], before: Requests, after: Requests) -> Written:
        def delta(verb: str, resource: str, subresource: str = "") -> float:
            key = (verb, resource, subresource)
            return after.get(key, 0.0) - before.get(key, 0.0)

        return cls(
            stored=len(writes),
            status_bytes=sum(len(json.dumps({"status": w.status_patch})) for w in writes),
            status_requests=delta("PATCH", str(kinds.Plural.TALOS_CLUSTERS), "status"),
            events=delta("POST", "events"),
        )


@dataclass(frozen=True)
class Phase:
    """One measured phase at one size: the operator's time, its writes, the limit."""

    seconds: float
    limit: float
    written: Written = Written()
    #: Patches the limit sent, and how many of them changed nothing (same resourceVersion).
    limit_sent: int = 0
    limit_unchanged: int = 0

    @property
    def ratio(self) -> float:
        return self.seconds / self.limit


@dataclass(frozen=True)
class Run:
    size: int
    start: Phase
    change: Phase
    #: Seconds from the operator's process start to its first stored write.
    first_write: float
    rss: float
    peak: float
    cpu_start: float
    cpu_interval: float
    #: The operator's writes over the observe interval (nothing changed meanwhile).
    interval: Written = Written()
    #: py-spy's top frames (``ICHOR_BENCH_PROFILE``): start, then the observe interval.
    profile: tuple[str, ...] = ()


def _patches(writes: list[Write]) -> dict[str, list[Mapping[str, Any]]]:
    """Each cluster's status patches of ``writes``, in the order they were stored."""
    patches: dict[str, list[Mapping[str, Any]]] = {}
    for write in writes:
        if write.status_patch:
            patches.setdefault(write.name, []).append(write.status_patch)
    return patches


async def _limit(
    endpoint: Endpoint,
    *,
    namespace: str,
    patches: Mapping[str, list[Mapping[str, Any]]],
    versions: dict[str, str],
) -> tuple[float, int, int]:
    """Seconds a bare client takes to send every cluster the operator's status patches
    (a cluster's in their order, ``WORKERS`` clusters at once: the operator's
    concurrency), the patches sent, and how many changed nothing. ``versions`` (each
    cluster's resourceVersion) is kept up to date."""
    names = sorted(patches)
    bodies = {name: [json.dumps({"status": p}) for p in patches[name]] for name in names}
    unchanged = 0
    async with endpoint.session(limit=WORKERS) as session:

        async def one(i: int) -> None:
            nonlocal unchanged
            name = names[i]
            path = clusters_path(namespace, name) + "/status"
            headers = {"Content-Type": MERGE}
            for body in bodies[name]:
                async with session.patch(path, data=body, headers=headers) as response:
                    text = await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"limit: PATCH {path} answered {response.status}")
                version = json.loads(text)["metadata"]["resourceVersion"]
                unchanged += version == versions.get(name)
                versions[name] = version

        started = time.monotonic()
        await pool(len(names), WORKERS, one)
        elapsed = time.monotonic() - started
    return elapsed, sum(len(b) for b in bodies.values()), unchanged


def _status(body: Mapping[str, Any]) -> dict[str, Any]:
    return dict(body.get("status") or {})


async def _one_size(
    *,
    admin: Endpoint,
    operator: account.Account,
    operator_endpoint: Endpoint,
    workload_kubeconfig: bytes,
    size: int,
) -> Run:
    namespace = f"fleet-{size}"
    async with admin.session() as session:
        await _targets(session, TARGETS)
        await _create_fleet(
            session, namespace=namespace, count=size, kubeconfig=workload_kubeconfig
        )
        watcher = Watcher(session, namespace, size)
        await watcher.start()
        process = multiprocessing.get_context("spawn").Process(
            target=_operator_main,
            args=(str(operator.kubeconfig), OBSERVE_INTERVAL),
            name=f"ichor-fleet-{size}",
            daemon=True,
        )
        profile_start, profile_steady = (
            Profile(f"fleet-{size}-start"),
            Profile(f"fleet-{size}-steady"),
        )
        counted = [await _requests(session)]
        try:
            started = time.monotonic()
            process.start()
            assert process.pid is not None
            profile_start.start(process.pid)
            done = await watcher.wait(FIRST_DEFAULT, alive=process.is_alive)
            profiled = profile_start.stop()
            cpu_start = _proc(process.pid)[0]
            counted.append(await _requests(session))
            await _targets(session, CHANGED)
            changed_at = time.monotonic()
            followed = await watcher.wait(CHANGED_DEFAULT, alive=process.is_alive)
            await asyncio.sleep(2.0)  # Events after the last write
            counted.append(await _requests(session))
            quiet_from = time.monotonic()
            cpu_before = _proc(process.pid)[0]
            profile_steady.start(process.pid)
            await asyncio.sleep(OBSERVE_INTERVAL)
            cpu_after, rss, peak = _proc(process.pid)
            profiled += profile_steady.stop()
            quiet_to = time.monotonic()
            counted.append(await _requests(session))
            heap = _memory_file()
            if heap:
                profiled += [f"heap: {line}" for line in await _dumped(process.pid, Path(heap))]
            if not process.is_alive():
                raise RuntimeError("the operator stopped during the observe interval")
        finally:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGTERM)
            await asyncio.to_thread(process.join, 30)
            if process.is_alive():
                process.kill()
            await watcher.stop()
        start_writes = watcher.between(started, done)
        change_writes = watcher.between(changed_at, followed)
        first_write = min((w.at for w in watcher.writes), default=done) - started
        versions = {
            name: str(body["metadata"]["resourceVersion"]) for name, body in watcher.bodies.items()
        }
        limit_start, sent_start, same_start = await _limit(
            operator_endpoint,
            namespace=namespace,
            patches=_patches(start_writes),
            versions=versions,
        )
        limit_change, sent_change, same_change = await _limit(
            operator_endpoint,
            namespace=namespace,
            patches=_patches(change_writes),
            versions=versions,
        )
        interval = Written.of(watcher.between(quiet_from, quiet_to), counted[2], counted[3])
        await _delete_fleet(session, namespace=namespace)
    return Run(
        size=size,
        start=Phase(
            seconds=done - started,
            limit=limit_start,
            written=Written.of(start_writes, counted[0], counted[1]),
            limit_sent=sent_start,
            limit_unchanged=same_start,
        ),
        change=Phase(
            seconds=followed - changed_at,
            limit=limit_change,
            written=Written.of(change_writes, counted[1], counted[2]),
            limit_sent=sent_change,
            limit_unchanged=same_change,
        ),
        first_write=first_write,
        rss=rss,
        peak=peak,
        cpu_start=cpu_start,
        cpu_interval=cpu_after - cpu_before,
        interval=interval,
        profile=tuple(profiled),
    )


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _per(count: float, size: int) -> str:
    return f"{count / size:.2f}"


def _writes(written: Written, size: int) -> str:
    return (
        f"{_per(written.stored, size)}/{_per(written.status_requests, size)}/"
        f"{_per(written.events, size)}"
    )


def _marginal(small: Run, large: Run, phase: str) -> str:
    a, b = getattr(small, phase), getattr(large, phase)
    limit = b.limit - a.limit
    if limit <= 0:
        return "n/a (the limit did not grow)"
    return f"{(b.seconds - a.seconds) / limit:.2f}x"


def _per_cluster(run: Run, phase: str) -> float:
    """Seconds per cluster of a phase; the start counted from the first write, so the
    fixed cost of the process's start (imports, kopf, the first lists) falls out."""
    if phase == "start":
        return (run.start.seconds - run.first_write) / run.size
    return float(run.change.seconds / run.size)


def report(runs: list[Run]) -> list[str]:
    lines: list[str] = []
    smallest = runs[0]
    for run in runs:
        n = run.size
        for label, phase, what in (
            ("start", run.start, "start -> all choices"),
            ("change", run.change, "list change -> all recomputed"),
        ):
            w = phase.written
            each = w.status_bytes / w.stored if w.stored else 0
            first = f"first write {run.first_write:.1f} s, " if label == "start" else ""
            lines.append(
                f"fleet {n}: {what}: {first}all {phase.seconds:.1f} s; limit {phase.limit:.2f} s "
                f"({phase.limit_sent} patches, {each:.0f} B each, {phase.limit_unchanged} "
                f"changed nothing): ratio {phase.ratio:.2f}x"
            )
        lines.append(
            f"fleet {n}: per 1,000 clusters: start {run.start.seconds / n * 1000:.1f} s "
            f"({_per_cluster(run, 'start') * 1000:.1f} s from the first write), limit "
            f"{run.start.limit / n * 1000:.2f} s; change {run.change.seconds / n * 1000:.1f} s, "
            f"limit {run.change.limit / n * 1000:.2f} s"
        )
        lines.append(
            f"fleet {n}: writes per cluster (stored, as the watch saw them / status PATCH "
            f"requests / Events posted, as the API server counted them): start "
            f"{_writes(run.start.written, n)}; change {_writes(run.change.written, n)}; "
            f"observe interval {_writes(run.interval, n)}"
        )
        growth = ""
        if run is not smallest:
            per = (run.rss - smallest.rss) / (run.size - smallest.size) * 1024
            growth = f", {per:.0f} KiB per cluster (RSS growth from {smallest.size})"
        lines.append(
            f"fleet {n}: operator RSS {run.rss:.0f} MiB (peak {run.peak:.0f}), "
            f"{run.rss * 1024 / n:.0f} KiB per cluster in all{growth}; CPU "
            f"{run.cpu_start / n * 1000:.1f} ms per cluster to start, "
            f"{run.cpu_interval / n * 1000:.2f} ms per cluster per observe interval "
            f"({OBSERVE_INTERVAL:.0f} s; {run.cpu_interval / OBSERVE_INTERVAL * 100:.0f}% "
            f"of a core)"
        )
        lines += run.profile
    largest = runs[-1]
    if len(runs) > 1:
        lines.append(
            f"fleet marginal {smallest.size}->{largest.size}: (t{largest.size}-t{smallest.size})"
            f"/(limit{largest.size}-limit{smallest.size}): start "
            f"{_marginal(smallest, largest, 'start')}, change "
            f"{_marginal(smallest, largest, 'change')} (the fixed start-up cost falls out)"
        )
        before = runs[-2]
        growth_start = _per_cluster(largest, "start") / _per_cluster(before, "start")
        growth_change = _per_cluster(largest, "change") / _per_cluster(before, "change")
        linear = max(growth_start, growth_change) <= LINEAR_RATIO
        lines.append(
            f"fleet linear: {'yes' if linear else 'no'} (criterion: seconds per cluster at "
            f"{largest.size} within {LINEAR_RATIO}x of those at {before.size}, the start "
            f"counted from the first write: start {growth_start:.2f}x, change "
            f"{growth_change:.2f}x)"
        )
    judged = next((run for run in runs if run.size == GOAL_SIZE), None)
    if judged is None:
        lines.append(
            f"fleet goals: not judged (set for {GOAL_SIZE:,} clusters; sizes run: "
            f"{', '.join(str(r.size) for r in runs)}); at {largest.size}: start ratio "
            f"{largest.start.ratio:.2f}x, change ratio {largest.change.ratio:.2f}x, RSS "
            f"{largest.rss:.0f} MiB (peak {largest.peak:.0f})"
        )
    else:
        lines.append(
            f"fleet goals at {GOAL_SIZE:,} clusters (the size they are set for): start ratio "
            f"{judged.start.ratio:.2f}x <= {GOAL_RATIO}x: {_met(judged.start.ratio <= GOAL_RATIO)}"
            f"; change ratio {judged.change.ratio:.2f}x <= {GOAL_RATIO}x: "
            f"{_met(judged.change.ratio <= GOAL_RATIO)}; RSS < {GOAL_RSS_MIB:.0f} MiB: current "
            f"{judged.rss:.0f} MiB {_met(judged.rss < GOAL_RSS_MIB)}, peak {judged.peak:.0f} "
            f"MiB {_met(judged.peak < GOAL_RSS_MIB)}"
        )
    lines.append(f"fleet: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return lines


async def _bench(workdir: Path) -> list[str]:
    with (
        controlplane.ControlPlane(workdir=workdir / "management") as plane,
        controlplane.ControlPlane(workdir=workdir / "workload") as workload,
    ):
        support.apply_crds(plane)
        operator = account.grant(plane, role=ROLE, directory=workdir / "operator")
        admin = Endpoint.admin_of(plane)
        operator_endpoint = Endpoint.of(
            server=plane.server, ca_file=plane.ca_file, cert=operator.cert, key=operator.key
        )
        await workload_nodes(workload)
        runs = []
        for size in sizes():
            runs.append(
                await _one_size(
                    admin=admin,
                    operator=operator,
                    operator_endpoint=operator_endpoint,
                    workload_kubeconfig=workload.kubeconfig.read_bytes(),
                    size=size,
                )
            )
    return report(runs)


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="ichor-fleet-bench-") as workdir:
        return asyncio.run(_bench(Path(workdir)))


if __name__ == "__main__":
    for line in run():
        print(line)
