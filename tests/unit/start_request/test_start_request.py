"""The operation the controller starts by itself: its name, its manifest, and which
stored operation counts as its own."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ichor.api.talosoperation import OperationType, StartedBy
from ichor.controller.talosoperation import start_request

CLUSTER = start_request.ClusterTarget(namespace="team-a", name="prod", uid="uid-1")


def request(**changes: Any) -> start_request.StartRequest:
    fields: dict[str, Any] = {
        "cluster": CLUSTER,
        "type": OperationType.TALOS,
        "version": "v1.14.4",
        "started_by": StartedBy.AUTO_PATCH,
    }
    fields.update(changes)
    return start_request.StartRequest(**fields)


def test_the_name_is_readable_and_a_function_of_the_request_alone() -> None:
    name = start_request.operation_name(request())
    assert name.startswith("auto-patch-prod-talos-v1-14-4-")
    assert name == start_request.operation_name(request())  # a restart decides the same name
    assert len(name) <= start_request.NAME_LIMIT


@pytest.mark.parametrize(
    "change",
    [
        {"version": "v1.14.5"},
        {"type": OperationType.KUBERNETES},
        {"attempt": "2"},
        {"started_by": StartedBy.DECLARATIVE},
        {"cluster": start_request.ClusterTarget(namespace="team-a", name="prod", uid="uid-2")},
    ],
    ids=["version", "type", "attempt", "starter", "cluster-recreated"],
)
def test_any_other_request_gets_another_name(change: dict[str, Any]) -> None:
    assert start_request.operation_name(request(**change)) != start_request.operation_name(
        request()
    )


@given(
    name=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=253),
    version=st.text(min_size=1, max_size=64),
)
def test_every_name_is_a_valid_object_name(name: str, version: str) -> None:
    cluster = start_request.ClusterTarget(namespace="ns", name=name, uid="u")
    made = start_request.operation_name(request(cluster=cluster, version=version))
    assert 9 <= len(made) <= start_request.NAME_LIMIT
    assert made[0].isalnum()
    assert made[-1].isalnum()
    assert set(made) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")


def test_the_manifest_is_an_ordinary_operation_never_an_override() -> None:
    body = start_request.manifest(request(reason="window 0 2 * * * (UTC) is open"))
    assert body["kind"] == "TalosOperation"
    assert body["spec"] == {
        "clusterRef": {"name": "prod"},
        "type": "talos",
        "version": "v1.14.4",
        "override": False,
    }
    meta = body["metadata"]
    assert meta["namespace"] == "team-a"
    assert meta["labels"] == {start_request.STARTED_BY: "auto-patch"}
    assert meta["ownerReferences"] == [
        {"apiVersion": "ichor.dev/v1alpha1", "kind": "TalosCluster", "name": "prod", "uid": "uid-1"}
    ]
    assert meta["annotations"][start_request.REASON] == "window 0 2 * * * (UTC) is open"
    assert "override" not in start_request.StartRequest.__dataclass_fields__


@pytest.mark.parametrize(
    "change",
    [
        {"type": OperationType.CNI},
        {"version": ""},
        {"cluster": start_request.ClusterTarget(namespace="team-a", name="prod", uid="")},
    ],
    ids=["cni", "no-version", "no-uid"],
)
def test_a_request_the_controller_never_makes_is_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"\w"):
        request(**change)


def stored(**metadata: Any) -> dict[str, Any]:
    body = copy.deepcopy(start_request.manifest(request()))
    body["metadata"].update(metadata)
    return body


def test_the_operation_a_restart_finds_under_the_name_is_its_own() -> None:
    assert start_request.judge_existing(request(), stored(uid="op-1", resourceVersion="7")) is None


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (stored(labels={}), "was not started by auto-patch"),
        (stored(labels={start_request.STARTED_BY: "declarative"}), "was not started by auto-patch"),
        (stored(ownerReferences=[]), "is not owned by TalosCluster prod"),
        (
            stored(ownerReferences=[{"kind": "TalosCluster", "name": "prod", "uid": "other"}]),
            "is not owned by TalosCluster prod",
        ),
    ],
    ids=["unlabelled", "other-starter", "unowned", "owned-by-a-namesake"],
)
def test_an_operation_of_someone_else_under_the_name_is_never_taken(
    body: dict[str, Any], says: str
) -> None:
    problem = start_request.judge_existing(request(), body)
    assert problem is not None
    assert says in problem


@pytest.mark.parametrize(
    "spec",
    [{"version": "v1.14.5"}, {"type": "kubernetes"}, {"override": True}, {"clusterRef": {}}],
    ids=["version", "type", "override", "cluster"],
)
def test_an_operation_for_another_upgrade_under_the_name_is_never_taken(
    spec: dict[str, Any],
) -> None:
    body = stored()
    body["spec"].update(spec)
    problem = start_request.judge_existing(request(), body)
    assert problem is not None
    assert "for another upgrade than talos v1.14.4" in problem


def test_who_started_an_operation_is_read_from_its_label_only() -> None:
    assert start_request.started_by(stored()) is StartedBy.AUTO_PATCH
    assert start_request.started_by(stored(labels={start_request.STARTED_BY: "someone"})) is None
    assert start_request.started_by({"metadata": {"labels": "garbage"}}) is None
    assert start_request.started_by({}) is None


@pytest.mark.parametrize(
    ("status", "message", "rule"),
    [
        (403, 'admission webhook "op.ichor.dev" denied the request: Talos v1.15.0 is ...', True),
        (403, 'talosoperations.ichor.dev is forbidden: User "ichor" cannot create ...', False),
        (400, 'admission webhook "op.ichor.dev" denied the request: ...', False),
        (409, "TalosOperation a/b is not the one the controller starts; delete it ...", False),
        (None, 'admission webhook "op.ichor.dev" denied the request: ...', False),
    ],
    ids=["webhook-denial", "rbac", "not-403", "namesake", "no-status"],
)
def test_only_the_webhooks_denial_is_a_rule_refusal(
    status: int | None, message: str, rule: bool
) -> None:
    from ichor.controller.talosoperation.creating import StartRefused

    assert StartRefused(message, status=status).rule_denial is rule
