"""What the admission webhook adds to a TalosCluster write, through the real API server.

2,000 server-side dry-run updates of one TalosCluster at concurrency 20 without the
webhook configuration and 2,000 with it, run in alternating rounds of 500 so that a
change in the machine's load hits both alike; the webhook runs in a child process, as
the operator's own process would. Three figures: the latency a client sees (p50/p99 and
the ratio), the webhook's own time per review (kopf's dispatch and the handler, without
TLS and HTTP), and the handler alone. Goal: p99 overhead under 10 ms, handler
time under 1 ms. The load average is printed with them: on a shared 2-core machine the
client-side figures measure the queue as much as the webhook.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from kubernetes_asyncio import client, config

from ichor.testing import certs, controlplane
from ichor.webhook import server, validating
from tests.component.webhook import harness

REQUESTS = 2000
CONCURRENCY = 20
ROUNDS = 4
WARMUP = 100
NAMESPACE = "bench"
NAME = "bench"
MERGE = "application/merge-patch+json"


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * len(ordered)) - 1)]
    return statistics.median(ordered), p99


async def _updates(kubeconfig: Path, *, count: int) -> list[float]:
    """Seconds per dry-run merge patch of the cluster's Kubernetes version."""
    api = await config.new_client_from_config(config_file=str(kubeconfig))
    objects = client.CustomObjectsApi(api)
    gate = asyncio.Semaphore(CONCURRENCY)
    samples: list[float] = []

    async def one(i: int) -> None:
        body = {"spec": {"kubernetesVersion": f"v1.36.{7 + i % 50}"}}
        async with gate:
            start = time.perf_counter()
            response = await objects.patch_namespaced_custom_object(
                "ichor.dev", "v1alpha1", NAMESPACE, "talosclusters", NAME, body,
                dry_run="All", _content_type=MERGE, _preload_content=False,  # type: ignore[call-arg]
            )  # fmt: skip
            await response.read()
            response.release()
            samples.append(time.perf_counter() - start)

    try:
        await asyncio.gather(*(one(i) for i in range(count)))
    finally:
        await api.close()
    return samples


def _run(kubeconfig: Path, count: int) -> list[float]:
    return asyncio.run(_updates(kubeconfig, count=count))


def _probe_passes(plane: controlplane.ControlPlane) -> bool:
    body = harness.cluster_manifest(f"probe-{uuid.uuid4().hex[:6]}", "default", talos="v1.15.0")
    result = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False
    )
    return result.returncode == 0


def _webhook_off(plane: controlplane.ControlPlane, name: str) -> None:
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        plane.kubectl("delete", kind, name, "--ignore-not-found")
    deadline = time.monotonic() + 30
    while not _probe_passes(plane):
        if time.monotonic() > deadline:
            raise RuntimeError("the API server kept calling the webhook after its removal")
        time.sleep(0.2)


async def _handler_times(count: int) -> list[float]:
    from tests.unit.webhook.fakes import FakeBackend, taloscluster, userinfo

    backend = FakeBackend()
    old = taloscluster(kubernetes="v1.36.6", cilium="1.20.4")
    samples: list[float] = []
    for i in range(count):
        new = taloscluster(kubernetes=f"v1.36.{7 + i % 50}", cilium="1.20.4")
        start = time.perf_counter()
        answer = await validating.cluster_answer(
            new=new, old=old, userinfo=userinfo(), operation="UPDATE", dryrun=True, backend=backend
        )
        samples.append(time.perf_counter() - start)
        assert answer.allowed, answer.message
    return samples


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def run() -> list[str]:
    without: list[float] = []
    with_webhook: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ichor-webhook-bench-") as tmp:
        work = Path(tmp)
        with controlplane.ControlPlane(workdir=work / "plane") as plane:
            harness.install_crds(plane)
            plane.kubectl("create", "namespace", NAMESPACE)
            manifest = json.dumps(harness.cluster_manifest(NAME, NAMESPACE))
            plane.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=manifest)

            files = certs.write_serving_certificate(work / "tls")
            port = controlplane.free_port()
            timings = work / "webhook-timings.json"
            child = multiprocessing.get_context("spawn").Process(
                target=harness.serve,
                args=(harness.Credentials.admin(plane),),
                kwargs={"port": port, "files": files, "timings": timings},
                name="ichor-webhook-bench",
                daemon=True,
            )
            child.start()
            configuration = server.render_configuration(
                url=f"https://127.0.0.1:{port}",
                ca_bundle=files.ca.read_bytes(),
                name="ichor-webhook-bench",
            )
            # both halves, as the chart installs them: a write meets the mutating one first
            mutating = server.render_mutating_configuration(
                url=f"https://127.0.0.1:{port}",
                ca_bundle=files.ca.read_bytes(),
                name="ichor-webhook-bench",
            )
            try:
                per_round = REQUESTS // ROUNDS
                for index in range(ROUNDS):
                    _webhook_off(plane, configuration["metadata"]["name"])
                    if index == 0:
                        _run(plane.kubeconfig, WARMUP)
                    without += _run(plane.kubeconfig, per_round)
                    harness.apply_configuration(plane, mutating)
                    harness.apply_configuration(plane, configuration)
                    harness.wait_until_answering(plane, alive=child.is_alive)
                    if index == 0:
                        _run(plane.kubeconfig, WARMUP)
                    with_webhook += _run(plane.kubeconfig, per_round)
                time.sleep(1.2)  # the child writes its timings twice a second
                served: list[float] = json.loads(timings.read_text())
            finally:
                for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
                    plane.kubectl(
                        "delete", kind, configuration["metadata"]["name"], "--ignore-not-found",
                        check=False,
                    )  # fmt: skip
                child.terminate()
                child.join(10)
    handler = _quantiles(asyncio.run(_handler_times(REQUESTS)))
    off, on, own = _quantiles(without), _quantiles(with_webhook), _quantiles(served)
    load = os.getloadavg()[0]
    return [
        f"webhook: {len(without)} + {len(with_webhook)} dry-run TalosCluster updates at "
        f"concurrency {CONCURRENCY} in {ROUNDS} alternating rounds (load average {load:.1f} "
        f"on {os.cpu_count()} cores): without the webhook p50 {_ms(off[0])}, p99 "
        f"{_ms(off[1])}; with it p50 {_ms(on[0])}, p99 {_ms(on[1])}",
        f"webhook: ratio with/without p50 {on[0] / off[0]:.2f}, p99 {on[1] / off[1]:.2f}; "
        f"p99 overhead {_ms(on[1] - off[1])} (goal < 10 ms)",
        f"webhook: its own time per review (kopf dispatch + handler, {len(served)} reviews) "
        f"p50 {_ms(own[0])}, p99 {_ms(own[1])}",
        f"webhook: handler time p50 {handler[0] * 1e6:.0f} µs, p99 {handler[1] * 1e6:.0f} µs "
        f"per compatible update (goal < 1 ms)",
    ]


if __name__ == "__main__":
    for line in run():
        print(line)
