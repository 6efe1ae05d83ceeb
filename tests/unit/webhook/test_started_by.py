"""Only the operator marks an operation as started by the controller itself: a person's
create or update that sets, changes or removes ``ichor.dev/started-by`` is refused, so a
failed operation carrying it is the controller's own (auto-patch halts on it)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ichor.api.talosoperation import STARTED_BY_LABEL
from ichor.webhook import judgement
from tests.unit.webhook.fakes import FakeBackend, stamped, taloscluster, talosoperation, userinfo
from tests.unit.webhook.test_handlers import REF

OPERATOR = "system:serviceaccount:ichor-system:ichor"


def labelled(value: str | None, **spec: Any) -> dict[str, Any]:
    body = talosoperation("talos", "v1.14.4", **spec)
    if value is not None:
        body["metadata"]["labels"] = {STARTED_BY_LABEL: value}
    return body


async def answer(
    new: dict[str, Any], *, user: str, old: dict[str, Any] | None = None
) -> tuple[bool, str]:
    backend = FakeBackend(clusters={REF: taloscluster()}, holders={"root"}, operator=OPERATOR)
    operation = "CREATE" if old is None else "UPDATE"
    body = await stamped(
        new, old=old, userinfo=userinfo(user), operation=operation, backend=backend,
        kind="TalosOperation",
    )  # fmt: skip
    if old is None:
        found = await judgement.operation_answer(
            new=body, userinfo=userinfo(user), operation=operation, dryrun=False, backend=backend
        )
    else:
        judged = await judgement.judge_operation(
            new=body, old=old, userinfo=userinfo(user), operation=operation, backend=backend
        )
        found = judged.answer
    return found.allowed, found.message


@pytest.mark.parametrize("value", ["auto-patch", "declarative", "anything"])
@pytest.mark.parametrize("user", ["alice", "root"], ids=["user", "holder-of-the-verb"])
async def test_a_person_cannot_create_an_operation_marked_as_the_controllers(
    value: str, user: str
) -> None:
    allowed, message = await answer(labelled(value), user=user)
    assert not allowed
    assert STARTED_BY_LABEL in message
    assert f"user {user!r}" in message
    assert "only by the operator" in message


async def test_the_operator_creates_one_and_a_person_an_unmarked_one() -> None:
    assert (await answer(labelled("auto-patch"), user=OPERATOR))[0]
    assert (await answer(labelled(None), user="alice"))[0]


@pytest.mark.parametrize(
    ("before", "after"),
    [(None, "auto-patch"), ("auto-patch", "declarative"), ("auto-patch", None)],
    ids=["added", "changed", "removed"],
)
async def test_a_person_cannot_add_change_or_remove_the_mark(
    before: str | None, after: str | None
) -> None:
    old = labelled(before)
    allowed, message = await answer(labelled(after), user="alice", old=old)
    assert not allowed
    assert "added, changed or removed only by the operator" in message
    # the operator may (the controller's own bookkeeping)
    assert (await answer(labelled(after), user=OPERATOR, old=old))[0]


async def test_a_person_may_update_a_marked_operation_without_touching_the_mark() -> None:
    old = labelled("auto-patch")
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["team"] = "a"
    assert (await answer(new, user="alice", old=old))[0]


@pytest.mark.parametrize("labels", ["garbage", ["a"], {STARTED_BY_LABEL: 7}])
async def test_a_malformed_label_set_is_never_the_mark_and_never_a_crash(labels: object) -> None:
    body = labelled(None)
    body["metadata"]["labels"] = labels
    allowed, message = await answer(body, user="alice")
    if isinstance(labels, dict):
        assert not allowed
        assert STARTED_BY_LABEL in message
    else:
        assert allowed, message
