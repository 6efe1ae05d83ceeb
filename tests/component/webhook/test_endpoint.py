"""The HTTPS endpoint on loopback, without an API server: TLS, mutual TLS, paths, odd
bodies, bodies over the cap and methods other than POST."""

from __future__ import annotations

import asyncio
import io
import json
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ichor.webhook import intake, server
from tests.component.webhook import rawhttp
from tests.harness import certs, controlplane

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


OPERATION_REVIEW: dict[str, Any] = json.loads(
    json.dumps(REVIEW)
    .replace("TalosCluster", "TalosOperation")
    .replace("talosclusters", "talosoperations")
)


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
        ("talosoperation", json.dumps(OPERATION_REVIEW).encode(), "refused at talosoperation"),
        ("elsewhere", json.dumps(REVIEW).encode(), "no handler at /elsewhere"),
        ("taloscluster", b"\xff\xfe not json", "not JSON"),
        ("taloscluster", b'{"kind": "AdmissionReview"}', "expected apiVersion"),
        ("talosoperation", json.dumps(REVIEW).encode(), "not talosclusters.ichor.dev"),
        ("taloscluster", json.dumps(OPERATION_REVIEW).encode(), "not talosoperations.ichor.dev"),
        ("taloscluster", b'{"a":' * 5_000 + b"1" + b"}" * 5_000, "deeper than 64 levels"),
        (
            "taloscluster",
            b'{"request": {"uid": "u-9"}, "pad": "' + b"x" * intake.MAX_REVIEW_BYTES + b'"}',
            "more than the 8,388,608",
        ),
    ],
    ids=["cluster-path", "operation-path", "unknown-path", "binary-body", "wrong-shape",
         "cluster-review-at-operation-path", "operation-review-at-cluster-path",
         "5000-deep", "over-the-cap"],
)  # fmt: skip
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
            session.post(f"{endpoint.url}/{path}", data=io.BytesIO(body), ssl=context) as response,
        ):
            assert response.status == 200
            answer = await response.json()
    finally:
        await configs.aclose()
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["allowed"] is False
    assert words in answer["response"]["status"]["message"]


async def test_another_method_gets_a_review_too(tmp_path: Path) -> None:
    files = certs.write_serving_certificate(tmp_path)
    endpoint = server.AdmissionServer(
        port=controlplane.free_port(), certfile=files.cert, pkeyfile=files.key, cafile=files.ca
    )
    context = ssl.create_default_context(cafile=str(files.ca))
    configs = endpoint(refuse_everything)
    try:
        await anext(configs)
        async with aiohttp.ClientSession() as session:
            for method in ("GET", "PUT", "DELETE"):
                async with session.request(
                    method, f"{endpoint.url}/taloscluster", ssl=context
                ) as response:
                    assert response.status == 200
                    answer = await response.json()
                assert answer["response"]["allowed"] is False
                assert f"{method} is not POST" in answer["response"]["status"]["message"]
    finally:
        await configs.aclose()


class MutualTLS:
    """An endpoint that requires a client certificate signed by ``client``."""

    def __init__(self, tmp_path: Path, *, names: tuple[str, ...] = ()) -> None:
        self.files = certs.write_serving_certificate(tmp_path / "serving")
        self.client = certs.Authority.create("api-server-client-ca")
        self.client_ca = tmp_path / "client-ca.crt"
        self.client_ca.write_bytes(self.client.cert_pem)
        self.endpoint = server.AdmissionServer(
            port=controlplane.free_port(),
            certfile=self.files.cert,
            pkeyfile=self.files.key,
            cafile=self.files.ca,
            client_ca=self.client_ca,
            client_names=names,
        )
        self.tmp = tmp_path

    def context(self, signer: certs.Authority | None, *, name: str = "kube-apiserver") -> Any:
        context = ssl.create_default_context(cafile=str(self.files.ca))
        if signer is not None:
            pem = signer.issue_client(user=name)
            pem.write(cert_path=self.tmp / f"{name}.crt", key_path=self.tmp / f"{name}.key")
            context.load_cert_chain(self.tmp / f"{name}.crt", self.tmp / f"{name}.key")
        return context


async def _post(url: str, context: Any, body: bytes) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, ssl=context) as response,
    ):
        assert response.status == 200
        return await response.json()


async def test_with_mutual_tls_only_the_client_certificate_gets_a_review_read(
    tmp_path: Path,
) -> None:
    served = MutualTLS(tmp_path)
    seen: list[Any] = []

    async def recording(request: Any, **kwargs: Any) -> Any:
        seen.append(request)
        return await refuse_everything(request, **kwargs)

    configs = served.endpoint(recording)
    url = f"{served.endpoint.url}/taloscluster"
    body = json.dumps(REVIEW).encode()
    try:
        await anext(configs)
        stranger = certs.Authority.create("someone-else")
        for context in (served.context(None), served.context(stranger)):
            with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
                await _post(url, context, body)
        assert seen == []  # refused in the handshake: no review was read
        answer = await _post(url, served.context(served.client), body)
    finally:
        await configs.aclose()
    assert answer["response"]["status"]["message"] == "refused at taloscluster"
    assert len(seen) == 1


