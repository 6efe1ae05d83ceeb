"""One read of a workload cluster ends by its deadline whatever the address does: it
accepts and never answers, it starts TLS and never finishes it, it finishes TLS and never
answers the request, it trickles its answer. Each is a real loopback server
(``tests.support.hostile``); the read is the reconciler's own, through the client its
kubeconfig makes.

Two bounds are checked: ``observe_timeout`` over the whole read (what one cluster may
hold a worker for), and the client's per-request timeout alone (``REQUEST_TIMEOUT``:
connect, TLS handshake and reading the answer are all within it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ichor.api.conditions import ClusterReason
from ichor.controller.taloscluster import reconciler
from ichor.kube.clients import SecretValue
from ichor.settings import ControllerSettings
from tests.support import hostile

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: Slack over a deadline for the cancellation and the client's cleanup (a loaded machine).
SLACK = 1.5


async def _read(server: hostile.Server, settings: ControllerSettings) -> tuple[float, Any]:
    controller = reconciler.ClusterController(api=None, settings=settings)  # type: ignore[arg-type]
    text = server.kubeconfig().encode()

    async def secret(*_: Any, **__: Any) -> SecretValue:
        return SecretValue(value=text, resource_version="1")

    cluster = reconciler._Cluster(body={"metadata": {"name": "c", "namespace": "a"}})
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(reconciler, "read_secret_key", secret)
            await controller._observe(cluster, ("a", "kubeconfig", "kubeconfig"), None)
    finally:
        await controller.stop()
    return loop.time() - started, cluster


@pytest.mark.parametrize("kind", list(hostile.Kind), ids=lambda k: k.value)
async def test_a_read_of_a_hostile_address_ends_by_the_observe_timeout(
    kind: hostile.Kind,
) -> None:
    settings = ControllerSettings(observe_timeout=1.5)
    async with hostile.serving(kind) as server:
        elapsed, cluster = await _read(server, settings)
        assert server.accepted >= 1
    assert elapsed < settings.observe_timeout + SLACK, f"{kind.value}: held {elapsed:.1f} s"
    assert cluster.failure is not None
    assert cluster.failure.reason == ClusterReason.WORKLOAD_UNREACHABLE
    assert cluster.observation is None
    assert cluster.failures == 1


@pytest.mark.parametrize("kind", list(hostile.Kind), ids=lambda k: k.value)
async def test_the_per_request_timeout_covers_connect_tls_and_the_answer(
    kind: hostile.Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the whole read may take 60 s; each request only REQUEST_TIMEOUT (made 1 s here)
    monkeypatch.setattr(reconciler, "REQUEST_TIMEOUT", 1.0)
    settings = ControllerSettings(observe_timeout=60.0)
    async with hostile.serving(kind) as server:
        elapsed, cluster = await _read(server, settings)
    assert elapsed < 1.0 + SLACK, f"{kind.value}: held {elapsed:.1f} s"
    assert cluster.failure is not None
    assert cluster.failure.reason == ClusterReason.WORKLOAD_UNREACHABLE


async def test_the_secret_read_is_within_the_deadline() -> None:
    # a management API that does not answer the Secret read holds the worker no longer
    settings = ControllerSettings(observe_timeout=1.0)
    controller = reconciler.ClusterController(api=None, settings=settings)  # type: ignore[arg-type]

    async def stuck(*_: Any, **__: Any) -> SecretValue:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    cluster = reconciler._Cluster(body={"metadata": {"name": "c", "namespace": "a"}})
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reconciler, "read_secret_key", stuck)
        try:
            async with asyncio.timeout(settings.observe_timeout + 10):
                await controller._observe(cluster, ("a", "kubeconfig", "kubeconfig"), None)
        except TimeoutError:
            pytest.fail("the Secret read is outside the observation's deadline")
    assert loop.time() - started < settings.observe_timeout + SLACK
    assert cluster.failure is not None
    assert cluster.failure.reason == ClusterReason.WORKLOAD_UNREACHABLE
