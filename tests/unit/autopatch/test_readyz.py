"""The workload's ``/readyz`` as auto-patch asks it, against a stub API server on
loopback: only a 2xx is ready, the answer's status and last line are said, and each
response is released (its connection goes back to the pool, none is left open)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest_asyncio
from aiohttp import web
from kubernetes.aio.client import Configuration
from kubernetes.aio.client.api_client import ApiClient

from ichor.controller.autopatch.runner import AutoPatcher


@dataclass
class Stub:
    """What ``/readyz`` answers next, and the connections it was asked on."""

    status: int = 200
    body: str = "ok"
    peers: set[object] = field(default_factory=set)
    asked: int = 0


@pytest_asyncio.fixture(loop_scope="session")
async def stub() -> AsyncIterator[tuple[Stub, ApiClient]]:
    state = Stub()

    async def readyz(request: web.Request) -> web.Response:
        state.asked += 1
        state.peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        return web.Response(status=state.status, text=state.body)

    app = web.Application()
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    config = Configuration(host=f"http://127.0.0.1:{port}")
    config.api_key = {"BearerToken": "t"}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    api = ApiClient(config)
    try:
        yield state, api
    finally:
        await api.close()
        await runner.cleanup()


async def test_a_500_is_not_ready_and_says_the_answer(stub: tuple[Stub, ApiClient]) -> None:
    state, api = stub
    state.status, state.body = (
        500,
        "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed",
    )
    probe = await AutoPatcher(api=api)._readyz(api)
    assert not probe.ok
    assert probe.message.startswith("answered 500")
    assert "readyz check failed" in probe.message


async def test_a_403_is_not_ready(stub: tuple[Stub, ApiClient]) -> None:
    state, api = stub
    state.status, state.body = 403, '{"kind":"Status","reason":"Forbidden"}'
    probe = await AutoPatcher(api=api)._readyz(api)
    assert not probe.ok
    assert probe.message.startswith("answered 403")


async def test_a_200_is_ready(stub: tuple[Stub, ApiClient]) -> None:
    state, api = stub
    state.status, state.body = 200, "ok"
    probe = await AutoPatcher(api=api)._readyz(api)
    assert probe.ok
    assert probe.message == ""


async def test_each_answer_is_released_so_one_connection_serves_every_probe(
    stub: tuple[Stub, ApiClient],
) -> None:
    state, api = stub
    state.peers.clear()
    before = state.asked
    patcher = AutoPatcher(api=api)
    # larger than one read of the socket, smaller than what a probe reads: an answer left
    # unread holds its connection, and the next probe opens another
    for status in (200, 500, 200, 403, 200, 200):
        state.status, state.body = status, "x" * (32 * 1024)
        await patcher._readyz(api)
    assert state.asked - before == 6
    assert len(state.peers) == 1, state.peers


async def test_a_huge_answer_is_read_bounded(stub: tuple[Stub, ApiClient]) -> None:
    state, api = stub
    state.status, state.body = 500, "y" * (4 * 1024 * 1024) + "\nthe end"
    probe = await AutoPatcher(api=api)._readyz(api)
    assert not probe.ok
    assert probe.message.startswith("answered 500")
    assert len(probe.message) < 300
