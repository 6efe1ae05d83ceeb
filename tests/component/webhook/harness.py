"""The webhook as the operator runs it, against a real API server, for tests and the bench.

kopf runs in a thread with its own event loop: tests call kubectl (blocking) and the API
server calls back into the webhook during that call, so the webhook must not share the
test's loop. The ValidatingWebhookConfiguration is the fixed one ``render_configuration``
gives, pointing at 127.0.0.1 over TLS with a CA generated here; the webhook requires the
API server's client certificate (mutual TLS, the test control plane presents it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import math
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.web
import kopf
import pytest
import yaml

from ichor.api import kinds
from ichor.controller.recorder import wiring as recorder_wiring
from ichor.settings import Settings
from ichor.webhook import handlers, kubeapi, server
from ichor.webhook import wiring as webhook_wiring
from ichor.webhook.configuration import (
    MutatingWebhookConfiguration,
    ValidatingWebhookConfiguration,
    render_configuration,
    render_mutating_configuration,
)
from tests.harness import account, certs, controlplane
from tests.support import operator as support
from tests.support import table

READY_TIMEOUT = 60.0
#: A create every webhook build refuses (the first Talos minor past the table is unknown),
#: used to see it answer.
PROBE_REFUSAL = f"Talos {table.unknown_talos()} is refused"


def install_crds(plane: controlplane.ControlPlane) -> None:
    """The three CRDs from crds/, applied and established (idempotent)."""
    support.apply_crds(plane)


def cluster_manifest(
    name: str,
    namespace: str,
    *,
    talos: str = "v1.14.3",
    kubernetes: str = "v1.36.6",
    contract: str = "v1.14",
) -> dict[str, Any]:
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_CLUSTER.value,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "talosVersion": talos,
            "kubernetesVersion": kubernetes,
            "versionContract": contract,
        },
    }


def _probe(plane: controlplane.ControlPlane) -> str:
    body = cluster_manifest(f"probe-{uuid.uuid4().hex[:6]}", "default", talos=table.unknown_talos())
    result = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False
    )
    return result.stderr


@dataclass(frozen=True)
class Credentials:
    """How the webhook's kopf logs in (the operator's account; the bench: the admin) and
    where its API client reads from."""

    server: str
    ca_file: Path
    cert: Path
    key: Path
    kubeconfig: Path
    #: The CA of the API server's webhook client certificate: the webhook runs with
    #: mutual TLS, as the chart's ``webhook.clientAuth`` sets it up.
    webhook_client_ca: Path

    @classmethod
    def admin(cls, plane: controlplane.ControlPlane) -> Credentials:
        return cls(
            server=plane.server,
            ca_file=plane.ca_file,
            cert=plane.pki / "admin.crt",
            key=plane.pki / "admin.key",
            kubeconfig=plane.kubeconfig,
            webhook_client_ca=plane.webhook_client_ca,
        )

    @classmethod
    def of(cls, plane: controlplane.ControlPlane, operator: account.Account) -> Credentials:
        """The operator's account (the chart's ServiceAccount and ClusterRole)."""
        return cls(
            server=plane.server,
            ca_file=plane.ca_file,
            cert=operator.cert,
            key=operator.key,
            kubeconfig=operator.kubeconfig,
            webhook_client_ca=plane.webhook_client_ca,
        )


def build(
    credentials: Credentials,
    *,
    port: int,
    files: certs.ServingFiles,
    recorder: bool = False,
) -> tuple[kopf.OperatorRegistry, kopf.OperatorSettings, server.AdmissionServer]:
    """kopf's registry (the webhook's handlers, and with ``recorder`` the operator's part
    that posts what the webhook admitted as Events) and settings (our server, fixed
    configurations)."""
    registry = kopf.OperatorRegistry()
    running = Settings.from_env()
    webhook_wiring.register_handlers(registry, kube=running.kube)
    if recorder:
        recorder_wiring.register(registry, settings=running)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(
            server=credentials.server,
            ca_path=str(credentials.ca_file),
            certificate_path=str(credentials.cert),
            private_key_path=str(credentials.key),
        )

    settings = kopf.OperatorSettings()
    admission_server = server.configure(
        settings,
        server.AdmissionServer(
            port=port,
            certfile=files.cert,
            pkeyfile=files.key,
            cafile=files.ca,
            client_ca=credentials.webhook_client_ca,
            client_names=[controlplane.WEBHOOK_CLIENT],
        ),
    )
    settings.posting.enabled = False
    return registry, settings, admission_server


def memo_for(kubeconfig: Path) -> kopf.Memo:
    """kopf's memo holding the webhook's backend, reading the API as ``kubeconfig`` says
    (the webhook's start keeps one it finds there). Each webhook has its own: the backend
    keeps a client per event loop and its kopf's cleanup closes it."""
    return kopf.Memo({handlers.BACKEND: kubeapi.KubeBackend(kubeconfig=kubeconfig)})


@dataclass(frozen=True)
class ReviewTiming:
    """One request the bench's webhook answered: its path, the wall and CPU seconds of the
    whole respond path (``AdmissionServer.reply``: the body read within the budget, the
    parse, the claim check, kopf's dispatch and the handler, the answer's cleaning and its
    JSON bytes) and of kopf's part alone (NaN when the review never reached kopf)."""

    path: str
    wall: float
    cpu: float
    kopf_wall: float = math.nan
    kopf_cpu: float = math.nan

    def line(self) -> str:
        return f"{self.path} {self.wall!r} {self.cpu!r} {self.kopf_wall!r} {self.kopf_cpu!r}\n"

    @classmethod
    def parse(cls, line: str) -> ReviewTiming:
        path, wall, cpu, kopf_wall, kopf_cpu = line.split()
        return cls(path, float(wall), float(cpu), float(kopf_wall), float(kopf_cpu))


#: The kopf times of the request being answered (one task answers one request).
_KOPF_TIMES: contextvars.ContextVar[list[tuple[float, float]]] = contextvars.ContextVar(
    "kopf_times"
)


class TimedServer(server.AdmissionServer):
    """The admission server, timing every request it answers (``ReviewTiming``), the
    lines appended to ``sink`` twice a second. The timings exclude TLS and aiohttp's HTTP
    parsing: from aiohttp handing over the request to the answer's bytes. The CPU time
    is the thread's (a review that does not wait runs to its end without another task
    between): what the code costs, without the time the machine's load took the process
    off its core. Only new samples are written, so the writing costs the loop the same
    at the end as at the start."""

    def __init__(self, inner: server.AdmissionServer, sink: Path) -> None:
        super().__init__(
            port=inner.port,
            certfile=inner.certfile,
            pkeyfile=inner.pkeyfile,
            cafile=inner.cafile,
            client_ca=inner.client_ca,
            client_names=inner.client_names,
            addr=inner.addr,
            host=inner.host,
            file_check_interval=inner.file_check_interval,
            budget=inner.budget,
        )
        self.sink = sink
        self.samples: list[ReviewTiming] = []

    async def reply(self, fn: kopf.WebhookFn, request: aiohttp.web.Request) -> aiohttp.web.Response:
        kopf_times: list[tuple[float, float]] = []
        token = _KOPF_TIMES.set(kopf_times)
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return await super().reply(fn, request)
        finally:
            wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
            _KOPF_TIMES.reset(token)
            kopf_wall, kopf_cpu = kopf_times[0] if kopf_times else (math.nan, math.nan)
            path = request.match_info.get("id", "") or "-"
            self.samples.append(ReviewTiming(path, wall, cpu, kopf_wall, kopf_cpu))

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncGenerator[kopf.WebhookClientConfig, None]:
        async def timed(request: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return await fn(request, **kwargs)
            finally:
                times = _KOPF_TIMES.get(None)
                if times is not None:
                    times.append((time.perf_counter() - start, time.thread_time() - cpu))

        def append(lines: str) -> None:
            with self.sink.open("a") as out:
                out.write(lines)

        async def flush() -> None:
            written = 0
            while True:
                await asyncio.sleep(0.5)
                new, written = self.samples[written:], len(self.samples)
                if new:
                    await asyncio.to_thread(append, "".join(t.line() for t in new))

        await asyncio.to_thread(self.sink.write_text, "")
        task = asyncio.create_task(flush())
        try:
            async for config in super().__call__(timed):
                yield config
        finally:
            task.cancel()


def serve(
    credentials: Credentials,
    *,
    port: int,
    files: certs.ServingFiles,
    timings: Path | None = None,
) -> None:
    """Run the webhook until the process is stopped (a child process's target)."""
    registry, settings, admission_server = build(credentials, port=port, files=files)
    if timings is not None:
        settings.admission.server = TimedServer(admission_server, timings)
    asyncio.run(
        kopf.operator(
            registry=registry,
            settings=settings,
            memo=memo_for(credentials.kubeconfig),
            clusterwide=True,
            standalone=True,
        )
    )


def apply_configuration(
    plane: controlplane.ControlPlane,
    configuration: ValidatingWebhookConfiguration | MutatingWebhookConfiguration,
) -> None:
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(dict(configuration)))


def wait_until_answering(
    plane: controlplane.ControlPlane, *, alive: Callable[[], bool] = lambda: True
) -> None:
    """Until the API server gets the webhook's refusal of the probe write."""
    deadline = time.monotonic() + READY_TIMEOUT
    seen = ""
    while PROBE_REFUSAL not in (seen := _probe(plane)):
        if not alive():
            raise RuntimeError(f"the webhook stopped while starting: {seen}")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the API server did not call the webhook within {READY_TIMEOUT} s: {seen}"
            )
        time.sleep(0.2)


