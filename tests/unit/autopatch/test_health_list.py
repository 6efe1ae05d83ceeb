"""A health check's object list as auto-patch reads it from the workload, against a stub
API server on loopback: the answer is JSON another party wrote, so it is read within the
same bounds as every other workload answer (``ichor.kube.untrusted``): bytes, values
counted before parsing, and nesting."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest_asyncio
from aiohttp import web
from kubernetes.aio.client import Configuration
from kubernetes.aio.client.api_client import ApiClient

from ichor.api.autopatch import HealthCheck
from ichor.controller.autopatch import health
from ichor.controller.autopatch.runner import AutoPatcher


@dataclass
class Stub:
    body: bytes = b'{"items": []}'


@pytest_asyncio.fixture(loop_scope="session")
async def stub() -> AsyncIterator[tuple[Stub, ApiClient]]:
    state = Stub()

    async def configmaps(request: web.Request) -> web.Response:
        return web.Response(body=state.body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/apps/configmaps", configmaps)
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


def _check() -> health.Compiled:
    done, problems = health.compile_checks(
        [
            HealthCheck(
                name="apps-ready",
                api_version="v1",
                resource="configmaps",
                namespace="apps",
                expression="objects.all(o, true)",
            )
        ]
    )
    assert problems == ()
    return done[0]


async def test_an_ordinary_list_is_read(stub: tuple[Stub, ApiClient]) -> None:
    state, api = stub
    state.body = json.dumps({"items": [{"metadata": {"name": "a"}}]}).encode()
    items, failure = await AutoPatcher(api=api)._list(api, _check())
    assert failure == ""
    assert items == [{"metadata": {"name": "a"}}]


async def test_empty_objects_filling_the_byte_bound_are_not_parsed(
    stub: tuple[Stub, ApiClient],
) -> None:
    """Under 2 MiB of ``{},`` are some 700,000 dicts once parsed: tens of MiB per check,
    for every cluster checked at once. The values are counted before anything is parsed."""
    state, api = stub
    count = (health.MAX_LIST_BYTES - 32) // 3
    state.body = b'{"items": [' + b"{}," * (count - 1) + b"{}]}"
    assert len(state.body) <= health.MAX_LIST_BYTES
    tracemalloc.start()
    try:
        items, failure = await AutoPatcher(api=api)._list(api, _check())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert items is None
    assert "JSON values" in failure, failure
    assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB while refusing it"


async def test_a_list_nested_deeper_than_the_bound_is_not_read(
    stub: tuple[Stub, ApiClient],
) -> None:
    """Deep enough for CEL's conversion to recurse past its limit, shallow enough for
    ``json.loads``: refused when read, never handed to the expression."""
    state, api = stub
    depth = 500
    state.body = b'{"items": [' + b"[" * depth + b"]" * depth + b"]}"
    items, failure = await AutoPatcher(api=api)._list(api, _check())
    assert items is None
    assert "deeper than" in failure, failure


async def test_an_answer_over_the_byte_bound_is_refused_as_before(
    stub: tuple[Stub, ApiClient],
) -> None:
    state, api = stub
    state.body = b'{"items": [' + b" " * health.MAX_LIST_BYTES + b"]}"
    items, failure = await AutoPatcher(api=api)._list(api, _check())
    assert items is None
    assert failure == f"its objects exceed {health.MAX_LIST_BYTES // 1024} KiB"
