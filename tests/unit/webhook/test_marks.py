"""The operator's marks are the operator's: every ``ichor.dev`` label or annotation that is
not a person's or the webhook's, added, changed or removed (a create counts), and the
owner references of an operation the operator started, are refused from anyone but the
operator, judged by its whole identity: a name like the operator's without its groups or
uid (an impersonation) is refused too."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from ichor.api import kinds, marks, records
from ichor.api.autopatch import HALTED_ANNOTATION, RESUME_ANNOTATION, UNHALT_ANNOTATION
from ichor.api.talosoperation import (
    ATTEMPT_ANNOTATION,
    STARTED_BY_LABEL,
    STARTED_FOR_ANNOTATION,
)
from ichor.kube import identity
from ichor.webhook import intake, judgement
from tests.unit.webhook.fakes import FakeBackend, taloscluster, talosoperation
from tests.unit.webhook.test_handlers import REF

OPERATOR = "system:serviceaccount:ichor-system:ichor"
OPERATOR_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:ichor-system",
                   "system:authenticated"]  # fmt: skip
OPERATOR_UID = "0c8a1d6e-sa"


@dataclass
class Backend(FakeBackend):
    """The operator as a ServiceAccount token authenticates it: a uid and its groups."""

    async def own_identity(self) -> identity.Identity:
        self._check()
        return identity.Identity(username=OPERATOR, uid=OPERATOR_UID,
                                 groups=tuple(OPERATOR_GROUPS))  # fmt: skip


WHO: dict[str, dict[str, Any]] = {
    "operator": {"username": OPERATOR, "uid": OPERATOR_UID, "groups": OPERATOR_GROUPS},
    "user": {"username": "alice", "uid": "u-1", "groups": ["team-a", "system:authenticated"]},
    "admin": {"username": "root", "uid": "u-2", "groups": ["system:masters"]},
    # the operator's name without its groups (kubectl --as=<its name> --as-group=x)
    "name-without-groups": {"username": OPERATOR, "groups": ["system:authenticated"]},
    # its name and groups, without its uid (an impersonation of the ServiceAccount: the
    # API server adds its groups, never its uid)
    "name-without-uid": {"username": OPERATOR, "groups": OPERATOR_GROUPS},
}
REFUSED_FOR = [w for w in WHO if w != "operator"]

#: Every operator's mark on a TalosOperation, as (where, key, value).
OPERATION_MARKS = [
    ("labels", STARTED_BY_LABEL, "auto-patch"),
    ("annotations", HALTED_ANNOTATION, "2026-06-01T06:00:00Z"),
    ("annotations", ATTEMPT_ANNOTATION, "1"),
    ("annotations", STARTED_FOR_ANNOTATION, "auto-patch: Talos v1.14.5"),
    # reserved: no person's key, whatever it is called
    ("labels", "ichor.dev/anything", "x"),
    ("annotations", "ichor.dev/anything", "x"),
    ("annotations", "halts.ichor.dev/forged", "x"),
]


def with_meta(body: dict[str, Any], where: str, key: str, value: str | None) -> dict[str, Any]:
    body = copy.deepcopy(body)
    meta = body.setdefault("metadata", {}).setdefault(where, {})
    if value is None:
        meta.pop(key, None)
    else:
        meta[key] = value
    return body


async def judge(kind: kinds.Kind, new: dict[str, Any], *, who: str,
                old: dict[str, Any] | None = None) -> judgement.Judged:  # fmt: skip
    backend = Backend(clusters={REF: taloscluster()}, operator=OPERATOR)
    operation = "CREATE" if old is None else "UPDATE"
    judge_ = {
        kinds.Kind.TALOS_OPERATION: judgement.judge_operation,
        kinds.Kind.TALOS_CLUSTER: judgement.judge_cluster,
        kinds.Kind.ICHOR_INSTALLATION: judgement.judge_installation,
    }[kind]
    return await judge_(new=new, old=old, userinfo=WHO[who], operation=operation, backend=backend)


def marked_operation() -> dict[str, Any]:
    """An operation the operator started: its label, its annotations, its owner."""
    body = talosoperation("talos", "v1.14.5")
    body["metadata"]["labels"] = {STARTED_BY_LABEL: "auto-patch"}
    body["metadata"]["annotations"] = {ATTEMPT_ANNOTATION: "1", STARTED_FOR_ANNOTATION: "x"}
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "ichor.dev/v1alpha1", "kind": "TalosCluster", "name": "prod",
         "uid": "uid-1"}
    ]  # fmt: skip
    return body


@pytest.mark.parametrize(("where", "key", "value"), OPERATION_MARKS, ids=lambda v: str(v))
@pytest.mark.parametrize("change", ["added", "changed", "removed"])
@pytest.mark.parametrize("who", REFUSED_FOR)
async def test_nobody_but_the_operator_adds_changes_or_removes_a_mark(
    where: str, key: str, value: str, change: str, who: str
) -> None:
    base = marked_operation()
    old = with_meta(base, where, key, None if change == "added" else value)
    new = with_meta(base, where, key, {"added": value, "changed": value + "-2",
                                       "removed": None}[change])  # fmt: skip
    judged = await judge(kinds.Kind.TALOS_OPERATION, new, who=who, old=old)
    assert not judged.answer.allowed
    assert judged.answer.code == 403
    said = judged.answer.message
    assert key in said
    assert f"user {WHO[who]['username']!r}" in said
    assert "added, changed or removed only by the operator" in said
    # the operator's own bookkeeping passes
    assert (await judge(kinds.Kind.TALOS_OPERATION, new, who="operator", old=old)).answer.allowed


@pytest.mark.parametrize(("where", "key", "value"), OPERATION_MARKS, ids=lambda v: str(v))
@pytest.mark.parametrize("who", REFUSED_FOR)
async def test_a_create_carrying_a_mark_is_a_forgery(
    where: str, key: str, value: str, who: str
) -> None:
    new = with_meta(talosoperation("talos", "v1.14.5"), where, key, value)
    judged = await judge(kinds.Kind.TALOS_OPERATION, new, who=who)
    assert not judged.answer.allowed
    assert key in judged.answer.message
    assert "is set only by the operator" in judged.answer.message


async def test_the_operator_starts_its_operation_and_a_person_theirs() -> None:
    assert (
        await judge(kinds.Kind.TALOS_OPERATION, marked_operation(), who="operator")
    ).answer.allowed
    plain = talosoperation("talos", "v1.14.5")
    plain["metadata"]["labels"] = {"team": "a", "example.dev/ichor.dev": "x"}
    plain["metadata"]["annotations"] = {"note": "ichor.dev/started-by"}
    assert (await judge(kinds.Kind.TALOS_OPERATION, plain, who="user")).answer.allowed


async def test_a_person_may_update_a_marked_operation_without_touching_its_marks() -> None:
    old = marked_operation()
    new = with_meta(old, "labels", "team", "a")
    new = with_meta(new, "annotations", "note", "looked at it")
    assert (await judge(kinds.Kind.TALOS_OPERATION, new, who="user", old=old)).answer.allowed


@pytest.mark.parametrize(
    "owners",
    [
        [],
        [{"apiVersion": "ichor.dev/v1alpha1", "kind": "TalosCluster", "name": "prod",
          "uid": "uid-other"}],
        [{"apiVersion": "ichor.dev/v1alpha1", "kind": "TalosCluster", "name": "prod",
          "uid": "uid-1"},
         {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "uid-x"}],
    ],
    ids=["removed", "changed", "added"],
)  # fmt: skip
@pytest.mark.parametrize("who", REFUSED_FOR)
async def test_the_owners_of_an_operator_started_operation_are_the_operators(
    owners: list[dict[str, str]], who: str
) -> None:
    old = marked_operation()
    new = copy.deepcopy(old)
    new["metadata"]["ownerReferences"] = owners
    judged = await judge(kinds.Kind.TALOS_OPERATION, new, who=who, old=old)
    assert not judged.answer.allowed
    assert "owner references" in judged.answer.message
    assert f"user {WHO[who]['username']!r}" in judged.answer.message
    assert (await judge(kinds.Kind.TALOS_OPERATION, new, who="operator", old=old)).answer.allowed
    # a person's own operation: its owners are theirs
    mine, theirs = talosoperation("talos", "v1.14.5"), talosoperation("talos", "v1.14.5")
    theirs["metadata"]["ownerReferences"] = owners
    assert (await judge(kinds.Kind.TALOS_OPERATION, theirs, who=who, old=mine)).answer.allowed


@pytest.mark.parametrize(
    ("kind", "body", "key"),
    [
        (kinds.Kind.TALOS_CLUSTER, taloscluster, RESUME_ANNOTATION),
        (kinds.Kind.TALOS_CLUSTER, taloscluster, records.ADOPTION),
    ],
)
async def test_the_keys_a_person_sets_stay_theirs(kind: kinds.Kind, body: Any, key: str) -> None:
    old = body()
    new = with_meta(old, "annotations", key, "auto-patch-prod-1")
    assert (await judge(kind, new, who="user", old=old)).answer.allowed
    assert (await judge(kind, with_meta(new, "annotations", key, None), who="user",
                        old=new)).answer.allowed  # fmt: skip


@pytest.mark.parametrize("key", [HALTED_ANNOTATION, STARTED_BY_LABEL, "ichor.dev/x",
                                 UNHALT_ANNOTATION])  # fmt: skip
async def test_a_cluster_takes_no_mark_from_a_person(key: str) -> None:
    old = taloscluster()
    new = with_meta(old, "annotations", key, "x")
    judged = await judge(kinds.Kind.TALOS_CLUSTER, new, who="user", old=old)
    assert not judged.answer.allowed
    assert key in judged.answer.message
    assert (await judge(kinds.Kind.TALOS_CLUSTER, new, who="operator", old=old)).answer.allowed


def installation(**annotations: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "ichor.dev/v1alpha1", "kind": "IchorInstallation",
        "metadata": {"name": "ichor"}, "spec": {},
    }  # fmt: skip
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


@pytest.mark.parametrize("value", ["kubernetes/v1.36.7", "all"])
async def test_an_unhalt_request_is_recorded_with_its_requester(value: str) -> None:
    old = installation()
    new = installation(**{UNHALT_ANNOTATION: value})
    judged = await judge(kinds.Kind.ICHOR_INSTALLATION, new, who="admin", old=old)
    assert judged.answer.allowed
    assert judged.stamp is not None
    (record,) = records.read({records.RECORDS: judged.stamp.records})
    assert (record.kind, record.user, record.detail) == (records.RecordKind.UNHALT, "root", value)
    # the same value again (the operator has not acted yet) asks nothing new
    stored = installation(**{UNHALT_ANNOTATION: value, records.RECORDS: judged.stamp.records or ""})
    again = await judge(kinds.Kind.ICHOR_INSTALLATION, stored, who="admin", old=stored)
    assert again.answer.allowed
    assert again.stamp is not None
    assert records.read({records.RECORDS: again.stamp.records}) == (record,)
    # removing the request records nothing (the record, if any, still lifts the halt)
    gone = installation(**{records.RECORDS: judged.stamp.records or ""})
    removed = await judge(kinds.Kind.ICHOR_INSTALLATION, gone, who="admin", old=stored)
    assert removed.answer.allowed


@pytest.mark.parametrize("value", ["kubernetes", "cilium/v1.20.4", "kubernetes/v1.36.7\n",
                                   "x" * 5000])  # fmt: skip
async def test_a_malformed_unhalt_request_is_refused_with_its_form(value: str) -> None:
    judged = await judge(kinds.Kind.ICHOR_INSTALLATION, installation(**{UNHALT_ANNOTATION: value}),
                         who="admin", old=installation())  # fmt: skip
    assert not judged.answer.allowed
    assert "IchorInstallation ichor is refused" in judged.answer.message
    assert "<component>/<version>" in judged.answer.message
    assert "ichor autopatch unhalt" in judged.answer.message
    assert len(judged.answer.message) < 600


@pytest.mark.parametrize("key", ["ichor.dev/anything", HALTED_ANNOTATION, RESUME_ANNOTATION])
async def test_the_installation_takes_no_mark_from_a_person(key: str) -> None:
    new = installation(**{key: "x"})
    judged = await judge(kinds.Kind.ICHOR_INSTALLATION, new, who="admin", old=installation())
    assert not judged.answer.allowed
    assert key in judged.answer.message
    ok = await judge(kinds.Kind.ICHOR_INSTALLATION, new, who="operator", old=installation())
    assert ok.answer.allowed


async def test_the_stamps_are_the_stamp_checks_not_the_marks() -> None:
    """``admission-records`` and ``override-by`` are judged by the webhook's stamp check
    (which refuses a person's own value), not refused here as a mark."""
    for key in marks.STAMP_KEYS:
        assert not marks.operators(kinds.Kind.TALOS_OPERATION, key)
        assert marks.reserved(key)
    forged = with_meta(talosoperation("talos", "v1.14.5"), "annotations", records.OVERRIDE_BY,
                       "root")  # fmt: skip
    answer = await judgement.operation_answer(
        new=forged, userinfo=WHO["user"], operation="CREATE", dryrun=False,
        backend=Backend(clusters={REF: taloscluster()}, operator=OPERATOR),
    )  # fmt: skip
    assert not answer.allowed
    assert records.OVERRIDE_BY in answer.message


@pytest.mark.parametrize("who", REFUSED_FOR)
async def test_status_is_the_operators_by_its_whole_identity(who: str) -> None:
    body = taloscluster()
    answer = await judgement.status_answer(
        kind=kinds.Kind.TALOS_CLUSTER, new=body, old=body, userinfo=WHO[who], operation="UPDATE",
        backend=Backend(operator=OPERATOR),
    )  # fmt: skip
    assert not answer.allowed
    mine = await judgement.status_answer(
        kind=kinds.Kind.TALOS_CLUSTER, new=body, old=body, userinfo=WHO["operator"],
        operation="UPDATE", backend=Backend(operator=OPERATOR),
    )  # fmt: skip
    assert mine.allowed


def test_the_reserved_domain() -> None:
    assert marks.reserved("ichor.dev/x")
    assert marks.reserved("a.ichor.dev/x")
    for key in ("ichor.dev", "xichor.dev/x", "ichor.dev.evil/x", "example.com/ichor.dev", "x"):
        assert not marks.reserved(key), key
    assert marks.operators(kinds.Kind.TALOS_CLUSTER, HALTED_ANNOTATION)
    assert not marks.operators(kinds.Kind.TALOS_CLUSTER, RESUME_ANNOTATION)
    assert marks.operators(kinds.Kind.TALOS_OPERATION, RESUME_ANNOTATION)
    assert not marks.operators(kinds.Kind.ICHOR_INSTALLATION, UNHALT_ANNOTATION)
    assert marks.operators(kinds.Kind.TALOS_CLUSTER, UNHALT_ANNOTATION)


def _matches(new: dict[str, Any], old: dict[str, Any]) -> bool:
    # the CEL the API server evaluates, as cel-python reads it
    env = celpy.Environment()
    program = env.program(env.compile(intake.RESERVED_KEYS))
    found = program.evaluate({"object": json_to_cel(new), "oldObject": json_to_cel(old)})
    return bool(found)


@pytest.mark.parametrize(
    "key",
    ["ichor.dev/unhalt", "ichor.dev/admission-records", "a.ichor.dev/x", "b.a.ichor.dev/x",
     "ichor.dev/x", "ichor.dev", "xichor.dev/x", "ichor.dev.evil/x", "example.com/ichor.dev",
     "app.kubernetes.io/version", "helm.sh/chart", "ichor-dev/x"],
)  # fmt: skip
@pytest.mark.parametrize("where", ["labels", "annotations"])
@pytest.mark.parametrize("side", ["added", "removed", "kept"])
def test_the_installations_match_condition_sends_every_write_of_a_reserved_key(
    key: str, where: str, side: str
) -> None:
    """The API server sends an IchorInstallation update to the webhook only when the
    object or the old object carries a reserved key (the chart's own label updates do
    not wait for it): every write that adds, changes or removes one is sent."""
    carrying = {"metadata": {where: {key: "v", "app": "x"}}}
    plain = {"metadata": {where: {"app": "x"}}}
    new, old = {
        "added": (carrying, plain), "removed": (plain, carrying), "kept": (carrying, carrying)
    }[side]  # fmt: skip
    assert _matches(new, old) is marks.reserved(key)
    assert not _matches(plain, plain)
    assert not _matches({"metadata": {}}, {"metadata": {}})
