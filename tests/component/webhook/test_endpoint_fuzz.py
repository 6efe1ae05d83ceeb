"""The HTTPS endpoint fuzzed as the operator runs it: generated methods, paths, headers,
bodies and sizes, sent byte by byte over mutual TLS to kopf with the real handlers.

An escape is any answer that is not an HTTP 200 AdmissionReview (a plain-text error, a
closed connection, a timeout), a denial without a sentence or with an "internal error",
an answer that echoes more than a short uid, or an ``allowed: true`` for a review the
endpoint does not claim. A second oracle knows nothing of the endpoint's claims: a review
carrying a known-incompatible pair that nobody in it may override is never admitted,
whatever its envelope (``test_fuzz.refuses_the_pair``), and neither is a Kubernetes step
over a Cilium seen whose release cannot be read, though everyone in it holds the verb.
The count tried and the escapes (0) are printed at the end of ``make test``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ichor.webhook import handlers, intake
from tests.component.webhook import harness, rawhttp
from tests.fixtures.fuzzing import figure, tally
from tests.harness import certs, controlplane
from tests.support import operator as support
from tests.unit.webhook.fakes import FakeBackend
from tests.unit.webhook.test_fuzz import (
    EVERYONE,
    PATHS,
    clusters,
    envelopes,
    json_values,
    operations,
    refuses_the_pair,
    unreadable_envelope,
    userinfos,
)

pytestmark = pytest.mark.component

FUZZ = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: The most an answer may hold: a denial's sentence and a short uid, never the body.
ANSWER_LIMIT = 8192


class Endpoint:
    """kopf with the webhook's handlers on a port of its own, against an in-memory API."""

    def __init__(self, plane: controlplane.ControlPlane, workdir: Path) -> None:
        self.plane = plane
        self.files = certs.write_serving_certificate(workdir / "tls")
        self.port = controlplane.free_port()
        registry, settings_, _ = harness.build(
            harness.Credentials.admin(plane), port=self.port, files=self.files
        )
        self.backend = FakeBackend(holders={"alice"})
        self.kopf = support.KopfThread(
            registry,
            settings=settings_,
            memo=kopf.Memo({handlers.BACKEND: self.backend}),
            name="ichor-endpoint-fuzz",
        )
        self.context = plane.webhook_caller_context(serving_ca=self.files.ca)


@pytest.fixture(scope="module")
def endpoint(
    control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Endpoint]:
    running = Endpoint(control_plane, tmp_path_factory.mktemp("endpoint-fuzz"))
    harness.install_crds(control_plane)
    running.kopf.start()
    try:
        running.kopf.wait_ready()
        asyncio.run(_until_judged(running))
        yield running
    finally:
        running.kopf.stop()
        figure(
            "webhook endpoint fuzz: answers "
            + ", ".join(f"{key} {count}" for key, count in sorted(OUTCOMES.items()))
            + "".join(f"; 503: {m[:160]}" for m in SERVICE_UNAVAILABLE[:3])
        )


async def _until_judged(endpoint: Endpoint) -> None:
    """Until a compatible create reaches the handlers and is allowed (kopf knows the
    kinds once it has seen the CRDs)."""
    good = _request("TalosCluster", _GOOD, operation="CREATE", sub=None, uid="u-ready")
    body = json.dumps(good).encode()
    head = _head("POST", "/taloscluster", [], len(body))
    last: object = None
    for _ in range(300):
        try:
            reply = await rawhttp.exchange(
                "127.0.0.1", endpoint.port, context=endpoint.context, head=head, body=body,
                seconds=2,
            )  # fmt: skip
            last = reply.body
            if json.loads(reply.body)["response"]["allowed"] is True:
                return
        except rawhttp.NoReply as error:
            last = error
            if not endpoint.kopf.alive:
                raise AssertionError(f"kopf stopped: {endpoint.kopf.errors!r}") from None
        await asyncio.sleep(0.1)
    raise AssertionError(f"the handlers did not answer within 30 s: {last!r}")


_GOOD = {
    "metadata": {"name": "prod", "namespace": "team-a"},
    "spec": {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"},
}


def _request(kind: str, obj: Any, *, operation: Any, sub: Any, uid: Any) -> dict[str, Any]:
    plural = {"TalosCluster": "talosclusters", "TalosOperation": "talosoperations"}[kind]
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": kind},
        "resource": {"group": "ichor.dev", "version": "v1alpha1", "resource": plural},
        "operation": operation,
        "userInfo": {"username": "alice"},
        "object": dict(obj, apiVersion="ichor.dev/v1alpha1", kind=kind)
        if isinstance(obj, dict)
        else obj,
        "dryRun": True,
    }
    if sub is not None:
        request["subResource"] = sub
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


