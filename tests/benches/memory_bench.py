"""The worst memory load the tests know, on the operator the chart installs: a fleet of
1,000 observed TalosClusters while its webhook reads 16 concurrent reviews of the
largest size, held against the chart's memory limit (goal: at least 25% of it free).

The chart is installed by helm into a real API server (mutual TLS, the release check
offline) and its operator runs as the chart's Deployment and ServiceAccount describe it
(``tests/component/chart``): every controller and the webhook, in one process. Its
clusters' kubeconfigs point at a second API server (three Talos Nodes and Cilium), one
Secret and one workload client per cluster. Every cluster is created through the API
server, so each create is a review too. Then the 16 largest reviews (and ordinary ones)
go straight to the webhook's port: with the fleet at rest, while every cluster follows a
changed release list, and ``AGAIN`` more times at rest. The peak RSS (``VmHWM``) of each
storm is read after resetting it (``/proc/<pid>/clear_refs``); the worst is the figure.
``ICHOR_BENCH_MEMORY_FLEET`` sets the fleet's size.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from ichor.api import kinds
from ichor.webhook import budget, intake
from tests.benches import fleet_bench
from tests.benches._api import Endpoint, call
from tests.component.chart import helm, release
from tests.component.chart.conftest import start_operator, stop_operator
from tests.component.chart.test_webhook_load import (
    HOSTILE,
    ORDINARY,
    chart_memory_limit,
    largest,
    many_values,
    memory,
    post,
    review,
)
from tests.component.webhook import harness
from tests.harness import controlplane

FLEET = 1000
#: The share of the chart's limit the worst peak must leave free.
GOAL_FREE = 0.25
MIB = 1024 * 1024
#: Storms at rest after the change's, to show what one leaves behind levels off.
AGAIN = 3


def fleet_size() -> int:
    return int(os.environ.get("ICHOR_BENCH_MEMORY_FLEET", "") or FLEET)


def reset_peak(pid: int) -> None:
    """Set the process's peak RSS (VmHWM) to its RSS now (proc(5), clear_refs "5")."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


@dataclass(frozen=True)
class Phase:
    name: str
    before: int
    peak: int
    seconds: float
    outcomes: dict[str, int]

    def line(self, limit: int) -> str:
        return (
            f"{self.name}: RSS {self.before / MIB:.0f} MiB before, peak {self.peak / MIB:.0f} "
            f"MiB ({self.peak / limit:.0%} of the limit), {self.seconds:.1f} s; the large "
            f"reviews: {self.outcomes}"
        )


@dataclass(frozen=True)
class _Target:
    """The operator's webhook: its address, the API server's TLS to it, its process."""

    url: str
    context: ssl.SSLContext
    pid: int
    #: The operator's ServiceAccount, the one user whose status writes the webhook allows.
    account: str


async def _storm(
    target: _Target, namespace: str, name: str,
    meanwhile: Callable[[], Coroutine[Any, Any, None]] | None = None,
) -> Phase:  # fmt: skip
    """The 16 largest reviews at once and ordinary ones meanwhile; the phase's peak."""
    url, context, pid = target.url, target.context, target.pid
    shapes = [largest(namespace, unit="x"), largest(namespace, unit="\U0001f600")]
    shapes.append(many_values(namespace))
    ordinary = json.dumps(review(namespace, name="ordinary")).encode()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await post(session, url, ordinary, context)  # warm
        before = memory(pid)[0]
        reset_peak(pid)
        started = time.monotonic()
        side = asyncio.create_task(meanwhile()) if meanwhile else None
        storm = [
            asyncio.create_task(post(session, url, shapes[i % len(shapes)], context))
            for i in range(HOSTILE)
        ]
        for _ in range(ORDINARY):
            seconds, answer = await post(session, url, ordinary, context)
            assert answer["response"]["allowed"] is True, answer
            await asyncio.sleep(0.05)
        answers = await asyncio.gather(*storm)
        if side is not None:
            await side
        seconds = time.monotonic() - started
    outcomes: dict[str, int] = {}
    for _, answer in answers:
        body = answer["response"]
        key = "allowed" if body["allowed"] else body["status"].get("reason") or "denied"
        outcomes[key] = outcomes.get(key, 0) + 1
    return Phase(name, before, memory(pid)[1], seconds, outcomes)


def _as_operator(admin: Endpoint, user: str) -> aiohttp.ClientSession:
    """The admin's session impersonating ``user``: the release check's writes, played."""
    session = admin.session()
    session.headers.update({"Impersonate-User": user})
    return session


async def _targets(session: aiohttp.ClientSession, targets: dict[str, Any]) -> None:
    """The release list as the operator's release check writes it."""
    path = f"/apis/{kinds.GROUP}/{kinds.VERSION}/{kinds.Plural.ICHOR_INSTALLATIONS}"
    status = {"status": {"upgradeTargets": targets}}
    await call(session, "PATCH", f"{path}/{kinds.INSTALLATION_NAME}/status", status)


