"""The kopf handlers with an in-memory API: which calls they make, what they answer."""

from __future__ import annotations

import copy
from typing import Any

import kopf
import pytest

from ichor.api import records
from ichor.controller.recorder import recorder
from ichor.kube import bodies
from ichor.webhook import decisions, handlers, judgement, kubeapi
from ichor.webhook.reviews import NamespacedName, Requester
from tests.support import table
from tests.unit.webhook.fakes import (
    FakeBackend,
    stamped,
    taloscluster,
    talosoperation,
    userinfo,
)

REF = NamespacedName("team-a", "prod")


@pytest.mark.parametrize("dryrun", [False, True], ids=["write", "dry-run"])
async def test_a_holder_passes_and_the_override_travels_with_the_object(dryrun: bool) -> None:
    """The webhook writes no Event, dry run or not: the record of the override is in the
    object it admits, and the operator posts it once that object is stored."""
    backend = FakeBackend(holders={"alice"})
    old = taloscluster(kubernetes="v1.31.4")
    new = await stamped(
        taloscluster(kubernetes="v1.31.9"), old=old, userinfo=userinfo(), operation="UPDATE",
        backend=backend,
    )  # fmt: skip
    answer = await judgement.cluster_answer(
        new=new, old=old, userinfo=userinfo(), operation="UPDATE", dryrun=dryrun, backend=backend
    )
    assert answer.allowed, answer.message
    assert answer.warnings
    assert backend.reviews == [(Requester("alice", "u-1", ("ops",), (("scopes", ("a",)),)), REF)]
    assert backend.events == []
    (record,) = records.read(records.annotations_of(new))
    assert record == answer.admitted
    assert (record.kind, record.user) == (records.RecordKind.OVERRIDE, "alice")
    message = records.message(record, kind="TalosCluster", namespace="team-a", name="prod")
    assert "User alice overrode" in message
    assert "v1.31.9" in message
    # the same write without the record the mutating half adds is refused
    bare = await judgement.cluster_answer(
        new=taloscluster(kubernetes="v1.31.9"), old=old, userinfo=userinfo(), operation="UPDATE",
        dryrun=dryrun, backend=backend,
    )  # fmt: skip
    assert not bare.allowed
    assert records.RECORDS in bare.message


async def test_a_compatible_write_asks_nothing_of_the_api() -> None:
    backend = FakeBackend()
    answer = await judgement.cluster_answer(
        new=taloscluster(kubernetes="v1.36.7"),
        old=taloscluster(),
        userinfo=userinfo(),
        operation="UPDATE",
        dryrun=False,
        backend=backend,
    )
    assert answer.allowed
    assert not answer.warnings
    assert backend.reviews == []
    assert backend.events == []
    assert answer.admitted is None


async def test_a_failing_api_gives_a_denial_that_says_to_retry() -> None:
    answer = await judgement.cluster_answer(
        new=taloscluster(kubernetes="v1.31.9"),
        old=None,
        userinfo=userinfo(),
        operation="CREATE",
        dryrun=False,
        backend=FakeBackend(fail=True),
    )
    assert not answer.allowed
    assert answer.code == 503
    assert "retry" in answer.message


async def test_the_plan_of_an_operation_reads_the_cluster_it_names() -> None:
    backend = FakeBackend(clusters={REF: taloscluster(talos="v1.13.2", kubernetes="v1.35.4")})
    allowed = await judgement.operation_answer(
        new=talosoperation("talos", "v1.14.3"),
        userinfo=userinfo(),
        operation="CREATE",
        dryrun=True,
        backend=backend,
    )
    assert allowed.allowed
    assert not allowed.warnings
    missing = await judgement.operation_answer(
        new=talosoperation("talos", "v1.14.3", cluster="nope"),
        userinfo=userinfo(),
        operation="CREATE",
        dryrun=True,
        backend=backend,
    )
    assert not missing.allowed
    assert "TalosCluster team-a/nope does not exist" in missing.message


@pytest.mark.parametrize(
    ("override", "holders", "allowed", "reviews"),
    [(False, {"alice"}, False, 0), (True, set(), False, 1), (True, {"alice"}, True, 1)],
    ids=["without-override-no-review", "override-without-verb", "override-with-verb"],
)
async def test_an_operation_asks_for_the_verb_only_under_override(
    override: bool, holders: set[str], allowed: bool, reviews: int
) -> None:
    backend = FakeBackend(
        clusters={REF: taloscluster(talos="v1.14.3", kubernetes="v1.35.4", cilium="1.19.10")},
        holders=holders,
    )
    new = await stamped(
        talosoperation("kubernetes", "v1.36.2", override=override), old=None,
        userinfo=userinfo(), operation="CREATE", backend=backend, kind="TalosOperation",
    )  # fmt: skip
    answer = await judgement.operation_answer(
        new=new,
        userinfo=userinfo(),
        operation="CREATE",
        dryrun=True,
        backend=backend,
    )
    assert answer.allowed is allowed
    assert len(backend.reviews) == reviews
    if allowed:
        assert records.annotations_of(new)[records.OVERRIDE_BY] == "alice"
    assert backend.events == []  # a dry run records nothing


async def test_the_kopf_handler_raises_an_admission_error_with_the_message() -> None:
    memo = kopf.Memo({handlers.BACKEND: FakeBackend()})
    warnings: list[str] = []
    with pytest.raises(kopf.AdmissionError) as raised:
        await handlers.validate_taloscluster(
            memo=memo,
            new=taloscluster(talos=table.unknown_talos()),
            old=None,
            userinfo=userinfo(),
            operation="CREATE",
            dryrun=False,
            warnings=warnings,
        )
    assert raised.value.code == 403
    assert f"Talos {table.unknown_talos()} is refused" in str(raised.value)


