"""What reaches kopf: only reviews a claim covers, read within the limits (no server).

kopf *allows* a review for which it finds no handler, so every review no claim covers
must be denied before kopf; these tests hand the server a kopf stand-in that allows
everything and records what it was given.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ichor.api import kinds
from ichor.webhook import intake, server

CLUSTER = kinds.Kind.TALOS_CLUSTER
OPERATION = kinds.Kind.TALOS_OPERATION


def review(
    kind: kinds.Kind = CLUSTER,
    *,
    operation: str = "CREATE",
    sub: str | None = None,
    group: str = kinds.GROUP,
    version: str = kinds.VERSION,
    gvk: str | None = None,
    uid: str = "u-1",
    obj: dict[str, Any] | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": gvk or kind.value},
        "resource": {"group": group, "version": version, "resource": kinds.PLURALS[kind].value},
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:masters"]},
        "object": obj
        if obj is not None
        else {"apiVersion": kinds.API_VERSION, "kind": kind.value, "metadata": {"name": "prod"}},
    }
    if operation == "UPDATE":
        request["oldObject"] = request["object"]
    if sub is not None:
        request["subResource"] = sub
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class Kopf:
    """Allows everything, as kopf with a handler of the path that allows; records each
    review. The handler marks its path as the webhook's handlers do (``intake.judged``):
    an allowed answer without the mark is refused (``test_fail_closed``)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def __call__(self, request: Any, *, webhook: str | None = None, **_: Any) -> Any:
        self.seen.append((webhook or "", request))
        intake.judged(webhook or "")
        return {"response": {"uid": request["request"]["uid"], "allowed": True}}


async def answer(body: Any, path: str) -> tuple[dict[str, Any], Kopf]:
    kopf = Kopf()
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await server.respond(kopf, payload=payload, webhook=path), kopf


def denied(result: dict[str, Any]) -> str:
    body = result["response"]
    assert body["allowed"] is False, body
    message: str = body["status"]["message"]
    assert message.strip()
    return message


@pytest.mark.parametrize(
    ("body", "path", "words"),
    [
        (review(CLUSTER), "talosoperation", "not talosclusters.ichor.dev"),
        (review(OPERATION), "taloscluster", "not talosoperations.ichor.dev"),
        (review(CLUSTER, operation="DELETE"), "taloscluster", "not DELETE"),
        (review(CLUSTER, operation="CONNECT"), "taloscluster", "not CONNECT"),
        # an operation's UPDATE is judged (its stamp must not change); DELETE is not
        (review(OPERATION, operation="DELETE"), "talosoperation", "not DELETE"),
        (review(CLUSTER, sub="scale"), "taloscluster", "scale subresource"),
        (review(OPERATION, sub="status"), "taloscluster", "not talosoperations"),
        (review(CLUSTER, group="apps"), "taloscluster", "not talosclusters.apps"),
        (review(CLUSTER, version="v1"), "taloscluster", "not talosclusters.ichor.dev/v1"),
        (review(CLUSTER, gvk="TalosOperation"), "taloscluster", "not kind TalosOperation"),
        (
            review(CLUSTER, obj={"apiVersion": "v1", "kind": "Secret", "metadata": {}}),
            "taloscluster",
            "request.object is not a ichor.dev/v1alpha1 TalosCluster",
        ),
        (review(CLUSTER), "", "no handler at /"),
        (review(CLUSTER), "taloscluster/extra", "no handler at /taloscluster/extra"),
    ],
    ids=[
        "cluster-at-operation-path",
        "operation-at-cluster-path",
        "delete",
        "connect",
        "operation-delete",
        "scale-subresource",
        "operation-status-at-cluster-path",
        "other-group",
        "other-version",
        "kind-differs-from-resource",
        "object-of-another-kind",
        "root-path",
        "path-below-a-handler",
    ],
)
async def test_a_review_no_claim_covers_is_denied_before_kopf(
    body: dict[str, Any], path: str, words: str
) -> None:
    result, kopf = await answer(body, path)
    assert words in denied(result)
    assert result["response"]["uid"] == "u-1"
    assert kopf.seen == []