class Webhook:
    """kopf with the webhook's handlers only, in a thread, as the operator's account; its
    server and configuration."""

    def __init__(
        self,
        plane: controlplane.ControlPlane,
        workdir: Path,
        operator: account.Account,
        *,
        recorder: bool = True,
    ) -> None:
        self.plane = plane
        self.workdir = workdir
        self.operator = operator
        self.name = f"ichor-webhook-{uuid.uuid4().hex[:6]}"
        self.files = certs.write_serving_certificate(workdir / "tls")
        self.port = controlplane.free_port()
        self.registry, self.settings, self.server = build(
            Credentials.of(plane, operator), port=self.port, files=self.files, recorder=recorder
        )
        memo = memo_for(operator.kubeconfig)
        memo[recorder_wiring.KUBECONFIG] = operator.kubeconfig
        self.kopf = support.KopfThread(
            self.registry, settings=self.settings, memo=memo, name=self.name
        )

    def configuration(self) -> ValidatingWebhookConfiguration:
        return render_configuration(
            url=self.server.url, ca_bundle=self.files.ca.read_bytes(), name=self.name
        )

    def mutating_configuration(self) -> MutatingWebhookConfiguration:
        return render_mutating_configuration(
            url=self.server.url, ca_bundle=self.files.ca.read_bytes(), name=self.name
        )

    def start(self) -> Webhook:
        self.kopf.start()
        apply_configuration(self.plane, self.mutating_configuration())
        apply_configuration(self.plane, self.configuration())
        try:
            wait_until_answering(self.plane, alive=lambda: self.kopf.alive)
        except RuntimeError as error:
            raise RuntimeError(f"{error} (kopf: {self.kopf.errors!r})") from None
        return self

    def stop_server(self) -> None:
        """Stop kopf and its endpoint; the configuration stays (the webhook is down)."""
        try:
            self.kopf.stop()
        except AssertionError as error:
            raise RuntimeError(str(error)) from None

    def delete_configuration(self) -> None:
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
            self.plane.kubectl("delete", kind, self.name, "--ignore-not-found")

    def close(self) -> None:
        try:
            self.delete_configuration()
        finally:
            self.stop_server()


@contextlib.contextmanager
def running(
    plane: controlplane.ControlPlane,
    workdir: Path,
    operator: account.Account,
    *,
    recorder: bool = True,
) -> Iterator[Webhook]:
    """The webhook started as ``operator`` and registered for the ``with`` block (with
    ``recorder``, also the operator's recorder of admitted overrides); a start that fails
    fails the test with its reason."""
    install_crds(plane)
    webhook = Webhook(plane, workdir, operator, recorder=recorder)
    try:
        webhook.start()
    except RuntimeError as error:
        webhook.close()
        pytest.fail(str(error), pytrace=False)
    try:
        yield webhook
    finally:
        webhook.close()
