"""A fleet of TalosClusters on one operator, held against the API server's own limit.

At each size (100, 300 and 1,000 TalosClusters; ``ICHOR_BENCH_FLEET=100,300`` picks
others) every cluster has a kubeconfig Secret of its own; the workload clusters behind
them share one API server of their own (three Talos Nodes and a Cilium DaemonSet), so
the operator reads N Secrets and makes N workload clients, as with N real clusters. The
operator runs in a child process as the chart's ServiceAccount with the chart's
ClusterRole (only the TalosCluster controller: no webhook is registered, so its status
writes meet no admission call), and two times are taken from the process's start:

- *start*: until every cluster's status carries its upgrade choices;
- *change*: from a changed release list until every cluster's choices follow.

The limit, in the same run against the same API server: a bare asyncio client (one
aiohttp session, the operator's certificate, no kopf, no kubernetes client) sends the
same number of status merge patches, of the same bytes as the operator's first and
second writes, at the operator's concurrency (its worker count). The ratio
operator/limit is the figure (goal <= 1.5x). Then the operator is left alone for one
observe interval: its CPU time over that window per cluster is the cost of keeping a
cluster observed; its RSS (goal < 200 MiB at 1,000) and the memory per cluster (growth
of RSS from the smallest size to each larger one) are printed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import multiprocessing
import os
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
#: The operator's workers (ControllerSettings' default): the limit's concurrency too.
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


class Watcher:
    """Every cluster's last body, from one watch; tells when all carry a default."""

    def __init__(self, session: aiohttp.ClientSession, namespace: str, count: int) -> None:
        self.session, self.namespace, self.count = session, namespace, count
        self.bodies: dict[str, Mapping[str, Any]] = {}
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
                    self.bodies[body["metadata"]["name"]] = body
                    self.changed.set()

    def done(self, default: str) -> int:
        return sum(1 for body in self.bodies.values() if _default(body) == default)

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
    from kubernetes_asyncio.config import kube_config

    from ichor.controller.taloscluster import wiring as cluster_wiring
    from ichor.settings import ControllerSettings, Settings

    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = kubeconfig
    logging.basicConfig(level=logging.WARNING)
    heap = os.environ.get("ICHOR_BENCH_TRACEMALLOC")
    if heap:
        # the Python heap by file, written on SIGUSR1 (tracemalloc slows the operator:
        # only for finding what the memory per cluster is, never with the figures)
        import tracemalloc

        tracemalloc.start()

        def dump(*_: object) -> None:
            stats = tracemalloc.take_snapshot().statistics("filename")
            total = sum(stat.size for stat in stats)
            lines = [f"python heap {total / 2**20:.1f} MiB"]
            for stat in stats[:15]:
                lines.append(f"{stat.size / 2**20:7.1f} MiB {stat.traceback[0].filename}")
            Path(heap).write_text("\n".join(lines) + "\n")

        signal.signal(signal.SIGUSR1, dump)
    registry = kopf.OperatorRegistry()
    cluster_wiring.register(registry, settings=Settings.from_env())
    memo = kopf.Memo()
    memo[cluster_wiring.SETTINGS] = ControllerSettings(observe_interval=interval, workers=WORKERS)
    asyncio.run(kopf.operator(registry=registry, clusterwide=True, standalone=True, memo=memo))