async def test_client_names_limit_the_certificates_the_ca_signed(tmp_path: Path) -> None:
    served = MutualTLS(tmp_path, names=("kube-apiserver",))
    configs = served.endpoint(refuse_everything)
    url = f"{served.endpoint.url}/taloscluster"
    try:
        await anext(configs)
        other = await _post(
            url, served.context(served.client, name="alice"), json.dumps(REVIEW).encode()
        )
        ours = await _post(url, served.context(served.client), json.dumps(REVIEW).encode())
    finally:
        await configs.aclose()
    assert other["response"]["allowed"] is False
    assert "'alice' is not one of kube-apiserver" in other["response"]["status"]["message"]
    assert other["response"]["uid"] == "u-7"
    assert ours["response"]["status"]["message"] == "refused at taloscluster"


async def test_a_body_that_does_not_arrive_is_denied_and_gives_its_room_back(
    tmp_path: Path,
) -> None:
    """A caller declares a large body and sends ten bytes: the room it holds in the budget
    is given back after ``READ_SECONDS``, with a denial, and others are answered meanwhile."""
    files = certs.write_serving_certificate(tmp_path)
    endpoint = server.AdmissionServer(
        port=controlplane.free_port(), certfile=files.cert, pkeyfile=files.key, cafile=files.ca
    )
    context = ssl.create_default_context(cafile=str(files.ca))
    configs = endpoint(refuse_everything)
    try:
        await anext(configs)
        head = b"POST /taloscluster HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000"
        slow = asyncio.create_task(
            rawhttp.exchange("127.0.0.1", endpoint.port, context=context, head=head, body=b"{" * 10)
        )
        await asyncio.sleep(0.5)
        assert endpoint.budget.in_use > 0
        started = time.monotonic()
        other = await _post(f"{endpoint.url}/taloscluster", context, json.dumps(REVIEW).encode())
        assert other["response"]["status"]["message"] == "refused at taloscluster"
        assert time.monotonic() - started < 2
        reply = await slow
    finally:
        await configs.aclose()
    answer = json.loads(reply.body)
    assert reply.status == 200
    assert answer["response"]["allowed"] is False
    assert "did not arrive within 5 s" in answer["response"]["status"]["message"]
    assert endpoint.budget.in_use == 0


async def test_an_idle_connection_is_closed_after_the_keep_alive_time(tmp_path: Path) -> None:
    """A caller past its handshake that sends nothing more holds one of the capped
    connection places: it keeps it for ``keepalive_seconds`` (above the API server's own
    90 s idle time, so the API server closes first and never sends on a closing
    connection), not for aiohttp's default hour."""
    assert server.KEEPALIVE_SECONDS > 90
    assert server.KEEPALIVE_SECONDS < 300
    files = certs.write_serving_certificate(tmp_path)
    endpoint = server.AdmissionServer(
        port=controlplane.free_port(),
        certfile=files.cert,
        pkeyfile=files.key,
        cafile=files.ca,
        keepalive_seconds=1.0,
    )
    context = ssl.create_default_context(cafile=str(files.ca))
    configs = endpoint(refuse_everything)
    try:
        await anext(configs)
        async with aiohttp.ClientSession() as session:
            async with session.post(
                f"{endpoint.url}/taloscluster", data=json.dumps(REVIEW).encode(), ssl=context
            ) as response:
                assert response.status == 200
                await response.read()
            assert endpoint.connections.open == 1  # kept alive for the next review
            for _ in range(100):  # at most 10 s
                if not endpoint.connections.open:
                    break
                await asyncio.sleep(0.1)
            assert endpoint.connections.open == 0
    finally:
        await configs.aclose()


async def test_a_burst_of_new_connections_from_the_api_server_is_answered(tmp_path: Path) -> None:
    """The API server keeps few idle connections per webhook host, so under concurrent
    writes it opens a new TLS connection for most reviews: a burst of 50 at once must all
    be answered. With a handshake cap below that, the oldest handshakes were dropped to
    make room, and the API server saw 'connection reset by peer' (a 500 for the write)."""
    files = certs.write_serving_certificate(tmp_path)
    endpoint = server.AdmissionServer(
        port=controlplane.free_port(), certfile=files.cert, pkeyfile=files.key, cafile=files.ca
    )
    context = ssl.create_default_context(cafile=str(files.ca))
    configs = endpoint(refuse_everything)
    body = json.dumps(REVIEW).encode()

    async def one() -> Any:
        # a connection of its own, like the API server's beyond its idle ones
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:
            return await _post_with(session, f"{endpoint.url}/taloscluster", context, body)

    try:
        await anext(configs)
        answers = await asyncio.gather(*(one() for _ in range(50)), return_exceptions=True)
    finally:
        await configs.aclose()
    failed = [a for a in answers if isinstance(a, BaseException)]
    assert failed == [], failed[:3]
    said = [a["response"]["status"]["message"] for a in answers if isinstance(a, dict)]
    assert said == ["refused at taloscluster"] * 50
    assert endpoint.connections.dropped == 0
    assert endpoint.connections.refused == 0


async def _post_with(session: aiohttp.ClientSession, url: str, context: Any, body: bytes) -> Any:
    async with session.post(url, data=body, ssl=context) as response:
        assert response.status == 200
        return await response.json()