@dataclass(frozen=True)
class Measured:
    """The figures of one run: the fleet's, each storm's, the chart's limit."""

    size: int
    fleet_rss: int
    fleet_peak: int
    phases: tuple[Phase, ...]
    limit: int

    @property
    def worst(self) -> int:
        return max([self.fleet_peak, *(p.peak for p in self.phases)])

    @property
    def free(self) -> float:
        """The share of the chart's limit the worst peak left free."""
        return 1 - self.worst / self.limit

    def lines(self) -> list[str]:
        met = fleet_bench._met(self.free >= GOAL_FREE)
        return [
            f"fleet {self.size:,} observed: operator RSS {self.fleet_rss / MIB:.0f} MiB, peak "
            f"{self.fleet_peak / MIB:.0f} MiB while the fleet started",
            *(p.line(self.limit) for p in self.phases),
            f"worst peak {self.worst / MIB:.0f} MiB of the chart's limit "
            f"{self.limit / MIB:.0f} MiB: {self.free:.0%} free (goal >= {GOAL_FREE:.0%}: "
            f"{met}); review budget {budget.BUDGET_BYTES / MIB:.0f} MiB, largest review "
            f"{intake.MAX_REVIEW_BYTES / MIB:.1f} MiB",
        ]


async def measure(workdir: Path, *, size: int, again: int = AGAIN) -> Measured:
    """The chart installed in API servers of its own under ``workdir``, its operator
    observing ``size`` clusters, stormed at rest, during a change and ``again`` times
    more at rest."""
    limit = chart_memory_limit()
    ports = {name: controlplane.free_port() for name in ("webhook", "healthz", "metrics")}
    with (
        controlplane.ControlPlane(workdir=workdir / "management") as plane,
        controlplane.ControlPlane(workdir=workdir / "workload") as workload,
        release.installed(
            plane, workdir=workdir, webhook_port=ports["webhook"], mutual_tls=True
        ) as rel,
    ):
        await fleet_bench.workload_nodes(workload)
        operator, log = start_operator(
            plane, rel.manifest, namespace=rel.namespace, workdir=workdir, ports=ports
        )
        try:
            harness.wait_until_answering(plane, alive=lambda: operator.poll() is None)
            url = f"https://127.0.0.1:{ports['webhook']}"
            context = plane.webhook_caller_context(serving_ca=workdir / "webhook-tls" / "ca.crt")
            account = helm.one(rel.manifest, "ServiceAccount")["metadata"]["name"]
            user = f"system:serviceaccount:{rel.namespace}:{account}"
            target = _Target(url, context, operator.pid, user)
            return await _measured(plane, workload, target, size, limit, again)
        except BaseException:
            print(log.read_text(errors="replace")[-4000:], flush=True)
            raise
        finally:
            stop_operator(operator)


async def _measured(
    plane: controlplane.ControlPlane,
    workload: controlplane.ControlPlane,
    target: _Target,
    size: int,
    limit: int,
    again: int,
) -> Measured:
    admin = Endpoint.admin_of(plane)
    pid = target.pid
    fleet = "memory-fleet"
    async with admin.session() as session, _as_operator(admin, target.account) as writer:
        await _targets(writer, fleet_bench.TARGETS)
        await fleet_bench._create_fleet(
            session, namespace=fleet, count=size, kubeconfig=workload.kubeconfig.read_bytes()
        )
        watcher = fleet_bench.Watcher(session, fleet, size)
        await watcher.start()
        try:
            alive = lambda: Path(f"/proc/{pid}").exists()  # noqa: E731
            await watcher.wait(fleet_bench.FIRST_DEFAULT, alive=alive)
            fleet_rss, fleet_peak = memory(pid)
            at_rest = await _storm(target, fleet, "16 largest reviews, fleet at rest")

            async def change() -> None:
                await _targets(writer, fleet_bench.CHANGED)
                await watcher.wait(fleet_bench.CHANGED_DEFAULT, alive=alive)

            following = await _storm(
                target, fleet, "16 largest reviews while the fleet follows a change",
                meanwhile=change,
            )  # fmt: skip
            # again and again at rest: what a storm leaves behind does not add up
            more = [
                await _storm(target, fleet, f"16 largest reviews, fleet at rest, {n} more")
                for n in range(1, again + 1)
            ]
        finally:
            await watcher.stop()
    return Measured(size, fleet_rss, fleet_peak, (at_rest, following, *more), limit)


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="ichor-memory-bench-") as workdir:
        return asyncio.run(measure(Path(workdir), size=fleet_size())).lines()


if __name__ == "__main__":
    for line in run():
        print(line)
