"""The reconciler's reads of a workload cluster, against a stand-in of its API server:
a refusal (401, 403, 5xx) is the workload refusing or failing, never Node data; and the
Node list is read in pages of ``NODE_PAGE``, each within one answer's bounds, however
many Nodes there are, and never past ``MAX_NODE_PAGES``."""

from __future__ import annotations

import itertools
import json
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.aio.client.api_client import ApiClient

from ichor.api.conditions import ClusterReason
from ichor.controller import observe
from ichor.controller.taloscluster import reconciler
from ichor.kube import errors
from ichor.settings import ControllerSettings
from tests.unit.controller.test_observe_fuzz import nodes as fuzzed_nodes

Query = dict[str, str]


class Stream:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def readany(self) -> bytes:
        chunk, self.body = self.body[:65536], self.body[65536:]
        return chunk


class Response:
    """What the ``*_without_preload_content`` calls hand back: aiohttp's response."""

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

    async def call_api(  # only what list calls pass
        self, method: str, url: str, *args: Any, **kwargs: Any
    ) -> Any:
        assert method == "GET"
        assert kwargs["_preload_content"] is False
        parts = urllib.parse.urlsplit(url)
        query = dict(urllib.parse.parse_qsl(parts.query))
        self.asked.append((parts.path, query))
        return SimpleNamespace(response=self.answer(parts.path, query))

    async def close(self) -> None:
        await ApiClient.close(self)


def node(name: str, talos: str = "v1.14.3", kubelet: str = "v1.36.6") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "nodeInfo": {"osImage": f"Talos ({talos})", "kubeletVersion": kubelet},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def paged(all_nodes: Sequence[dict[str, Any]], *, honour_limit: bool = True) -> Any:
    """A server holding ``all_nodes``: pages of ``limit`` with a continue token."""

    def answer(path: str, query: Query) -> Response:
        if path != "/api/v1/nodes":
            return Response(200, {"items": []})
        start = int(query.get("continue") or 0)
        size = int(query["limit"]) if honour_limit else len(all_nodes)
        end = start + size
        rest = str(end) if end < len(all_nodes) else ""
        return Response(200, {"metadata": {"continue": rest}, "items": all_nodes[start:end]})

    return answer


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

    async def from_kubeconfig(*_: Any) -> ApiClient:
        return workload  # the client the cluster's kubeconfig Secret makes

    controller._workload_client = from_kubeconfig  # type: ignore[method-assign,assignment]
    try:
        await controller._observe(cluster, ("team-a", "prod-kubeconfig", "kubeconfig"), None)
    finally:
        await workload.close()
    assert cluster.observation is None
    assert cluster.failure is not None
    assert cluster.failure.reason == ClusterReason.WORKLOAD_UNREACHABLE
    assert f"refused the operator ({status}" in cluster.failure.message


async def test_the_node_list_is_read_in_pages_and_counted_whole() -> None:
    many = [node(f"n{i}", kubelet="v1.36.6" if i % 7 else "v1.35.2") for i in range(1234)]
    workload = Workload(paged(many))
    try:
        seen = await reconciler.observe(workload)
    finally:
        await workload.close()
    assert seen.nodes.count == 1234
    assert seen.nodes.kubernetes_versions == ("v1.35.2", "v1.36.6")
    asked = node_queries(workload)
    assert [q.get("continue", "") for q in asked] == ["", "500", "1000"]
    assert {q["limit"] for q in asked} == {str(reconciler.NODE_PAGE)}


async def test_a_server_that_ignores_the_limit_gives_one_page() -> None:
    workload = Workload(paged([node(f"n{i}") for i in range(700)], honour_limit=False))
    try:
        seen = await reconciler.observe(workload)
    finally:
        await workload.close()
    assert seen.nodes.count == 700
    assert len(node_queries(workload)) == 1


async def test_a_list_that_never_ends_stops_at_the_page_bound_and_is_unreadable() -> None:
    def endless(path: str, query: Query) -> Response:
        if path != "/api/v1/nodes":
            return Response(200, {"items": []})
        page = int(query.get("continue") or 0)
        return Response(200, {"metadata": {"continue": str(page + 1)}, "items": [node("n")]})

    workload = Workload(endless)
    try:
        seen = await reconciler.observe(workload)
    finally:
        await workload.close()
    assert len(node_queries(workload)) == reconciler.MAX_NODE_PAGES
    assert seen.nodes.count == 0
    assert seen.nodes.unreadable
    assert "cannot be read" in seen.nodes.unreadable[0]


async def test_a_page_without_a_usable_token_makes_the_list_unreadable() -> None:
    def odd(path: str, query: Query) -> Response:
        if path != "/api/v1/nodes":
            return Response(200, {"items": []})
        return Response(200, {"metadata": {"continue": ["x"]}, "items": [node("n")]})

    workload = Workload(odd)
    try:
        seen = await reconciler.observe(workload)
    finally:
        await workload.close()
    assert seen.nodes.count == 0
    assert seen.nodes.unreadable


def _one_list(items: Iterable[object]) -> observe.NodesObservation:
    """The observation as it was made of one whole list, before the Nodes were counted a
    page at a time: the reference ``NodesTally`` must agree with."""
    talos: dict[Any, str] = {}
    kubelet: dict[Any, str] = {}
    unreadable: list[str] = []
    not_ready: list[str] = []
    count = 0
    for item in items:
        count += 1
        obj = observe._mapping(item)
        if not observe._ready(obj):
            not_ready.append(observe._name(obj))
        found = observe.node_report(item)
        if found.talos is not None:
            talos.setdefault(found.talos, found.talos.tag)
        if found.kubelet is not None:
            kubelet.setdefault(found.kubelet, found.kubelet.tag)
        unreadable.extend(found.unreadable)
    if len(unreadable) > observe.MAX_NAMED:
        rest = len(unreadable) - observe.MAX_NAMED
        unreadable[observe.MAX_NAMED :] = [
            f"and {rest:,} more versions of Nodes that cannot be read"
        ]
    if len(not_ready) > observe.MAX_NAMED:
        not_ready[observe.MAX_NAMED :] = [f"{len(not_ready) - observe.MAX_NAMED:,} more"]
    return observe.NodesObservation(
        count=count,
        talos_versions=tuple(talos[v] for v in sorted(talos)),
        kubernetes_versions=tuple(kubelet[v] for v in sorted(kubelet)),
        unreadable=tuple(unreadable),
        not_ready=tuple(not_ready),
    )


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(st.one_of(fuzzed_nodes, st.builds(node, st.text(max_size=8))), max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=4),
)
def test_counting_page_by_page_is_the_observation_of_the_whole_list(
    items: list[Any], cuts: list[int]
) -> None:
    tally = observe.NodesTally()
    edges = [0, *sorted(min(c, len(items)) for c in cuts), len(items)]
    for start, end in itertools.pairwise(edges):
        for item in items[start:end]:
            tally.add(item)
    assert tally.observation() == _one_list(items) == observe.nodes_observation(items)
