"""The unmanaged CNI leaves a trace: a Kubernetes step on a cluster whose spec.cni.preset is
unmanaged, past a Cilium the rule would refuse, is admitted (the decision record lets the
preset skip the rule) with a record the operator posts as a Warning Event naming the user
and the rule's sentence; a step the rule would accept, a managed cluster, a dry run or the
operator's own spec write after an operation add none. And the plan of a Declarative
cluster whose Nodes cannot all be read is refused for everyone."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.api import records
from ichor.api.talosoperation import STARTED_BY_LABEL
from ichor.webhook import judgement
from ichor.webhook.reviews import NamespacedName
from tests.unit.webhook.fakes import FakeBackend, stamped, talosoperation, userinfo

REF = NamespacedName("team-a", "prod")


def unmanaged(
    *,
    kubernetes: str = "v1.36.6",
    cilium: str | None = "1.20.4",
    preset: str = "unmanaged",
    declarative: bool = False,
    nodes: list[str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "talosVersion": "v1.14.3",
        "kubernetesVersion": kubernetes,
        "versionContract": "v1.14",
        "cni": {"preset": preset},
    }
    if declarative:
        spec["upgradeStrategy"] = "Declarative"
    cni: dict[str, Any] = {"detected": "cilium"}
    if cilium is not None:
        cni["detectedVersion"] = cilium
    status: dict[str, Any] = {"cni": cni}
    if nodes is not None:
        status["nodes"] = {"count": 2, "unreadable": nodes}
    return {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {"name": "prod", "namespace": "team-a", "uid": "uid-1"},
        "spec": spec,
        "status": status,
    }


async def _write(old: dict[str, Any], new: dict[str, Any], *, user: str = "mallory") -> Any:
    backend = FakeBackend()
    body = await stamped(new, old=old, userinfo=userinfo(user), operation="UPDATE", backend=backend)
    answer = await judgement.cluster_answer(
        new=body, old=old, userinfo=userinfo(user), operation="UPDATE", dryrun=False,
        backend=backend,
    )  # fmt: skip
    return answer, body


async def test_a_kubernetes_write_past_the_cilium_it_skips_is_admitted_with_a_trace() -> None:
    answer, body = await _write(unmanaged(), unmanaged(kubernetes="v1.37.2"))
    assert answer.allowed, answer.message
    (record,) = records.read(records.annotations_of(body))
    assert record == answer.traced
    assert (record.kind, record.user) == (records.RecordKind.CILIUM_RULE_SKIPPED, "mallory")
    (passed,) = record.passed
    assert passed.rule == "CiliumKubernetes"
    message = records.message(record, kind="TalosCluster", namespace="team-a", name="prod")
    assert message.startswith(
        "User mallory wrote TalosCluster team-a/prod (update spec.kubernetesVersion to v1.37.2)"
    )
    assert "spec.cni.preset is unmanaged, so the Cilium rule was not asked" in message
    assert "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36" in message
    # the trace is the Event: the write itself is admitted as the preset allows, silently
    assert answer.warnings == ()


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (unmanaged(kubernetes="v1.35.4"), unmanaged(kubernetes="v1.36.6")),  # Cilium runs it
        (unmanaged(kubernetes="v1.36.6"), unmanaged(kubernetes="v1.36.6")),  # no step
        (unmanaged(cilium=None), unmanaged(cilium=None)),  # no step, unreadable
    ],
    ids=["accepted-step", "no-step", "no-step-unreadable"],
)
async def test_a_write_the_rule_would_not_refuse_leaves_no_trace(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    answer, body = await _write(old, new)
    assert answer.allowed, answer.message
    assert answer.traced is None
    assert records.read(records.annotations_of(body)) == ()


async def test_an_unreadable_cilium_on_an_unmanaged_cluster_is_traced_too() -> None:
    answer, body = await _write(
        unmanaged(cilium=None), unmanaged(kubernetes="v1.36.7", cilium=None)
    )
    assert answer.allowed, answer.message
    (record,) = records.read(records.annotations_of(body))
    assert record.passed[0].rule == "UnreadableVersion"


async def test_the_operators_spec_write_after_an_operation_adds_no_second_trace() -> None:
    backend = FakeBackend()
    operator = {"username": backend.operator}
    old, new = unmanaged(), unmanaged(kubernetes="v1.37.2")
    body = await stamped(new, old=old, userinfo=operator, operation="UPDATE", backend=backend)
    answer = await judgement.cluster_answer(
        new=body, old=old, userinfo=operator, operation="UPDATE", dryrun=False, backend=backend
    )
    assert answer.allowed, answer.message
    assert answer.traced is None


@pytest.mark.parametrize("started_by", [None, "auto-patch", "declarative"])
async def test_a_kubernetes_operation_past_the_skipped_cilium_is_traced(
    started_by: str | None,
) -> None:
    backend = FakeBackend(clusters={REF: unmanaged()})
    who = userinfo("mallory") if started_by is None else {"username": backend.operator}
    op = talosoperation("kubernetes", "v1.37.2")
    if started_by is not None:
        op["metadata"]["labels"] = {STARTED_BY_LABEL: started_by}
    body = await stamped(
        op, old=None, userinfo=who, operation="CREATE", backend=backend, kind="TalosOperation"
    )
    answer = await judgement.operation_answer(
        new=body, userinfo=who, operation="CREATE", dryrun=False, backend=backend
    )
    assert answer.allowed, answer.message
    (record,) = records.read(records.annotations_of(body))
    assert record.kind is records.RecordKind.CILIUM_RULE_SKIPPED
    assert record.user == who["username"]
    message = records.message(record, kind="TalosOperation", namespace="team-a", name="up")
    assert message.startswith(
        f"User {who['username']} created TalosOperation team-a/up (kubernetes to v1.37.2 on "
        "TalosCluster team-a/prod"
    )
    if started_by is not None:
        assert f"started by {started_by}" in message
    assert "Cilium 1.20.4" in message


@pytest.mark.parametrize(
    ("cluster", "op"),
    [
        (unmanaged(), talosoperation("kubernetes", "v1.36.7")),  # Cilium 1.20 runs 1.36
        (unmanaged(), talosoperation("talos", "v1.14.4")),  # the rule judges no Talos step
        (unmanaged(preset="cilium"), talosoperation("kubernetes", "v1.36.7")),  # managed
    ],
    ids=["accepted", "talos", "managed"],
)
async def test_an_operation_the_rule_would_not_refuse_leaves_no_trace(
    cluster: dict[str, Any], op: dict[str, Any]
) -> None:
    backend = FakeBackend(clusters={REF: cluster})
    body = await stamped(
        op, old=None, userinfo=userinfo(), operation="CREATE", backend=backend,
        kind="TalosOperation",
    )  # fmt: skip
    answer = await judgement.operation_answer(
        new=body, userinfo=userinfo(), operation="CREATE", dryrun=False, backend=backend
    )
    assert answer.allowed, answer.message
    assert records.read(records.annotations_of(body)) == ()


@pytest.mark.parametrize("kind", ["talos", "kubernetes", "cni"])
async def test_the_plan_of_a_declarative_cluster_with_unreadable_nodes_is_refused(
    kind: str,
) -> None:
    cluster = unmanaged(
        preset="cilium",
        declarative=True,
        nodes=['Node n2 runs osImage "Ubuntu 24.04", not "Talos (vX.Y.Z)"'],
    )
    backend = FakeBackend(clusters={REF: cluster}, holders={"root"})
    version = {"talos": "v1.14.4", "kubernetes": "v1.36.7", "cni": None}[kind]
    op = talosoperation(kind, version, override=True)
    answer = await judgement.operation_answer(
        new=op, userinfo=userinfo("root"), operation="CREATE", dryrun=True, backend=backend
    )
    assert not answer.allowed
    assert "the workload cluster's Nodes cannot all be read" in answer.message
    assert "`override: true` does not pass it" in answer.message


async def test_the_trace_cannot_be_left_out_or_forged() -> None:
    """Its record is the webhook's: the write without it (the mutating half skipped, or
    the record removed) is refused, and so is a record a user writes on a step that adds
    none."""
    backend = FakeBackend()
    old, new = unmanaged(), unmanaged(kubernetes="v1.37.2")
    bare = await judgement.cluster_answer(
        new=new, old=old, userinfo=userinfo("mallory"), operation="UPDATE", dryrun=False,
        backend=backend,
    )  # fmt: skip
    assert not bare.allowed
    assert records.RECORDS in bare.message
    stamped_body = await stamped(
        new, old=old, userinfo=userinfo("mallory"), operation="UPDATE", backend=backend
    )
    forged = unmanaged(kubernetes="v1.36.7")  # a step the rule accepts: no record
    forged["metadata"]["annotations"] = stamped_body["metadata"]["annotations"]
    answer = await judgement.cluster_answer(
        new=forged, old=old, userinfo=userinfo("mallory"), operation="UPDATE", dryrun=False,
        backend=backend,
    )  # fmt: skip
    assert not answer.allowed
    assert records.RECORDS in answer.message
