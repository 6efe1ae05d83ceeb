"""The endpoint's answer protocol, without a server."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from ichor.webhook import intake, server

GOOD_REVIEW: dict[str, Any] = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u-1",
        "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
        "resource": {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"},
        "operation": "CREATE",
        "userInfo": {"username": "alice"},
        "object": {
            "apiVersion": "ichor.dev/v1alpha1",
            "kind": "TalosCluster",
            "metadata": {"name": "prod"},
        },
    },
}


async def allow(request: Any, *, webhook: str | None = None, **_: Any) -> Any:
    """kopf with a handler of the path that allows (it marks its path, as they do)."""
    intake.judged(webhook or "")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": request["request"]["uid"], "allowed": True},
    }


async def explode(request: Any, **_: Any) -> Any:
    raise KeyError("request")


def without(key: str) -> dict[str, Any]:
    review: dict[str, Any] = json.loads(json.dumps(GOOD_REVIEW))
    del review["request"][key]
    return review


@pytest.mark.parametrize(
    ("payload", "webhook", "fn", "uid", "words"),
    [
        (b"{not json", "taloscluster", allow, "", "not JSON"),
        (b"[1, 2]", "taloscluster", allow, "", "not a JSON object"),
        (json.dumps(without("userInfo")).encode(), "taloscluster", allow, "u-1", "userInfo"),
        (json.dumps(without("resource")).encode(), "taloscluster", allow, "u-1", "resource"),
        (json.dumps(without("object")).encode(), "taloscluster", allow, "u-1", "object"),
        (
            json.dumps(GOOD_REVIEW).encode(),
            "nothing-here",
            allow,
            "u-1",
            "no handler at /nothing-here",
        ),
        (json.dumps(GOOD_REVIEW).encode(), "taloscluster", explode, "u-1", "could not decide"),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "no-userinfo",
        "no-resource",
        "no-object",
        "unknown-path",
        "exception-in-kopf",
    ],
)
async def test_a_request_the_webhook_cannot_serve_is_denied_with_a_reason(
    payload: bytes, webhook: str, fn: Any, uid: str, words: str
) -> None:
    answer = await server.respond(fn, payload=payload, webhook=webhook)
    assert answer["response"]["allowed"] is False
    assert answer["response"]["uid"] == uid
    assert words in answer["response"]["status"]["message"]


async def test_a_good_review_is_handed_to_kopf() -> None:
    answer = await server.respond(
        allow, payload=json.dumps(GOOD_REVIEW).encode(), webhook="taloscluster"
    )
    assert answer["response"] == {"uid": "u-1", "allowed": True}


def test_a_refusal_is_logged_as_an_answer_not_an_error() -> None:
    record = logging.LogRecord(
        "kopf.objects", logging.ERROR, __file__, 1,
        "Webhook 'taloscluster' failed permanently: Talos v1.15.0 is refused", None, None,
    )  # fmt: skip
    other = logging.LogRecord(
        "kopf.objects", logging.ERROR, __file__, 1, "Handler 'x' failed permanently", None, None
    )
    quiet = server.RefusalsAreAnswers()
    assert quiet.filter(record)
    assert quiet.filter(other)
    assert record.levelno == logging.INFO
    assert other.levelno == logging.ERROR