#: Every (claim, subresource) pair a claim does not name (status is claimed by the
#: status paths only).
UNCLAIMED = [
    pytest.param(claim, sub, id=f"{claim.path}-{sub[:12]}")
    for claim in intake.CLAIMS
    for sub in ("status", "scale", "finalize", "x" * 300)
    if sub not in claim.subresources
]


@pytest.mark.parametrize(("claim", "sub"), UNCLAIMED)
async def test_every_subresource_a_claim_does_not_name_is_denied(
    claim: intake.Claim, sub: str
) -> None:
    operation = sorted(claim.operations)[0]
    result, kopf = await answer(review(claim.kind, operation=operation, sub=sub), claim.path)
    assert "subresource" in denied(result)
    assert len(result["response"]["status"]["message"]) <= intake.MAX_MESSAGE
    assert kopf.seen == []


@pytest.mark.parametrize("claim", intake.CLAIMS, ids=lambda c: c.path)
async def test_every_claimed_review_is_handed_to_kopf(claim: intake.Claim) -> None:
    for operation in sorted(claim.operations):
        for sub in sorted(claim.subresources):
            result, kopf = await answer(
                review(claim.kind, operation=operation, sub=sub or None), claim.path
            )
            assert result["response"] == {"uid": "u-1", "allowed": True}
            assert [path for path, _ in kopf.seen] == [claim.path]


def nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def deep_review(depth: int) -> bytes:
    body = review(CLUSTER)
    text = json.dumps(body).encode()
    # the object's metadata carries the nesting: the shape stays that of a review
    return text.replace(b'"metadata": {"name": "prod"}', b'"metadata": ' + nested(depth))


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        (nested(5_000), "deeper than 64 levels"),
        (b"[" * 40_000, "deeper than 64 levels"),
        (deep_review(5_000), "deeper than 64 levels"),
        (deep_review(200), "deeper than 64 levels"),
        (b"[" + b"0," * 60_000 + b"0]", "more than 50,000 JSON values"),
        (b"\xff\xfe not json", "not JSON"),
    ],
    ids=["5000-deep", "40000-open-brackets", "5000-deep-review", "200-deep-review",
         "60000-values", "binary"],
)  # fmt: skip
async def test_a_body_python_cannot_parse_safely_is_a_denial_with_a_sentence(
    payload: bytes, words: str
) -> None:
    result, kopf = await answer(payload, "taloscluster")
    message = denied(result)
    assert words in message
    assert "nothing was changed" in message
    assert result["response"]["status"]["code"] == 400
    assert kopf.seen == []


async def test_a_body_over_the_cap_is_a_denial_not_a_413() -> None:
    payload = b'{"pad": "' + b"x" * intake.MAX_REVIEW_BYTES + b'"}'
    result, kopf = await answer(payload, "taloscluster")
    assert "more than the 8,388,608" in denied(result)
    assert kopf.seen == []


async def test_an_oversized_uid_is_not_echoed() -> None:
    uid = "u" * 10_000
    result, kopf = await answer(review(CLUSTER, uid=uid), "taloscluster")
    message = denied(result)
    assert result["response"]["uid"] == ""
    assert uid not in message
    assert "10,000 characters" in message
    assert len(json.dumps(result)) < 1_000
    assert kopf.seen == []


async def test_what_kopf_says_is_cut_to_a_short_answer_and_never_a_patch() -> None:
    async def chatty(request: Any, **_: Any) -> Any:
        return {
            "response": {
                "uid": "something else",
                "allowed": False,
                "status": {"code": 403, "message": "v" * 100_000},
                "warnings": ["w" * 10_000] * 100,
                "patch": "W10=",
                "patchType": "JSONPatch",
            }
        }

    result = await server.respond(
        chatty, payload=json.dumps(review()).encode(), webhook="taloscluster"
    )
    body = result["response"]
    assert body["uid"] == "u-1"
    assert len(body["status"]["message"]) <= intake.MAX_MESSAGE
    assert "cut" in body["status"]["message"]
    assert len(body["warnings"]) == intake.MAX_WARNINGS
    assert all(len(w) <= intake.MAX_WARNING for w in body["warnings"])
    assert "patch" not in body
    assert "patchType" not in body