uids = st.one_of(st.uuids().map(str), st.sampled_from(["", "u" * 129, "u-1"]), json_values)
reviews = st.builds(
    _request,
    st.sampled_from(["TalosCluster", "TalosOperation"]),
    st.one_of(clusters, operations),
    operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
    sub=st.one_of(st.none(), st.sampled_from(["", "status", "scale"]), json_values),
    uid=uids,
).flatmap(
    lambda r: st.one_of(
        st.just(r),
        # the userInfo of the generator's own, as the unit fuzz draws it
        userinfos.map(lambda u: {**r, "request": {**r["request"], "userInfo": u}}),
    )
)
VERSIONS = ["v1.14.3", "v1.14.4", "v1.13.2", "v1.15.0", "v1.36.6", "v1.36.7", "v1.37.1",
            "v1.31.9", "v1.14", "v1." + "9" * 5_000 + ".0"]  # fmt: skip
good_clusters = st.builds(
    lambda talos, kubernetes, contract, cilium: {
        "metadata": {"name": "prod", "namespace": "team-a", "uid": "uid-1"},
        "spec": {"talosVersion": talos, "kubernetesVersion": kubernetes,
                 "versionContract": contract},
        **({"status": {"cni": {"detected": "cilium", "detectedVersion": cilium}}}
           if cilium else {}),
    },
    st.sampled_from(VERSIONS), st.sampled_from(VERSIONS),
    st.sampled_from(["v1.14", "v1.13", "v1.15"]), st.sampled_from([None, "1.19.10", "1.20.4"]),
)  # fmt: skip
claimed = st.builds(
    lambda new, old, user, dry: {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
            "resource": {"group": "ichor.dev", "version": "v1alpha1",
                         "resource": "talosclusters"},
            "operation": "UPDATE" if old is not None else "CREATE",
            "userInfo": {"username": user},
            "object": {"apiVersion": "ichor.dev/v1alpha1", "kind": "TalosCluster", **new},
            **({"oldObject": {"apiVersion": "ichor.dev/v1alpha1", "kind": "TalosCluster", **old}}
               if old is not None else {}),
            "dryRun": dry,
        },
    },
    good_clusters, st.one_of(st.none(), good_clusters), st.sampled_from(["alice", "bob"]),
    st.booleans(),
)  # fmt: skip
SIZES = [0, 1, 4096, 2**20, intake.MAX_REVIEW_BYTES - 1, intake.MAX_REVIEW_BYTES + 1]
bodies = st.one_of(
    claimed.map(lambda r: json.dumps(r).encode()),
    claimed.map(lambda r: json.dumps(r).encode()),
    reviews.map(lambda r: json.dumps(r).encode()),
    reviews.map(lambda r: json.dumps(r).encode()),
    st.binary(max_size=256),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1, max_value=3_000).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from(SIZES).map(lambda n: b'{"pad": "' + b"x" * n + b'"}'),
)
token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=20)
header_values = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=200
).map(str.strip)
headers = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["Content-Type", "Accept", "User-Agent", "X-Forwarded-For",
                                   "Authorization", "Expect-Nothing"]), header_values),
        st.tuples(token, header_values),
        st.just(("Content-Type", "application/json")),
    ),
    max_size=6,
)  # fmt: skip
paths = st.one_of(
    st.just("/taloscluster"),
    st.sampled_from(["/taloscluster", "/talosoperation", "/", "/taloscluster/x", "/%2e%2e/x"]),
    # the mutating halves and the status paths: each judges only its own reviews
    st.sampled_from([f"/{claim.path}" for claim in intake.CLAIMS if claim.path.endswith(
        ("-records", "-status"))]),
    token.map(lambda t: f"/{t}"),
)  # fmt: skip
#: Content-Length, or chunked transfer encoding (no length known before reading). A
#: length that differs from the body is a framing error aiohttp's parser answers.
framings = st.sampled_from(["length", "length", "length", "chunked"])


#: A header repeated, or one that frames the message, is left out: aiohttp's parser
#: answers a duplicate Content-Type or User-Agent with a plain 400 before any handler
#: (HTTP framing, not a review; the API server never sends one).
FRAMING = {"host", "content-length", "transfer-encoding", "connection", "expect", "upgrade"}


