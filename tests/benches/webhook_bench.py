"""What the admission webhook adds to a TalosCluster write, held against a Go webhook.

One API server; three states of it, switched in alternating rounds so a change in the
machine's load hits all alike: no webhook, Ichor's webhook (both halves, as the chart
installs them: the mutating one writes the admission records, the validating one
judges; Ichor runs in a child process as the chart's ServiceAccount, as the operator's
own process would), and the test-only Go webhook of tests/gotools (controller-runtime,
the same pair rule from the same table export). In each state a bare asyncio client
sends server-side dry-run merge patches of one TalosCluster's Kubernetes version (all
compatible: neither webhook refuses them, so no SubjectAccessReview is asked) as the
admin, at concurrency 1, 20 and 50.

Figures: the overhead a client sees (p50/p99 with a webhook minus p50/p99 without it, in
the same rounds), Ichor's overhead over Go's (goal p99 <= 1.5x), Ichor's own time per
review (kopf's dispatch and the handler, without TLS and HTTP; goal p99 < 2 ms) and the
handler alone. The load average is printed with them: on a shared 2-core machine the
client-side figures measure the queue as much as the webhooks.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ichor.webhook import judgement, server
from tests.benches._api import Endpoint, Profile, clusters_path, quantiles
from tests.component.webhook import harness
from tests.harness import account, certs, controlplane
from tests.support import gowebhook

#: Requests per state, round and concurrency.
REQUESTS = {1: 150, 20: 400, 50: 500}
ROUNDS = 3
WARMUP = 50
NAMESPACE = "bench"
NAME = "bench"
STATES = ("none", "ichor", "go")
GOAL_RATIO = 1.5
GOAL_OWN_P99 = 0.002
SWITCH_TIMEOUT = 60.0
ROLE = "ichor-bench-webhook"
HANDLER_SAMPLES = 2000


async def _updates(endpoint: Endpoint, *, count: int, concurrency: int) -> list[float]:
    """Seconds per dry-run merge patch of the cluster's Kubernetes version."""
    samples: list[float] = []
    path = clusters_path(NAMESPACE, NAME)
    headers = {"Content-Type": "application/merge-patch+json"}
    async with endpoint.session(limit=concurrency) as session:
        indices = iter(range(count))

        async def worker() -> None:
            for i in indices:
                body = json.dumps({"spec": {"kubernetesVersion": f"v1.36.{7 + i % 50}"}})
                start = time.perf_counter()
                async with session.patch(
                    path, data=body, headers=headers, params={"dryRun": "All"}
                ) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"dry-run update answered {response.status}")
                samples.append(time.perf_counter() - start)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples


def _probe(plane: controlplane.ControlPlane) -> tuple[bool, str]:
    body = harness.cluster_manifest(f"probe-{uuid.uuid4().hex[:6]}", "default", talos="v1.15.0")
    result = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False
    )
    return result.returncode == 0, result.stderr


class States:
    """Switches the API server between no webhook, Ichor's and Go's; a switch returns
    once the probe write shows the new state (and no trace of the old one)."""

    def __init__(
        self,
        plane: controlplane.ControlPlane,
        *,
        ichor: list[dict[str, object]],
        go: dict[str, object],
        ichor_alive: Callable[[], bool],
    ) -> None:
        self.plane, self.ichor, self.go, self.ichor_alive = plane, ichor, go, ichor_alive
        self.current = ""

    def _delete(self, configuration: dict[str, object]) -> None:
        kind = str(configuration["kind"]).lower()
        name = str(dict(configuration["metadata"])["name"])  # type: ignore[call-overload]
        self.plane.kubectl("delete", kind, name, "--ignore-not-found")

    def _shows(self, state: str) -> bool:
        passed, stderr = _probe(self.plane)
        if state == "none":
            return passed
        if state == "go":
            return "gowebhook" in stderr and harness.PROBE_REFUSAL not in stderr
        return harness.PROBE_REFUSAL in stderr and "gowebhook" not in stderr

    def switch(self, state: str) -> None:
        if state == self.current:
            return
        for configuration in (*self.ichor, self.go):
            self._delete(configuration)
        for configuration in self.ichor if state == "ichor" else [self.go] if state == "go" else []:
            harness.apply_configuration(self.plane, configuration)  # type: ignore[arg-type]
        deadline = time.monotonic() + SWITCH_TIMEOUT
        while not self._shows(state):
            if not self.ichor_alive():
                raise RuntimeError("Ichor's webhook process stopped")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API server did not show state {state!r} in time")
            time.sleep(0.2)
        self.current = state

    def close(self) -> None:
        for configuration in (*self.ichor, self.go):
            self._delete(configuration)