def test_the_access_review_carries_the_whole_identity() -> None:
    review: Any = kubeapi.access_review(
        Requester("alice", "u-1", ("ops", "system:authenticated"), (("scopes", ("a", "b")),)),
        REF,
    )
    assert review["spec"] == {
        "user": "alice",
        "uid": "u-1",
        "groups": ["ops", "system:authenticated"],
        "extra": {"scopes": ["a", "b"]},
        "resourceAttributes": {
            "group": "ichor.dev",
            "resource": "talosclusters",
            "verb": "override",
            "namespace": "team-a",
            "name": "prod",
        },
    }


def test_the_override_event_is_a_warning_on_the_cluster() -> None:
    """What the recorder posts for an override record of a stored cluster."""
    body = taloscluster()
    event = bodies.event_body(
        bodies.reference(body),
        type_=bodies.EventType.WARNING,
        reason=recorder.REASONS[records.RecordKind.OVERRIDE],
        message="User alice overrode ...",
    )
    assert (event["type"], event["reason"]) == ("Warning", "Override")
    assert event["involvedObject"] == {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "namespace": "team-a",
        "name": "prod",
        "uid": "uid-1",
    }
    assert event["metadata"]["namespace"] == "team-a"


def _stored_operation(*, phase: str = "Succeeded") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "k8s",
            "namespace": "team-a",
            "annotations": {records.OVERRIDE_BY: "olivia"},
        },
        "spec": {
            "clusterRef": {"name": "prod"},
            "type": "kubernetes",
            "version": "v1.31.9",
            "override": True,
        },
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("user", "phase", "carried"),
    [("op", "Succeeded", True), ("op", "Running", False), ("alice", "Succeeded", False)],
    ids=["operator-after-success", "operator-before-success", "person"],
)
async def test_only_the_operators_write_after_success_carries_an_override(
    user: str, phase: str, carried: bool
) -> None:
    backend = FakeBackend(operator="op", operations=[_stored_operation(phase=phase)])
    old = taloscluster(kubernetes="v1.31.4")
    new = await stamped(
        taloscluster(kubernetes="v1.31.9"), old=old, userinfo=userinfo(user), operation="UPDATE",
        backend=backend,
    )  # fmt: skip
    answer = await judgement.cluster_answer(
        new=new,
        old=old,
        userinfo=userinfo(user),
        operation="UPDATE",
        dryrun=False,
        backend=backend,
    )
    assert answer.allowed is carried
    # a carried write asks no SubjectAccessReview; any other write asks for the verb
    assert (backend.reviews == []) is carried
    if carried:
        assert answer.record is not None
        assert "under the override of TalosOperation team-a/k8s" in answer.record


async def test_auto_patch_on_a_declarative_cluster_is_admitted_with_a_warning() -> None:
    """Auto-patch does not run on a Declarative cluster: the write passes (it is no
    refusal), and the writer is told the field is ignored."""
    backend = FakeBackend()
    declarative = taloscluster()
    declarative["spec"]["upgradeStrategy"] = "Declarative"
    with_auto = copy.deepcopy(declarative)
    with_auto["spec"]["autoPatch"] = {"components": ["talos"], "windows": []}
    for operation, old in (("CREATE", None), ("UPDATE", declarative)):
        answer = await judgement.cluster_answer(
            new=with_auto, old=old, userinfo=userinfo(), operation=operation, dryrun=False,
            backend=backend,
        )  # fmt: skip
        assert answer.allowed, answer.message
        assert answer.warnings == (decisions.AUTO_PATCH_IGNORED,)
        assert len(decisions.AUTO_PATCH_IGNORED) <= decisions.WARNING_LIMIT
    # nothing to say without autoPatch, or in the Operations mode
    operations = copy.deepcopy(with_auto)
    operations["spec"]["upgradeStrategy"] = "Operations"
    for new in (declarative, operations):
        answer = await judgement.cluster_answer(
            new=new, old=None, userinfo=userinfo(), operation="CREATE", dryrun=False,
            backend=backend,
        )  # fmt: skip
        assert answer.allowed
        assert answer.warnings == ()
    # a refused write stays refused, with its own sentence only
    refused = copy.deepcopy(with_auto)
    refused["spec"]["kubernetesVersion"] = table.unknown_kubernetes()
    answer = await judgement.cluster_answer(
        new=refused, old=declarative, userinfo=userinfo(), operation="UPDATE", dryrun=False,
        backend=backend,
    )  # fmt: skip
    assert not answer.allowed
    assert answer.warnings == ()


@pytest.mark.parametrize("dryrun", [False, True], ids=["write", "dry-run"])
async def test_the_log_of_an_admitted_override_does_not_claim_it_happened(
    dryrun: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A review may be forged, and an admitted write may never be stored: the webhook's
    log says it admitted an override, never that a user overrode anything (that sentence
    is the Event's, posted once the object is stored)."""
    backend = FakeBackend(holders={"alice"})
    old = taloscluster(kubernetes="v1.31.4")
    new = await stamped(
        taloscluster(kubernetes="v1.31.9"), old=old, userinfo=userinfo(), operation="UPDATE",
        backend=backend,
    )  # fmt: skip
    with caplog.at_level("INFO"):
        answer = await judgement.cluster_answer(
            new=new, old=old, userinfo=userinfo(), operation="UPDATE", dryrun=dryrun,
            backend=backend,
        )  # fmt: skip
    assert answer.allowed
    (logged,) = [r.getMessage() for r in caplog.records if "override" in r.getMessage()]
    assert not logged.startswith("User ")
    assert "admitted a review" in logged
    assert "user alice" in logged
    assert "only once the object is stored" in logged
    assert ("dry run: nothing is stored" in logged) is dryrun