def _proc(pid: int) -> tuple[float, float, float]:
    """CPU seconds (user + system), RSS and peak RSS (MiB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return cpu, int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


@dataclass(frozen=True)
class Run:
    size: int
    start: float
    change: float
    limit_start: float
    limit_change: float
    rss: float
    peak: float
    cpu_start: float
    cpu_interval: float
    first_bytes: int
    change_bytes: int
    #: py-spy's top frames (``ICHOR_BENCH_PROFILE``): start, then the observe interval.
    profile: tuple[str, ...] = ()


async def _limit(
    endpoint: Endpoint, *, namespace: str, count: int, patch: Mapping[str, Any]
) -> float:
    """Seconds a bare client takes to send ``patch`` to every cluster's status."""
    async with endpoint.session(limit=WORKERS) as session:
        body = json.dumps({"status": patch})

        async def one(i: int) -> None:
            path = clusters_path(namespace, _name(i)) + "/status"
            headers = {"Content-Type": MERGE}
            async with session.patch(path, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"limit: PATCH {path} answered {response.status}")

        started = time.monotonic()
        await pool(count, WORKERS, one)
        return time.monotonic() - started


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
        try:
            started = time.monotonic()
            process.start()
            assert process.pid is not None
            profile_start.start(process.pid)
            done = await watcher.wait(FIRST_DEFAULT, alive=process.is_alive)
            profiled = profile_start.stop()
            cpu_start = _proc(process.pid)[0]
            first = {name: _status(body) for name, body in watcher.bodies.items()}
            await _targets(session, CHANGED)
            changed_at = time.monotonic()
            followed = await watcher.wait(CHANGED_DEFAULT, alive=process.is_alive)
            await asyncio.sleep(2.0)  # Events after the last write
            cpu_before = _proc(process.pid)[0]
            profile_steady.start(process.pid)
            await asyncio.sleep(OBSERVE_INTERVAL)
            cpu_after, rss, peak = _proc(process.pid)
            profiled += profile_steady.stop()
            heap = os.environ.get("ICHOR_BENCH_TRACEMALLOC")
            if heap:
                os.kill(process.pid, signal.SIGUSR1)
                await asyncio.sleep(10)
                text = await asyncio.to_thread(Path(heap).read_text)
                profiled += [f"heap: {line}" for line in text.splitlines()]
            if not process.is_alive():
                raise RuntimeError("the operator stopped during the observe interval")
        finally:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGTERM)
            await asyncio.to_thread(process.join, 30)
            if process.is_alive():
                process.kill()
            await watcher.stop()
        sample = _name(0)
        before, after = first[sample], _status(watcher.bodies[sample])
        change_patch = merge_patch(before, after)
        limit_start = await _limit(operator_endpoint, namespace=namespace, count=size, patch=before)
        limit_change = await _limit(
            operator_endpoint, namespace=namespace, count=size, patch=change_patch
        )
        await _delete_fleet(session, namespace=namespace)
    return Run(
        size=size,
        start=done - started,
        change=followed - changed_at,
        limit_start=limit_start,
        limit_change=limit_change,
        rss=rss,
        peak=peak,
        cpu_start=cpu_start,
        cpu_interval=cpu_after - cpu_before,
        first_bytes=len(json.dumps({"status": before})),
        change_bytes=len(json.dumps({"status": change_patch})),
        profile=tuple(profiled),
    )


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(runs: list[Run]) -> list[str]:
    lines: list[str] = []
    smallest = runs[0]
    for run in runs:
        ratio_start = run.start / run.limit_start
        ratio_change = run.change / run.limit_change
        lines.append(
            f"fleet {run.size}: start -> all choices {run.start:.1f} s, limit "
            f"{run.limit_start:.1f} s ({run.first_bytes} B patches): ratio {ratio_start:.2f}x; "
            f"list change -> all recomputed {run.change:.1f} s, limit {run.limit_change:.1f} s "
            f"({run.change_bytes} B): ratio {ratio_change:.2f}x"
        )
        growth = ""
        if run is not smallest:
            per = (run.rss - smallest.rss) / (run.size - smallest.size) * 1024
            growth = f", {per:.0f} KiB per cluster (RSS growth from {smallest.size})"
        lines.append(
            f"fleet {run.size}: operator RSS {run.rss:.0f} MiB (peak {run.peak:.0f}), "
            f"{run.rss * 1024 / run.size:.0f} KiB per cluster in all{growth}; CPU "
            f"{run.cpu_start / run.size * 1000:.1f} ms per cluster to start, "
            f"{run.cpu_interval / run.size * 1000:.2f} ms per cluster per observe interval "
            f"({OBSERVE_INTERVAL:.0f} s; {run.cpu_interval / OBSERVE_INTERVAL * 100:.0f}% "
            f"of a core)"
        )
        lines += run.profile
    largest = runs[-1]
    worst = max(max(r.start / r.limit_start, r.change / r.limit_change) for r in runs)
    lines.append(
        f"fleet goals: every ratio <= {GOAL_RATIO}x (worst {worst:.2f}x): "
        f"{_met(worst <= GOAL_RATIO)}; RSS < {GOAL_RSS_MIB:.0f} MiB at {largest.size} "
        f"({largest.rss:.0f} MiB): {_met(largest.rss < GOAL_RSS_MIB)}"
        + ("" if largest.size >= 1000 else " (the goal is stated at 1,000 clusters)")
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
        admin = Endpoint.of(
            server=plane.server,
            ca_file=plane.ca_file,
            cert=plane.pki / "admin.crt",
            key=plane.pki / "admin.key",
        )
        operator_endpoint = Endpoint.of(
            server=plane.server, ca_file=plane.ca_file, cert=operator.cert, key=operator.key
        )
        workload_admin = Endpoint.of(
            server=workload.server,
            ca_file=workload.ca_file,
            cert=workload.pki / "admin.crt",
            key=workload.pki / "admin.key",
        )
        async with workload_admin.session() as session:
            await _workload(session)
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
