"""The endpoint's guard and the fixed configuration, without a server."""

from __future__ import annotations

import asyncio
import base64
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


def test_the_configuration_fails_closed_within_five_seconds_for_our_group_only() -> None:
    config = server.render_configuration(url="https://127.0.0.1:9443/", ca_bundle=b"PEM")
    assert config["kind"] == "ValidatingWebhookConfiguration"
    hooks = {hook["name"]: hook for hook in config["webhooks"]}
    assert set(hooks) == {
        "taloscluster.ichor.dev",
        "talosoperation.ichor.dev",
        "taloscluster-status.ichor.dev",
        "talosoperation-status.ichor.dev",
        "ichorinstallation-status.ichor.dev",
        # the installation's update: the operator's marks and the unhalt request's record
        "ichorinstallation.ichor.dev",
    }
    installation = hooks["ichorinstallation.ichor.dev"]["rules"][0]
    # never its create: the chart makes it in the same release, before the webhook answers
    assert installation["operations"] == ["UPDATE"]
    assert (installation["resources"], installation["scope"]) == (["ichorinstallations"], "Cluster")
    # and only an update that carries an ichor.dev key (not the chart's own label updates)
    assert hooks["ichorinstallation.ichor.dev"]["matchConditions"] == [
        {"name": "ichor-dev-keys", "expression": intake.RESERVED_KEYS}
    ]
    assert all("matchConditions" not in h for n, h in hooks.items() if "installation." not in n)
    for hook in hooks.values():
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "NoneOnDryRun"
        assert hook["timeoutSeconds"] <= 5
        assert hook["admissionReviewVersions"] == ["v1"]
        assert all(rule["apiGroups"] == ["ichor.dev"] for rule in hook["rules"])
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == b"PEM"
    cluster, operation = hooks["taloscluster.ichor.dev"], hooks["talosoperation.ichor.dev"]
    assert cluster["clientConfig"]["url"] == "https://127.0.0.1:9443/taloscluster"
    assert cluster["rules"][0]["resources"] == ["talosclusters"]
    assert cluster["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert operation["rules"][0]["resources"] == ["talosoperations"]
    # UPDATE too: an operation's spec never changes, and its admission stamp must not either
    assert operation["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    # status is the operator's: every kind's status subresource, cluster-scoped one included
    for plural, scope in (
        ("talosclusters", "Namespaced"),
        ("talosoperations", "Namespaced"),
        ("ichorinstallations", "Cluster"),
    ):
        status = hooks[f"{plural[:-1]}-status.ichor.dev"]
        assert status["clientConfig"]["url"] == f"https://127.0.0.1:9443/{plural[:-1]}-status"
        assert status["rules"][0]["resources"] == [f"{plural}/status"]
        assert status["rules"][0]["operations"] == ["UPDATE"]
        assert status["rules"][0]["scope"] == scope


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


async def test_waiting_reviews_are_counted_in_the_budget_and_bounded() -> None:
    """While it waits, a review's connection buffers what arrives of its body: each
    waiting review counts ``wait_cost``, at most ``max_waiting`` wait, and one more is
    refused at once rather than buffered outside the budget."""
    import asyncio
    import time

    budget = server.Budget(total=100, reserved=0, small=0, max_waiting=2, wait_cost=5)
    async with budget.hold(80) as first:
        waiters = [asyncio.create_task(_hold(budget, 25, wait=2.0)) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert budget.waiting == 2
        assert budget.in_use + budget.waiting_bytes == 90
        started = time.monotonic()
        with pytest.raises(server.Full):
            async with budget.hold(20, wait=2.0):
                pass
        assert time.monotonic() - started < 0.5  # at once, not after waiting
        # a review that fits now is not held back by those that wait
        async with budget.hold(5, wait=0.05):
            assert budget.in_use + budget.waiting_bytes == 95
        await first.shrink(40)
        await asyncio.gather(*waiters)
    assert budget.in_use == 0
    assert budget.waiting == 0
    assert budget.peak_total >= 90


async def test_no_room_for_even_the_wait_is_refused_at_once() -> None:
    budget = server.Budget(total=100, reserved=0, small=0, max_waiting=8, wait_cost=30)
    async with budget.hold(80):
        with pytest.raises(server.Full):
            async with budget.hold(50, wait=2.0):
                pass


async def _hold(budget: server.Budget, cost: int, *, wait: float) -> None:
    async with budget.hold(cost, wait=wait):
        pass


class FakeConnection:
    def __init__(self, name: str) -> None:
        self.name = name
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


async def test_a_new_connection_takes_the_place_of_the_oldest_handshake() -> None:
    """Connections that never finish their TLS handshake cannot keep the API server out:
    beyond the places, one stalled in its handshake past the grace gives way, else the
    oldest waiting for a turn; only connections past their handshake refuse a new one.
    A burst of quick handshakes beyond the turns waits for one instead of being dropped
    (the API server opens a new connection for most reviews of a burst)."""
    now = [0.0]
    gate = server.Connections(limit=4, handshakes=2, grace=0.5, clock=lambda: now[0])
    made: dict[str, Any] = {n: FakeConnection(n) for n in "abcdefgh"}
    a, b, c, d, e, f, g, h = made.values()
    for early in (a, b, c, d):
        assert gate.admit(early)
    await gate.turn(a, within=1)
    await gate.turn(b, within=1)
    waiting_c = asyncio.create_task(gate.turn(c, within=5))
    waiting_d = asyncio.create_task(gate.turn(d, within=5))
    await asyncio.sleep(0)
    assert not waiting_c.done()  # two handshakes at most: c and d wait
    assert not waiting_d.done()
    assert not any(x.aborted for x in (a, b, c, d))  # nobody was dropped for a turn
    assert gate.admit(e)
    assert c.aborted  # four places, no handshake stalled yet: the oldest waiting gave way
    assert gate.dropped == 1
    with pytest.raises(asyncio.CancelledError):
        await waiting_c
    assert not gate.established(c)  # it lost its place
    now[0] = 1.0  # a and b have run their handshakes past the grace
    assert gate.established(b)  # b said hello after all: its turn goes to d, who waited
    await waiting_d
    assert gate.admit(f)
    assert a.aborted  # four places: the handshake stalled past the grace gave way
    assert gate.dropped == 2
    assert not gate.established(a)
    for later in (d, e, f):
        if later is not d:
            await gate.turn(later, within=1)
        assert gate.established(later)
    assert gate.open == 4
    assert not gate.admit(g)  # every place is past its handshake
    assert gate.refused == 1
    assert not g.aborted
    gate.release(b)
    assert gate.admit(g)
    assert gate.peak == 4
    assert not h.aborted


async def test_a_newcomer_takes_the_turn_of_a_handshake_stalled_past_the_grace() -> None:
    now = [0.0]
    gate = server.Connections(limit=8, handshakes=2, grace=0.5, clock=lambda: now[0])
    idle = [_fake(f"idle-{i}") for i in range(2)]
    for connection in idle:
        assert gate.admit(connection)
        await gate.turn(connection, within=1)
    quick = _fake("quick")
    assert gate.admit(quick)
    waiting = asyncio.create_task(gate.turn(quick, within=5))
    await asyncio.sleep(0)
    assert not waiting.done()  # within the grace the idle ones keep their turns
    waiting.cancel()
    gate.release(quick)
    now[0] = 0.6
    api_server = _fake("api-server")
    assert gate.admit(api_server)
    await gate.turn(api_server, within=0.01)  # at once: the oldest stalled one gave way
    assert idle[0].aborted
    assert not idle[1].aborted
    # a turn not given within the bound is a TimeoutError (the connection is dropped)
    held = server.Connections(limit=8, handshakes=1, grace=10, clock=lambda: 0.0)
    first, late = _fake("first"), _fake("late")
    for connection in (first, late):
        assert held.admit(connection)
    await held.turn(first, within=1)
    with pytest.raises(TimeoutError):
        await held.turn(late, within=0.05)
    assert held.established(first)


def _fake(name: str) -> Any:
    """A connection as ``Connections`` sees it: it can be aborted."""
    return FakeConnection(name)
