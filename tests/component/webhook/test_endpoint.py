"""The HTTPS endpoint on loopback, without an API server: TLS, paths and odd bodies."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ichor.testing import certs, controlplane
from ichor.webhook import server

pytestmark = pytest.mark.component

REVIEW: dict[str, Any] = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u-7",
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


async def refuse_everything(request: Any, **kwargs: Any) -> Any:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": request["request"]["uid"],
            "allowed": False,
            "status": {"code": 403, "message": f"refused at {kwargs['webhook']}"},
        },
    }


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [
        ("taloscluster", json.dumps(REVIEW).encode(), "refused at taloscluster"),
        ("talosoperation", json.dumps(REVIEW).encode(), "refused at talosoperation"),
        ("elsewhere", json.dumps(REVIEW).encode(), "no handler at /elsewhere"),
        ("taloscluster", b"\xff\xfe not json", "not JSON"),
        ("taloscluster", b'{"kind": "AdmissionReview"}', "expected apiVersion"),
    ],
    ids=["cluster-path", "operation-path", "unknown-path", "binary-body", "wrong-shape"],
)
async def test_every_request_over_tls_gets_a_review(
    tmp_path: Path, path: str, body: bytes, words: str
) -> None:
    files = certs.write_serving_certificate(tmp_path)
    endpoint = server.AdmissionServer(
        port=controlplane.free_port(), certfile=files.cert, pkeyfile=files.key, cafile=files.ca
    )
    context = ssl.create_default_context(cafile=str(files.ca))
    configs = endpoint(refuse_everything)
    try:
        config = await anext(configs)
        assert config.get("url") == endpoint.url
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{endpoint.url}/{path}", data=body, ssl=context) as response,
        ):
            assert response.status == 200
            answer = await response.json()
    finally:
        await configs.aclose()
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["allowed"] is False
    assert words in answer["response"]["status"]["message"]