def test_the_api_servers_uid_is_found_at_the_start_of_a_body_not_read() -> None:
    text = json.dumps(review(uid="705ab4f5-6393-11e8-b7cc-42010a800002")).encode()
    head = text[: intake.PEEK_BYTES]
    assert intake.peek_uid(head + b"x" * 10) == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert intake.peek_uid(b'{"request": {"uid": "' + b"u" * 500 + b'"}}') == ""


@pytest.mark.parametrize(
    "payload",
    [
        b'"' + b"a" * 100_000 + b'"',
        b'"' + b"a" * 100_000 + "\U0001f600".encode() + b'"',
        b"[" + b",".join([b"{}"] * 16_000) + b"]",
        b"{" + b",".join(b'"k%d":1' % i for i in range(10_000)) + b"}",
        b"[" + b",".join([b'"ab"'] * 16_000) + b"]",
    ],
    ids=["ascii-string", "astral-string", "empty-objects", "distinct-keys", "short-strings"],
)
def test_the_cost_covers_what_parsing_takes(payload: bytes) -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        copy = bytes(payload)  # the body as read
        data, problem = intake.parse(copy)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert problem is None
    assert data is not None
    assert peak <= intake.cost(payload) <= intake.cost_bound(len(payload))


@pytest.mark.parametrize("field", ["talosVersion", "kubernetesVersion", "versionContract"], ids=str)
async def test_a_version_past_pythons_digit_limit_is_a_form_refusal_not_a_retry(
    field: str,
) -> None:
    from ichor.webhook import judgement
    from tests.unit.webhook.fakes import FakeBackend, taloscluster, userinfo

    new = taloscluster()
    new["spec"][field] = "v1." + "9" * 10_000 + (".0" if field != "versionContract" else "")
    result = await judgement.cluster_answer(
        new=new,
        old=None,
        userinfo=userinfo(),
        operation="CREATE",
        dryrun=False,
        backend=FakeBackend(),
    )
    assert not result.allowed
    assert result.code == 403, result.message
    assert "retry" not in result.message
    assert "out of range" in result.message


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"object": [1, 2], "oldObject": {"metadata": {}}}, "request.object must be an object"),
        ({"object": {"metadata": ["x"]}}, "request.object.metadata must be an object"),
        ({"object": {"metadata": {"uid": ["x"]}}}, "request.object.metadata.uid must be a string"),
        ({"oldObject": {"metadata": {"name": 7}}}, "request.oldObject.metadata.name must be"),
        ({"object": None, "oldObject": None}, "both missing"),
    ],
    ids=["object-a-list", "metadata-a-list", "uid-a-list", "old-name-a-number", "no-objects"],
)
async def test_what_kopf_reads_before_a_handler_must_be_of_its_type(
    change: dict[str, Any], words: str
) -> None:
    """kopf keys its memory by metadata.uid and names its logs by name and namespace
    before any handler runs: another type there made kopf raise (a 503 "could not
    decide", found by the HTTPS fuzz), so it is refused as unreadable first."""
    body = review(CLUSTER)
    body["request"].update(change)
    result, kopf = await answer(body, "taloscluster")
    assert words in denied(result)
    assert result["response"]["status"]["code"] == 400
    assert kopf.seen == []


@pytest.mark.parametrize("key", ["object", "oldObject"])
@pytest.mark.parametrize("value", [[], ["a"], "prod", 7, True])
async def test_an_object_that_is_not_an_object_is_denied_before_kopf(
    key: str, value: object
) -> None:
    """kopf reads ``object`` and ``oldObject`` as mappings; any other value is refused
    here (with the other one a good object) instead of failing inside kopf."""
    body = review(CLUSTER, operation="UPDATE")
    body["request"][key] = value
    result, kopf = await answer(body, "taloscluster")
    assert f"request.{key} must be an object" in denied(result)
    assert kopf.seen == []
