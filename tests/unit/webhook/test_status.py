"""Writes of the status subresource: the operator's own pass, anyone else's are refused."""

from __future__ import annotations

import pytest

from ichor.api import kinds
from ichor.webhook import decisions, intake, judgement
from ichor.webhook.reviews import Requester
from tests.unit.webhook.fakes import FakeBackend, taloscluster, userinfo

OPERATOR = "system:serviceaccount:ichor-system:ichor"


def test_only_the_operators_username_writes_status() -> None:
    own = decisions.answer_status(
        kind="TalosCluster", namespace="team-a", name="prod",
        requester=Requester(OPERATOR), operator=OPERATOR,
    )  # fmt: skip
    assert own.allowed
    for other in ("nadia", "system:admin", OPERATOR + "x", "system:serviceaccount:ichor-system"):
        answer = decisions.answer_status(
            kind="TalosCluster", namespace="team-a", name="prod",
            requester=Requester(other, groups=("system:masters",)), operator=OPERATOR,
        )  # fmt: skip
        assert not answer.allowed, other
        assert answer.code == 403
        assert f"user {other!r}" in answer.message
        assert "TalosCluster team-a/prod" in answer.message
        assert OPERATOR in answer.message


@pytest.mark.parametrize("kind", list(intake.STATUS_HANDLERS))
async def test_the_handler_asks_who_the_operator_is(kind: kinds.Kind) -> None:
    backend = FakeBackend(operator="op")
    body = taloscluster()
    mine = await judgement.status_answer(
        kind=kind, new=body, old=body, userinfo=userinfo("op"), operation="UPDATE", backend=backend
    )
    theirs = await judgement.status_answer(
        kind=kind, new=body, old=body, userinfo=userinfo(), operation="UPDATE", backend=backend
    )
    assert mine.allowed
    assert not theirs.allowed
    assert kind.value in theirs.message


async def test_an_unknown_identity_is_undecided_never_allowed() -> None:
    body = taloscluster()
    answer = await judgement.status_answer(
        kind=kinds.Kind.TALOS_CLUSTER, new=body, old=body, userinfo=userinfo(),
        operation="UPDATE", backend=FakeBackend(fail=True),
    )  # fmt: skip
    assert not answer.allowed
    assert answer.code == 503


@pytest.mark.parametrize(
    ("operation", "info", "body"),
    [
        ("CREATE", userinfo(), taloscluster()),
        ("DELETE", userinfo(), taloscluster()),
        ("UPDATE", None, taloscluster()),
        ("UPDATE", {"username": ""}, taloscluster()),
        ("UPDATE", userinfo(), None),
        ("UPDATE", userinfo(), {"metadata": "prod"}),
    ],
    ids=["create", "delete", "no-user", "empty-user", "no-object", "bad-metadata"],
)
async def test_a_review_it_cannot_read_is_denied(
    operation: str, info: object, body: object
) -> None:
    answer = await judgement.status_answer(
        kind=kinds.Kind.TALOS_CLUSTER, new=body, old=body, userinfo=info,
        operation=operation, backend=FakeBackend(operator="alice"),
    )  # fmt: skip
    assert not answer.allowed
    assert answer.code == 400
