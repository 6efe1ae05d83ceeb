"""The reconciler's reads of a workload cluster: an answer too large to read is
unreadable data, and an unexpected error while observing is a condition, never a stale
``Ready=True`` (without an API server: the calls are stand-ins)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes.aio.client.api_client import ApiClient

from ichor.api.conditions import ClusterReason
from ichor.controller.observe import CNIObservation, NodesObservation, Observation
from ichor.controller.taloscluster import reconciler
from ichor.kube.accounts import Origin, ServiceAccount
from ichor.settings import ControllerSettings

#: Who reads the cluster the operator runs in for the TalosCluster of these tests.
READER = ServiceAccount(namespace="team-a", name="reader", origin=Origin.SPEC)


class Stream:
    """The part of aiohttp's StreamReader the reconciler reads: chunks, then b""."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.read_bytes = 0

    async def readany(self) -> bytes:
        if not self.chunks:
            return b""
        chunk = self.chunks.pop(0)
        self.read_bytes += len(chunk)
        return chunk


class Response:
    def __init__(self, chunks: list[bytes], *, length: int | None = None) -> None:
        self.content = Stream(chunks)
        self.content_length = length
        self.status = 200
        self.reason = "OK"
        self.released = False

    async def read(self) -> bytes:
        out = b""
        while chunk := await self.content.readany():
            out += chunk
        return out

    def release(self) -> None:
        self.released = True


def calling(response: Response) -> Any:
    async def method(*_: Any, **__: Any) -> Response:
        return response

    return method


async def test_a_list_answer_of_reasonable_size_is_read() -> None:
    body = json.dumps({"items": [{"metadata": {"name": f"n{i}"}} for i in range(100)]}).encode()
    response = Response([body[:1000], body[1000:]])
    got = await reconciler._get_json(calling(response))
    assert isinstance(got, dict)
    assert len(got["items"]) == 100


async def test_a_list_answer_larger_than_the_bound_is_not_read_to_its_end() -> None:
    chunk = b"[" + b"0," * (1024 * 1024)
    response = Response([chunk] * 64)  # 128 MiB, no Content-Length
    assert await reconciler._get_json(calling(response)) is None
    assert response.content.read_bytes <= reconciler.MAX_LIST_BYTES + len(chunk)
    assert response.released


async def test_a_declared_length_over_the_bound_is_not_read_at_all() -> None:
    response = Response([b"{}"], length=reconciler.MAX_LIST_BYTES + 1)
    assert await reconciler._get_json(calling(response)) is None
    assert response.content.read_bytes == 0


async def test_a_list_answer_with_millions_of_values_is_not_parsed() -> None:
    body = b'{"items": [' + b",".join([b"{}"] * 2_000_000) + b"]}"
    assert len(body) < reconciler.MAX_LIST_BYTES
    assert await reconciler._get_json(calling(Response([body]))) is None


@pytest.fixture
async def controller() -> AsyncIterator[reconciler.ClusterController]:
    api = ApiClient()  # no request: ``observe`` is the test's
    try:
        yield reconciler.ClusterController(api=api, settings=ControllerSettings())
    finally:
        await api.close()


GOOD = Observation(
    nodes=NodesObservation(1, ("v1.14.3",), ("v1.36.6",), ()),
    cni=CNIObservation(detected="cilium", version="1.20.4"),
)


@pytest.mark.parametrize(
    "error", [ValueError("Exceeds the limit (4300 digits)"), KeyError("items"), MemoryError()]
)
async def test_an_unexpected_error_while_observing_is_a_condition_not_a_stale_status(
    controller: reconciler.ClusterController, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    cluster = reconciler._Cluster(body={"metadata": {"name": "prod", "namespace": "team-a"}})

    async def good(_: Any) -> Observation:
        return GOOD

    async def failing(_: Any) -> Observation:
        raise error

    monkeypatch.setattr(reconciler, "observe", good)
    await controller._observe(cluster, None, READER)
    assert cluster.observation == GOOD
    assert cluster.failure is None

    monkeypatch.setattr(reconciler, "observe", failing)
    await controller._observe(cluster, None, READER)  # no exception escapes
    assert cluster.failure is not None
    assert cluster.failure.reason == ClusterReason.NODE_VERSION_UNREADABLE
    assert type(error).__name__ in cluster.failure.message
    assert len(cluster.failure.message) < 400
    assert cluster.failures == 1
