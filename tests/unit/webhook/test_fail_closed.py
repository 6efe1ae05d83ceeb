"""Fail closed through kopf itself: every review the endpoint hands to kopf is judged by an
Ichor handler, or denied.

kopf allows a review for which it finds no handler. ``intake`` keeps unclaimed reviews
from kopf, but kopf matches handlers by its own comparisons (a handler's subresource
None against the review's ``""``), so a review intake thinks claimed can still find no
handler in kopf. These tests dispatch through kopf's own admission function with the
webhook's real handlers (``realkopf``): an answer no Ichor handler gave is a denial,
whatever kopf says.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ichor.api import kinds
from ichor.webhook import intake, server
from tests.unit.webhook.realkopf import real_kopf

#: Talos v1.14.3 does not run Kubernetes v1.31.0: every build refuses this pair.
INCOMPATIBLE = {
    "talosVersion": "v1.14.3",
    "kubernetesVersion": "v1.31.0",
    "versionContract": "v1.14",
}
COMPATIBLE = {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"}


def cluster_review(
    spec: dict[str, Any], *, operation: str = "CREATE", user: str = "nadia", **extra: Any
) -> dict[str, Any]:
    obj = {
        "apiVersion": kinds.API_VERSION,
        "kind": "TalosCluster",
        "metadata": {"name": "prod", "namespace": "team-a", "uid": "c0ffee00-0000-4000-8000-1"},
        "spec": spec,
    }
    request: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": kinds.GROUP, "version": kinds.VERSION, "kind": "TalosCluster"},
        "resource": {"group": kinds.GROUP, "version": kinds.VERSION, "resource": "talosclusters"},
        "operation": operation,
        "userInfo": {"username": user},
        "object": obj,
        "dryRun": True,
        **extra,
    }
    if operation == "UPDATE":
        request["oldObject"] = json.loads(json.dumps(obj))
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def ask(review: dict[str, Any], path: str = intake.CLUSTER_HANDLER) -> dict[str, Any]:
    kopf = real_kopf()
    return await server.respond(kopf.fn, payload=json.dumps(review).encode(), webhook=path)


async def test_an_incompatible_pair_is_refused_through_kopf() -> None:
    answer = await ask(cluster_review(INCOMPATIBLE))
    assert answer["response"]["allowed"] is False
    assert "v1.31.0" in answer["response"]["status"]["message"]


async def test_a_compatible_pair_is_admitted_through_kopf() -> None:
    answer = await ask(cluster_review(COMPATIBLE))
    assert answer["response"]["allowed"] is True


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
async def test_an_empty_subresource_does_not_slip_past_the_handlers(operation: str) -> None:
    """``"subResource": ""`` is no subresource to intake, but kopf compares its handler's
    None with "" and finds none: it would allow the incompatible pair."""
    answer = await ask(cluster_review(INCOMPATIBLE, operation=operation, subResource=""))
    body = answer["response"]
    assert body["allowed"] is False, body
    assert body["status"]["message"].strip()


@pytest.mark.parametrize("path", [intake.CLUSTER_STAMP, intake.CLUSTER_HANDLER])
async def test_an_empty_subresource_is_refused_at_every_path(path: str) -> None:
    answer = await ask(cluster_review(COMPATIBLE, subResource=""), path)
    assert answer["response"]["allowed"] is False


async def test_an_allowed_answer_no_ichor_handler_gave_is_a_denial() -> None:
    """Whatever kopf's matching does in a later version: an ``allowed: true`` that no
    handler of the path gave is refused (kopf with no handler for the review)."""

    async def kopf_without_a_handler(request: Any, **_: Any) -> Any:
        return {"response": {"uid": request["request"]["uid"], "allowed": True}}

    answer = await server.respond(
        kopf_without_a_handler,
        payload=json.dumps(cluster_review(COMPATIBLE)).encode(),
        webhook=intake.CLUSTER_HANDLER,
    )
    body = answer["response"]
    assert body["allowed"] is False
    assert "no handler of the ichor admission webhook judged" in body["status"]["message"]
    assert body["status"]["code"] == 403


async def test_an_answer_another_paths_handler_gave_is_a_denial() -> None:
    """The handler of /talosoperation judging a review sent to /taloscluster is not the
    judgement that path gives."""

    async def kopf_picking_another_handler(request: Any, **_: Any) -> Any:
        intake.judged(intake.OPERATION_HANDLER)
        return {"response": {"uid": request["request"]["uid"], "allowed": True}}

    answer = await server.respond(
        kopf_picking_another_handler,
        payload=json.dumps(cluster_review(COMPATIBLE)).encode(),
        webhook=intake.CLUSTER_HANDLER,
    )
    assert answer["response"]["allowed"] is False


async def test_a_mark_outside_a_review_counts_for_nothing() -> None:
    intake.judged(intake.CLUSTER_HANDLER)  # no review is being answered: ignored

    async def kopf_without_a_handler(request: Any, **_: Any) -> Any:
        return {"response": {"uid": request["request"]["uid"], "allowed": True}}

    answer = await server.respond(
        kopf_without_a_handler,
        payload=json.dumps(cluster_review(COMPATIBLE)).encode(),
        webhook=intake.CLUSTER_HANDLER,
    )
    assert answer["response"]["allowed"] is False


async def test_the_mutating_half_still_writes_the_records_through_kopf() -> None:
    """kopf gets a copy of the review with a constant object uid (``intake.for_kopf``):
    its JSONPatch of the records is the same, and the object's own uid is not touched."""
    import base64

    from ichor.api import records

    review = cluster_review(INCOMPATIBLE, user="olivia")  # olivia holds the verb
    sent = json.dumps(review).encode()
    answer = await ask(review, intake.CLUSTER_STAMP)
    body = answer["response"]
    assert body["allowed"] is True
    assert body["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(body["patch"]))
    assert [(op["op"], op["path"]) for op in patch] == [("add", "/metadata/annotations")]
    (record,) = records.read(patch[0]["value"])
    assert (record.kind, record.user) == (records.RecordKind.OVERRIDE, "olivia")
    assert json.loads(sent) == review  # the review itself was not changed


@pytest.mark.parametrize("key", ["object", "oldObject"])
@pytest.mark.parametrize("field", ["metadata", "spec"])
async def test_a_null_part_of_an_object_is_a_form_refusal_not_a_retry(key: str, field: str) -> None:
    """JSON null where an object's metadata (or spec) stands: ``body.get("metadata", {})``
    gives None, so the review raised on its way to a handler and was answered 503 "retry
    the write" (the endpoint fuzz found ``"metadata": null``). Such a review is malformed:
    a denial that says so, never a retry hint and never an allow. (A null status is no
    status: what the operator has not written yet.)"""
    review = cluster_review(INCOMPATIBLE, operation="UPDATE")
    review["request"][key][field] = None
    answer = await ask(review)
    assert answer["response"]["allowed"] is False
    status = answer["response"]["status"]
    assert status["code"] != 503, status
    assert "retry" not in status["message"], status
