"""Reading the operator's identity from a SelfSubjectReview answer: the username or nothing."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.kube import identity


def test_the_username_uid_and_groups_are_read() -> None:
    answer = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
        "status": {
            "userInfo": {
                "username": "system:serviceaccount:ichor-system:ichor",
                "uid": "0b1c",
                "groups": ["system:serviceaccounts", "system:authenticated"],
            }
        },
    }
    found = identity.from_review(answer)
    assert found == identity.Identity(
        username="system:serviceaccount:ichor-system:ichor",
        uid="0b1c",
        groups=("system:serviceaccounts", "system:authenticated"),
    )
    assert str(found) == "system:serviceaccount:ichor-system:ichor"


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"status": None},
        {"status": {"userInfo": None}},
        {"status": {"userInfo": {}}},
        {"status": {"userInfo": {"username": ""}}},
        {"status": {"userInfo": {"username": 7}}},
        {"status": "system:masters"},
    ],
    ids=["empty", "no-status", "no-userinfo", "no-username", "empty-name", "number", "string"],
)
def test_an_answer_without_a_username_is_no_identity(answer: dict[str, Any]) -> None:
    with pytest.raises(identity.IdentityUnknown):
        identity.from_review(answer)


def test_odd_groups_and_uid_are_dropped_not_guessed() -> None:
    found = identity.from_review(
        {"status": {"userInfo": {"username": "op", "uid": 3, "groups": ["a", 1, None]}}}
    )
    assert found == identity.Identity(username="op", uid="", groups=("a",))