async def _handler_times(count: int) -> list[float]:
    from tests.unit.webhook.fakes import FakeBackend, taloscluster, userinfo

    backend = FakeBackend()
    old = taloscluster(kubernetes="v1.36.6", cilium="1.20.4")
    samples: list[float] = []
    for i in range(count):
        new = taloscluster(kubernetes=f"v1.36.{7 + i % 50}", cilium="1.20.4")
        start = time.perf_counter()
        answer = await judgement.cluster_answer(
            new=new, old=old, userinfo=userinfo(), operation="UPDATE", dryrun=True, backend=backend
        )
        samples.append(time.perf_counter() - start)
        assert answer.allowed, answer.message
    return samples


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _served(timings: Path) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of every review the child has timed (harness._timed)."""
    time.sleep(0.7)  # the child writes its timings twice a second
    try:
        lines = timings.read_text().splitlines()
    except OSError:
        return []
    pairs = [line.split() for line in lines]
    return [(float(wall), float(cpu)) for wall, cpu in pairs]


def _measure(work: Path) -> list[str]:
    samples: dict[tuple[str, int], list[float]] = {(s, c): [] for s in STATES for c in REQUESTS}
    own: dict[int, list[tuple[float, float]]] = {c: [] for c in REQUESTS}
    with controlplane.ControlPlane(workdir=work / "plane") as plane:
        harness.install_crds(plane)
        plane.kubectl("create", "namespace", NAMESPACE)
        manifest = json.dumps(harness.cluster_manifest(NAME, NAMESPACE))
        plane.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=manifest)
        operator = account.grant(plane, role=ROLE, directory=work / "operator")
        admin = Endpoint.of(
            server=plane.server,
            ca_file=plane.ca_file,
            cert=plane.pki / "admin.crt",
            key=plane.pki / "admin.key",
        )
        files = certs.write_serving_certificate(work / "tls")
        port = controlplane.free_port()
        timings = work / "webhook-timings.json"
        child = multiprocessing.get_context("spawn").Process(
            target=harness.serve,
            args=(harness.Credentials.of(plane, operator),),
            kwargs={"port": port, "files": files, "timings": timings},
            name="ichor-webhook-bench",
            daemon=True,
        )
        child.start()
        assert child.pid is not None
        profile = Profile("webhook-ichor")
        profile.start(child.pid)
        profiled: list[str] = []
        url = f"https://127.0.0.1:{port}"
        ichor = [
            dict(server.render_mutating_configuration(
                url=url, ca_bundle=files.ca.read_bytes(), name="ichor-webhook-bench"
            )),
            dict(server.render_configuration(
                url=url, ca_bundle=files.ca.read_bytes(), name="ichor-webhook-bench"
            )),
        ]  # fmt: skip
        try:
            with gowebhook.running(
                files=certs.write_serving_certificate(work / "go-tls"),
                workdir=work / "go",
                client_ca=plane.webhook_client_ca,
                client_name=controlplane.WEBHOOK_CLIENT,
            ) as go:
                states = States(
                    plane,
                    ichor=ichor,
                    go=gowebhook.configuration(go, name="gowebhook-bench"),
                    ichor_alive=child.is_alive,
                )
                try:
                    for concurrency, count in REQUESTS.items():
                        for index in range(ROUNDS):
                            # rotate the order, so no state always follows the same one
                            order = STATES[index % 3 :] + STATES[: index % 3]
                            for state in order:
                                states.switch(state)
                                if index == 0:
                                    asyncio.run(
                                        _updates(admin, count=WARMUP, concurrency=concurrency)
                                    )
                                before = len(_served(timings)) if state == "ichor" else 0
                                samples[(state, concurrency)] += asyncio.run(
                                    _updates(admin, count=count, concurrency=concurrency)
                                )
                                if state == "ichor":
                                    own[concurrency] += _served(timings)[before:]
                finally:
                    states.close()
                    profiled = profile.stop()
        finally:
            child.terminate()
            child.join(10)
    return report(samples, own, asyncio.run(_handler_times(HANDLER_SAMPLES))) + profiled


def _ratio(ours: float, theirs: float) -> tuple[str, float]:
    if theirs <= 0:
        return "n/a (Go's overhead is within the noise)", float("inf")
    return f"{ours / theirs:.2f}x", ours / theirs


def report(
    samples: dict[tuple[str, int], list[float]],
    own: dict[int, list[tuple[float, float]]],
    handler: list[float],
) -> list[str]:
    load = os.getloadavg()[0]
    lines = [
        f"webhook: dry-run TalosCluster updates, {ROUNDS} alternating rounds per concurrency "
        f"(load average {load:.1f} on {os.cpu_count()} cores)"
    ]
    worst = 0.0
    noise: list[str] = []
    for concurrency in REQUESTS:
        none = quantiles(samples[("none", concurrency)])
        ichor = quantiles(samples[("ichor", concurrency)])
        go = quantiles(samples[("go", concurrency)])
        over_ichor = (ichor[0] - none[0], ichor[1] - none[1])
        over_go = (go[0] - none[0], go[1] - none[1])
        text50, _ = _ratio(over_ichor[0], over_go[0])
        text99, ratio99 = _ratio(over_ichor[1], over_go[1])
        if over_go[1] > 0:
            worst = max(worst, ratio99)
        else:
            noise.append(f"c={concurrency}")
        lines.append(
            f"webhook c={concurrency} ({len(samples[('none', concurrency)])} per state): "
            f"none p50 {_ms(none[0])} p99 {_ms(none[1])}; "
            f"Ichor overhead p50 {_ms(over_ichor[0])} p99 {_ms(over_ichor[1])}; "
            f"Go overhead p50 {_ms(over_go[0])} p99 {_ms(over_go[1])}; "
            f"Ichor/Go p50 {text50}, p99 {text99}"
        )
    every = [wall for values in own.values() for wall, _ in values]
    for concurrency, values in own.items():
        if values:
            p50, p99 = quantiles([wall for wall, _ in values])
            c50, c99 = quantiles([cpu for _, cpu in values])
            lines.append(
                f"webhook c={concurrency}: Ichor's own time per review (kopf dispatch + handler, "
                f"{len(values)} reviews, both halves) p50 {_ms(p50)}, p99 {_ms(p99)}; its CPU "
                f"time p50 {_ms(c50)}, p99 {_ms(c99)}"
            )
    own99 = quantiles(every)[1] if every else float("inf")
    h50, h99 = quantiles(handler)
    lines.append(
        f"webhook: handler alone p50 {h50 * 1e6:.0f} µs, p99 {h99 * 1e6:.0f} µs per compatible "
        f"update"
    )
    if len(noise) == len(REQUESTS):
        verdict = "not measured (Go's p99 overhead within the noise at every concurrency)"
    else:
        met = "met" if worst <= GOAL_RATIO else "NOT met"
        unmeasured = f"; not measured at {', '.join(noise)}: Go's within the noise" if noise else ""
        verdict = f"(worst {worst:.2f}x{unmeasured}): {met}"
    lines.append(
        f"webhook goals: p99 overhead <= {GOAL_RATIO}x Go's at every concurrency "
        f"{verdict}; own p99 (wall) < {_ms(GOAL_OWN_P99)} ({_ms(own99)}): "
        f"{'met' if own99 < GOAL_OWN_P99 else 'NOT met'}"
    )
    return lines


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="ichor-webhook-bench-") as tmp:
        return _measure(Path(tmp))


if __name__ == "__main__":
    for line in run():
        print(line)
