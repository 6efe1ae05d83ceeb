"""A workload client's idle connections: how long they are kept is set, or refused."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
import yaml

from ichor.kube import clients

KUBECONFIG = yaml.safe_dump(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
)


def _keepalive(api: Any) -> object:
    rest = api.rest_client
    if rest.pool_manager is None:  # built on the first request, as the client does
        rest.pool_manager = rest._create_pool_manager()
    connector = rest.pool_manager.connector
    return connector._keepalive_timeout


async def test_idle_seconds_is_the_connectors_keep_alive() -> None:
    api = await clients.client_from_kubeconfig(KUBECONFIG, origin="the test", idle_seconds=2.0)
    try:
        assert _keepalive(api) == 2.0
    finally:
        await api.close()
    default = await clients.client_from_kubeconfig(KUBECONFIG, origin="the test")
    try:
        assert _keepalive(default) == 15.0
    finally:
        await default.close()


async def test_a_connector_without_a_keep_alive_is_refused() -> None:
    session = aiohttp.ClientSession(connector=aiohttp.BaseConnector())
    try:
        fake = SimpleNamespace(rest_client=SimpleNamespace(pool_manager=session))
        with pytest.raises(TypeError, match="keep-alive of BaseConnector"):
            clients.keep_idle_connections(fake, seconds=1.0)  # type: ignore[arg-type]
    finally:
        await session.close()
