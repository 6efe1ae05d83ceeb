"""A fleet's workload clients hold no connection between two observations.

Every TLS connection holds a 256 KiB read buffer of asyncio's: a workload client per
TalosCluster whose connection stayed open between observations (a minute apart by
default) would hold a thousand of them for a thousand clusters. The workload here is the
test API server behind a TCP relay that counts the connections open through it; the
clusters' kubeconfig Secrets name the relay.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.controller.taloscluster.reconciler import WORKLOAD_IDLE_SECONDS
from tests.component.controller.conftest import FAST, Objects, Operator, Workload, eventually
from tests.component.controller.test_clusters import TARGETS, observed, talos_nodes
from tests.harness import controlplane

pytestmark = pytest.mark.component

CLUSTERS = 5
#: Shorter than aiohttp's 15 s keep-alive (a connection kept would be reused by the next
#: observation and never close), longer than WORKLOAD_IDLE_SECONDS.
SLOW = replace(FAST, observe_interval=8.0)


class Relay:
    """127.0.0.1:port -> the API server, byte for byte; counts open connections."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.open = 0
        self.most = 0
        self.total = 0
        #: Set while no connection is open.
        self.idle = asyncio.Event()
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self.idle.clear()
        self.total += 1
        self.most = max(self.most, self.open)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self.open -= 1
            if not self.open:
                self.idle.set()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Relay]:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        try:
            yield self
        finally:
            self._server.close()


@pytest.mark.parametrize("operator", [SLOW], indirect=True)
async def test_workload_connections_close_once_observed(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    kube_api: ApiClient,
    control_plane: controlplane.ControlPlane,
) -> None:
    await talos_nodes(workload, "v1.14.3")
    await objects.set_targets(TARGETS)
    port = int(control_plane.server.rsplit(":", 1)[1].rstrip("/"))
    async with Relay(port).running() as relay:
        text = control_plane.kubeconfig.read_text().replace(
            control_plane.server, f"https://127.0.0.1:{relay.port}"
        )
        core = client.CoreV1Api(kube_api)
        for n in range(CLUSTERS):
            data = {"kubeconfig": base64.b64encode(text.encode()).decode()}
            await core.create_namespaced_secret(
                objects.namespace,
                {"metadata": {"name": f"workload-{n}"}, "data": data},  # type: ignore[arg-type]
            )
            await objects.create_cluster(f"c{n}", kubeconfigSecretRef={"name": f"workload-{n}"})
        for n in range(CLUSTERS):
            name = f"c{n}"
            body = await eventually(functools.partial(objects.cluster, name), observed, what=name)
            assert body["status"]["talosVersion"] == "v1.14.3"
        # each cluster's client opened its own connection through the relay
        assert relay.total >= CLUSTERS
        # between two observations every workload connection is closed (with aiohttp's
        # default 15 s keep-alive the next observation, 8 s on, would reuse it: never 0)
        limit = SLOW.observe_interval + WORKLOAD_IDLE_SECONDS + 2.0
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(relay.idle.wait(), timeout=limit)
        assert relay.open == 0, f"{relay.open} workload connections still open after {limit} s"
        # and a client still works after its connection closed: the next observation
        # reopens one
        opened = relay.total
        await workload.set_node("cp-0", os_image="Talos (v1.14.4)", kubelet="v1.36.6")
        await eventually(
            lambda: objects.cluster("c0"),
            lambda b: (b.get("status") or {}).get("talosVersion") == "v1.14.4",
            what="c0 observed again after its connection closed",
        )
        assert relay.total > opened