def _head(method: str, path: str, pairs: list[tuple[str, str]], length: int | None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    seen: set[str] = set()
    for name, value in pairs:
        key = name.lower()
        if key in seen or key in FRAMING:
            continue
        seen.add(key)
        lines.append(f"{name}: {value}")
    if length is None:
        lines.append("Transfer-Encoding: chunked")
    else:
        lines.append(f"Content-Length: {length}")
    return "\r\n".join(lines).encode("latin-1")


OUTCOMES: dict[str, int] = {}
SERVICE_UNAVAILABLE: list[str] = []


def _check(reply: rawhttp.Reply, *, path: str, sent: bytes, read_whole: bool) -> None:
    assert reply.status == 200, (reply.status, reply.body[:300])
    assert len(reply.body) <= ANSWER_LIMIT, len(reply.body)
    answer = json.loads(reply.body)
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    body = answer["response"]
    assert isinstance(body["allowed"], bool)
    uid = body["uid"]
    assert isinstance(uid, str)
    assert len(uid) <= intake.MAX_UID
    try:
        request = json.loads(sent).get("request")
    except (ValueError, RecursionError, AttributeError):
        request = None
    asked = request.get("uid") if isinstance(request, dict) else None
    assert uid in ("", asked), (uid, asked)  # the request's own uid, or none
    key = "allowed" if body["allowed"] else f"denied {body['status']['code']}"
    if key == "denied 503":
        SERVICE_UNAVAILABLE.append(body["status"]["message"])
    OUTCOMES[key] = OUTCOMES.get(key, 0) + 1
    if body["allowed"]:
        # allowed only a review a claim covers, read whole
        assert read_whole
        data, problem = intake.parse(sent)
        assert problem is None
        assert intake.admissible(data, path=path.lstrip("/")) is None
    else:
        message = body["status"]["message"]
        assert isinstance(message, str)
        assert message.strip()
        assert len(message) <= intake.MAX_MESSAGE
        assert "internal error" not in message
        # the in-memory API never fails: a 503 would be kopf or a handler breaking on
        # the input (only the budget, "busy", may answer 503 here)
        assert "could not decide" not in message, message
        assert "Traceback" not in message
        assert 400 <= body["status"]["code"] <= 599


@FUZZ
@given(
    method=st.sampled_from(["POST"] * 6 + ["GET", "PUT", "PATCH", "DELETE"]),
    path=paths,
    pairs=headers,
    body=bodies,
    framing=framings,
)
def test_every_request_gets_a_review_and_nothing_unclaimed_is_allowed(
    endpoint: Endpoint,
    method: str,
    path: str,
    pairs: list[tuple[str, str]],
    body: bytes,
    framing: str,
) -> None:
    with tally("webhook endpoint over mutual TLS (methods, paths, headers, bodies, sizes)"):
        if framing == "chunked":
            head, wire = _head(method, path, pairs, None), rawhttp.chunked(body)
        else:
            head, wire = _head(method, path, pairs, len(body)), body
        reply = asyncio.run(
            rawhttp.exchange("127.0.0.1", endpoint.port, context=endpoint.context,
                             head=head, body=wire, seconds=60)
        )  # fmt: skip
        _check(reply, path=path, sent=body, read_whole=method == "POST")


@settings(FUZZ, max_examples=300)
@given(review=envelopes, path=st.sampled_from(PATHS), framing=framings)
def test_an_incompatible_pair_is_refused_whatever_the_envelope(
    endpoint: Endpoint, review: dict[str, Any], path: str, framing: str
) -> None:
    with tally("webhook endpoint: incompatible pair in generated envelopes (escapes: admitted)"):
        body = json.dumps(review).encode()
        if framing == "chunked":
            head, wire = _head("POST", f"/{path}", [], None), rawhttp.chunked(body)
        else:
            head, wire = _head("POST", f"/{path}", [], len(body)), body
        reply = asyncio.run(
            rawhttp.exchange("127.0.0.1", endpoint.port, context=endpoint.context,
                             head=head, body=wire, seconds=60)
        )  # fmt: skip
        assert reply.status == 200, (reply.status, reply.body[:300])
        refuses_the_pair(path, review, json.loads(reply.body)["response"])


@settings(FUZZ, max_examples=200)
@given(review=envelopes.map(unreadable_envelope), path=st.sampled_from(PATHS), framing=framings)
def test_an_unreadable_cilium_is_refused_whatever_the_envelope_and_whoever_holds_the_verb(
    endpoint: Endpoint, review: dict[str, Any], path: str, framing: str
) -> None:
    holders = endpoint.backend.holders
    endpoint.backend.holders = set(EVERYONE)
    try:
        with tally(
            "webhook endpoint: unreadable Cilium in generated envelopes (escapes: admitted)"
        ):
            body = json.dumps(review).encode()
            if framing == "chunked":
                head, wire = _head("POST", f"/{path}", [], None), rawhttp.chunked(body)
            else:
                head, wire = _head("POST", f"/{path}", [], len(body)), body
            reply = asyncio.run(
                rawhttp.exchange("127.0.0.1", endpoint.port, context=endpoint.context,
                                 head=head, body=wire, seconds=60)
            )  # fmt: skip
            assert reply.status == 200, (reply.status, reply.body[:300])
            refuses_the_pair(path, review, json.loads(reply.body)["response"])
    finally:
        endpoint.backend.holders = holders
