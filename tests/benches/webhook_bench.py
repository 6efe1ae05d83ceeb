"""What the admission webhook adds to a TalosCluster write, through the real API server.

2,000 server-side dry-run updates of one TalosCluster at concurrency 20, first without the
webhook configuration, then with it (the webhook in a child process, as the operator's
own process would be), and the time of the handler alone. Goal (issue 7): p99 overhead
under 10 ms, handler time under 1 ms.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

from kubernetes_asyncio import client, config

from ichor.testing import controlplane
from ichor.webhook import admission, certificates, server, validating
from tests.component.webhook import harness

REQUESTS = 2000
CONCURRENCY = 20
WARMUP = 100
NAMESPACE = "bench"
NAME = "bench"


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * len(ordered)) - 1)]
    return p50, p99


async def _updates(kubeconfig: Path, *, count: int) -> list[float]:
    """Seconds per dry-run merge patch of the cluster's Kubernetes version."""
    api = await config.new_client_from_config(config_file=str(kubeconfig))
    objects = client.CustomObjectsApi(api)
    gate = asyncio.Semaphore(CONCURRENCY)
    samples: list[float] = []

    async def one(i: int) -> None:
        version = f"v1.36.{7 + i % 50}"
        async with gate:
            start = time.perf_counter()
            await objects.patch_namespaced_custom_object(
                "ichor.dev",
                "v1alpha1",
                NAMESPACE,
                "talosclusters",
                NAME,
                {"spec": {"kubernetesVersion": version}},
                dry_run="All",
                _content_type="application/merge-patch+json",  # type: ignore[call-arg]
            )
            samples.append(time.perf_counter() - start)

    try:
        await asyncio.gather(*(one(i) for i in range(count)))
    finally:
        await api.close()
    return samples


def _measure(kubeconfig: Path) -> tuple[float, float]:
    asyncio.run(_updates(kubeconfig, count=WARMUP))
    return _quantiles(asyncio.run(_updates(kubeconfig, count=REQUESTS)))


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


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="ichor-webhook-bench-") as tmp:
        work = Path(tmp)
        with controlplane.ControlPlane(workdir=work / "plane") as plane:
            harness.install_crds(plane)
            plane.kubectl("create", "namespace", NAMESPACE)
            plane.kubectl(
                "apply",
                "-n",
                NAMESPACE,
                "-f",
                "-",
                input=json.dumps(harness.cluster_manifest(NAME, NAMESPACE)),
            )
            without = _measure(plane.kubeconfig)

            files = certificates.write_serving_certificate(work / "tls")
            port = controlplane.free_port()
            credentials = harness.Credentials.admin(plane)
            child = multiprocessing.get_context("spawn").Process(
                target=harness.serve,
                args=(credentials,),
                kwargs={"port": port, "files": files},
                name="ichor-webhook-bench",
                daemon=True,
            )
            child.start()
            configuration = server.render_configuration(
                url=f"https://127.0.0.1:{port}", ca_bundle=files.ca.read_bytes()
            )
            try:
                harness.apply_configuration(plane, configuration)
                harness.wait_until_answering(plane, alive=child.is_alive)
                with_webhook = _measure(plane.kubeconfig)
            finally:
                plane.kubectl(
                    "delete",
                    "validatingwebhookconfiguration",
                    configuration["metadata"]["name"],
                    "--ignore-not-found",
                    check=False,
                )
                child.terminate()
                child.join(10)
    handler = _quantiles(asyncio.run(_handler_times(REQUESTS)))

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.1f} ms"

    overhead = with_webhook[1] - without[1]
    return [
        f"webhook: {REQUESTS} dry-run TalosCluster updates at concurrency {CONCURRENCY}: "
        f"without the webhook p50 {ms(without[0])}, p99 {ms(without[1])}; "
        f"with it p50 {ms(with_webhook[0])}, p99 {ms(with_webhook[1])}",
        f"webhook: ratio with/without p50 {with_webhook[0] / without[0]:.2f}, "
        f"p99 {with_webhook[1] / without[1]:.2f}; p99 overhead {ms(overhead)} (goal < 10 ms)",
        f"webhook: handler time p50 {handler[0] * 1e6:.0f} µs, p99 {handler[1] * 1e6:.0f} µs "
        f"per compatible update (goal < 1 ms; {admission.VERB!r} review not needed)",
    ]


if __name__ == "__main__":
    for line in run():
        print(line)
