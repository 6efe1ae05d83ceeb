"""The reconciler's reads of a workload cluster, against a stand-in of its API server:
a refusal (401, 403, 5xx) is the workload refusing or failing, never Node data."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio.client.api_client import ApiClient

from ichor.api.conditions import ClusterReason
from ichor.controller.taloscluster import reconciler
from ichor.kube import errors
from ichor.settings import ControllerSettings

Query = dict[str, str]


class Stream:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def readany(self) -> bytes:
        chunk, self.body = self.body[:65536], self.body[65536:]
        return chunk


class Response:
    """What kubernetes_asyncio hands back for ``_preload_content=False``: aiohttp's."""

    def __init__(self, status: int, body: object, reason: str = "") -> None:
        raw = json.dumps(body).encode()
        self.status = status
        self.reason = reason
        self.content = Stream(raw)
        self.content_length = len(raw)
        self.released = False

    def release(self) -> None:
        self.released = True


class Workload(ApiClient):
    """The workload's API server: ``answer(path, query)`` gives each response."""

    def __init__(self, answer: Callable[[str, Query], Response]) -> None:
        super().__init__()
        self.answer = answer
        self.asked: list[tuple[str, Query]] = []

    async def call_api(  # type: ignore[override]  # only what list calls pass
        self, path: str, method: str, *args: Any, **kwargs: Any
    ) -> Any:
        assert method == "GET"
        assert kwargs["_preload_content"] is False
        query = {key: str(value) for key, value in args[1]}
        self.asked.append((path, query))
        return self.answer(path, query)


def node(name: str, talos: str = "v1.14.3", kubelet: str = "v1.36.6") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "nodeInfo": {"osImage": f"Talos ({talos})", "kubeletVersion": kubelet},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def refusing(status: int, reason: str) -> Any:
    def answer(path: str, query: Query) -> Response:
        return Response(status, {"kind": "Status", "message": reason, "code": status}, reason)

    return answer


def node_queries(workload: Workload) -> list[Query]:
    return [query for path, query in workload.asked if path == "/api/v1/nodes"]


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, errors.Unauthorized), (403, errors.Forbidden), (503, errors.ServerError)],
)
async def test_a_refusal_is_raised_as_its_typed_error_not_read_as_data(
    status: int, kind: type[errors.ApiError]
) -> None:
    response = Response(status, {"kind": "Status", "items": [node("forged")]}, "Refused")

    async def method(*_: Any, **__: Any) -> Response:
        return response

    with pytest.raises(kind) as raised:
        await reconciler._get_json(method)
    assert raised.value.status == status
    assert response.released


@pytest.mark.parametrize("status", [401, 403])
async def test_a_workload_that_refuses_the_operator_is_unreachable_not_unreadable(
    status: int,
) -> None:
    workload = Workload(refusing(status, "Unauthorized" if status == 401 else "Forbidden"))
    controller = reconciler.ClusterController(api=workload, settings=ControllerSettings())
    cluster = reconciler._Cluster(body={"metadata": {"name": "prod", "namespace": "team-a"}})
    try:
        await controller._observe(cluster, None)
    finally:
        await workload.close()
    assert cluster.observation is None
    assert cluster.failure is not None
    assert cluster.failure.reason == ClusterReason.WORKLOAD_UNREACHABLE
    assert f"refused the operator ({status}" in cluster.failure.message
