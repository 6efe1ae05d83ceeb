"""Ready / Reconciling / Stalled of the three kinds, without a cluster.

The shape the tools read (kstatus, ``kubectl wait``, Flux, Argo CD): ``Ready`` always,
``Reconciling`` and ``Stalled`` only while True (never both), each condition with its own
``observedGeneration``. What the conditions the kinds had before say is unchanged; the
component tests (tests/component/gitops) run the real kstatus on the same objects.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import ClusterReason, Condition, ConditionStatus, OperationReason
from ichor.api.conditions import OperationReason as Reason
from ichor.api.ichorinstallation import LatestRelease, UpgradeTargets
from ichor.api.taloscluster import TalosClusterStatus
from ichor.api.talosoperation import Phase
from ichor.controller.declarative.decisions import ActiveOperation
from ichor.controller.releasecheck import decisions
from ichor.controller.taloscluster.status import Outcome, evaluate
from ichor.controller.talosoperation import lifecycle
from ichor.controller.talosoperation.lifecycle import Operation
from ichor.kube import conditions
from ichor.release.refusals import Rule
from tests.unit.controller.test_status_rules import LISTED, run, seen, spec

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN


def _types(found: tuple[Condition, ...]) -> dict[str, tuple[ConditionStatus, str]]:
    return {c.type: (c.status, c.reason) for c in found}


def _condition(type_: str, status: ConditionStatus, reason: str = "R") -> Condition:
    return Condition(type=type_, status=status, reason=reason, last_transition_time=NOW)


# --- kube.conditions.while_true --------------------------------------------------------


def test_an_abnormal_true_condition_is_written_while_true_and_removed_after() -> None:
    base = (_condition("Ready", U),)
    on = conditions.while_true(base, "Reconciling", _condition("Reconciling", T), now=LATER)
    assert _types(on) == {"Ready": (U, "R"), "Reconciling": (T, "R")}
    assert conditions.find(on, "Reconciling") is not None
    again = conditions.while_true(on, "Reconciling", _condition("Reconciling", T, "S"), now=NOW)
    kept = conditions.find(again, "Reconciling")
    assert kept is not None
    assert kept.last_transition_time == LATER
    off = conditions.while_true(again, "Reconciling", None, now=NOW)
    assert _types(off) == {"Ready": (U, "R")}
    # removing one that is absent is a no-op
    assert conditions.while_true(off, "Stalled", None, now=NOW) == off


@pytest.mark.parametrize(
    "update",
    [_condition("Reconciling", F), _condition("Reconciling", U), _condition("Stalled", T)],
)
def test_an_abnormal_true_condition_is_never_written_other_than_true_of_its_type(
    update: Condition,
) -> None:
    with pytest.raises(ValueError, match="only while True"):
        conditions.while_true((), "Reconciling", update, now=NOW)


# --- TalosOperation --------------------------------------------------------------------


def _operation(status: dict[str, Any] | None = None, *, generation: int = 3) -> Operation:
    return Operation.from_body(
        {
            "metadata": {
                "name": "up",
                "namespace": "ns",
                "uid": "u1",
                "generation": generation,
                "resourceVersion": "7",
                "creationTimestamp": "2026-12-03T07:00:00Z",
            },
            "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"},
            "status": status or {},
        }
    )


def _shape_holds(found: tuple[Condition, ...], generation: int) -> None:
    by_type = _types(found)
    assert "Ready" in by_type
    assert not ("Reconciling" in by_type and "Stalled" in by_type)
    for type_ in ("Reconciling", "Stalled"):
        if type_ in by_type:
            assert by_type[type_][0] == T
    assert all(c.observed_generation == generation for c in found)


def test_an_operation_reconciles_while_pending_and_running_then_is_ready() -> None:
    op = _operation()
    pending = lifecycle.pending(op, reason=Reason.WAITING, message="waits for a", now=NOW)
    _shape_holds(pending.conditions, 3)
    assert _types(pending.conditions)["Reconciling"] == (T, Reason.WAITING)
    assert conditions.find(pending.conditions, "Ready").message == "waits for a"  # type: ignore[union-attr]

    op = _operation(pending.to_api())
    running = lifecycle.running(
        op, job_name="j", decision=lifecycle.Decision(), job_created=True, message="runs", now=NOW
    )
    _shape_holds(running.conditions, 3)
    assert _types(running.conditions)["Reconciling"] == (T, OperationReason.JOB_RUNNING)
    assert _types(running.conditions)["Ready"] == (U, OperationReason.JOB_RUNNING)

    op = _operation(running.to_api())
    updating = lifecycle.spec_updating(op, message="moves the spec", now=NOW)
    assert _types(updating.conditions)["Reconciling"] == (T, OperationReason.SPEC_UPDATING)

    op = _operation(updating.to_api())
    done = lifecycle.succeeded(op, message="Talos v1.14.4 is installed", now=LATER)
    _shape_holds(done.conditions, 3)
    ready = conditions.find(done.conditions, "Ready")
    assert ready is not None
    assert (ready.status, ready.reason, ready.message) == (
        T, Reason.SUCCEEDED, "Talos v1.14.4 is installed"
    )  # fmt: skip
    assert ready.last_transition_time == LATER
    assert "Reconciling" not in _types(done.conditions)
    assert "Stalled" not in _types(done.conditions)


def test_a_failed_operation_is_stalled_and_not_ready_and_no_longer_reconciling() -> None:
    op = _operation()
    running = lifecycle.running(
        op, job_name="j", decision=lifecycle.Decision(), job_created=True, message="runs", now=NOW
    )
    op = _operation(running.to_api())
    failed = lifecycle.failed(op, reason="JobFailed", message="the Job failed", now=LATER)
    _shape_holds(failed.conditions, 3)
    assert _types(failed.conditions)["Stalled"] == (T, "JobFailed")
    assert _types(failed.conditions)["Ready"] == (F, "JobFailed")
    assert "Reconciling" not in _types(failed.conditions)
    stalled = conditions.find(failed.conditions, "Stalled")
    assert stalled is not None
    assert stalled.message == "the Job failed"


def test_a_refused_operation_names_the_rule_in_stalled() -> None:
    failed = lifecycle.failed(
        _operation(), reason=Rule.NOT_NEWER, message="refused: skips", now=NOW, refused=True
    )
    assert _types(failed.conditions)["Stalled"] == (T, Rule.NOT_NEWER.value)


def test_a_user_written_summary_in_the_status_is_replaced_by_the_executors() -> None:
    """Status is the operator's (the webhook refuses anyone else's status write); even
    so a forged Stalled/Ready in what the executor reads does not survive its write."""
    forged = {
        "phase": "Running",
        "conditions": [
            {"type": "Stalled", "status": "True", "reason": "Forged", "message": "x",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Ready", "status": "True", "reason": "Forged", "message": "x",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
    }  # fmt: skip
    written = lifecycle.running(
        _operation(forged),
        job_name="j",
        decision=lifecycle.Decision(),
        job_created=True,
        message="runs",
        now=NOW,
    )
    by_type = _types(written.conditions)
    assert "Stalled" not in by_type
    assert by_type["Ready"] == (U, OperationReason.JOB_RUNNING)
    assert by_type["Reconciling"] == (T, OperationReason.JOB_RUNNING)


@pytest.mark.parametrize("phase", list(Phase))
def test_every_phase_has_exactly_the_shape(phase: Phase) -> None:
    ready, reconciling, stalled = lifecycle.summary(phase, (), generation=5)
    assert ready.type == "Ready"
    assert ready.observed_generation == 5
    assert ready.status == {Phase.SUCCEEDED: T, Phase.FAILED: F}.get(phase, U)
    assert (reconciling is not None) == (phase in (Phase.PENDING, Phase.RUNNING))
    assert (stalled is not None) == (phase is Phase.FAILED)


# --- TalosCluster -----------------------------------------------------------------------


def test_a_settled_cluster_is_ready_with_neither_reconciling_nor_stalled() -> None:
    outcome = run()
    by_type = _types(outcome.status.conditions)
    assert by_type["Ready"] == (T, ClusterReason.OBSERVED)
    assert "Reconciling" not in by_type
    assert "Stalled" not in by_type


def test_a_cluster_reconciles_while_an_operation_is_active_and_stops_after() -> None:
    active = [
        ActiveOperation(name="b", what="kubernetes v1.36.7", phase="Pending"),
        ActiveOperation(name="a", what="talos v1.14.4", phase="Running"),
    ]

    def go(ops: list[ActiveOperation], previous: TalosClusterStatus | None = None) -> Outcome:
        return evaluate(
            spec=spec(),
            generation=4,
            previous=previous or TalosClusterStatus(),
            observation=seen(),
            failure=None,
            installation=LISTED,
            now=NOW,
            active=ops,
        )

    busy = go(active)
    reconciling = next(c for c in busy.status.conditions if c.type == Type.RECONCILING)
    assert (reconciling.status, reconciling.reason) == (T, ClusterReason.OPERATION_ACTIVE)
    assert reconciling.message == "TalosOperation a (talos v1.14.4) is Running; 1 more wait"
    assert reconciling.observed_generation == 4
    assert all(c.observed_generation == 4 for c in busy.status.conditions)
    done = go([], previous=busy.status)
    assert "Reconciling" not in _types(done.status.conditions)
    assert _types(done.status.conditions)["Ready"] == (T, ClusterReason.OBSERVED)


def test_a_cluster_whose_nodes_differ_reconciles_and_keeps_ready_as_before() -> None:
    outcome = run(observation=seen(talos=("v1.13.2", "v1.14.3")))
    by_type = _types(outcome.status.conditions)
    assert by_type["Ready"] == (T, ClusterReason.NODES_DIFFER)  # unchanged meaning
    assert by_type["Reconciling"] == (T, ClusterReason.NODES_DIFFER)


@pytest.mark.parametrize(
    "cluster",
    [
        spec(talosVersion="banana"),
        spec(versionContract="v1.14.0"),
        spec(cni={"preset": "weave"}),
        spec(talosVersion=None),
        {},
    ],
)
def test_a_spec_no_rule_reads_is_stalled_not_reconciling(cluster: dict[str, Any]) -> None:
    outcome = run(cluster=cluster)
    by_type = _types(outcome.status.conditions)
    assert by_type["Stalled"] == (T, ClusterReason.INVALID_SPEC)
    assert "Reconciling" not in by_type
    stalled = next(c for c in outcome.status.conditions if c.type == Type.STALLED)
    assert stalled.message.startswith("spec.")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"spec": "x", "status": 3},
        {"spec": {"clusterRef": "prod"}},
        {"spec": {"clusterRef": {"name": 7}}},
        {"spec": {"clusterRef": {"name": "prod"}}, "status": {"phase": "Succeeded"}},
        {"spec": {"clusterRef": {"name": "prod"}}, "status": {"phase": "Failed"}},
        {"spec": {"clusterRef": {"name": "prod"}}, "status": {"phase": ["Running"]}},
    ],
)
def test_an_operation_that_is_not_active_or_unreadable_is_not_counted(body: Any) -> None:
    assert ActiveOperation.from_body(body) is None


def test_an_operation_without_a_phase_counts_as_pending() -> None:
    found = ActiveOperation.from_body(
        {"metadata": {"name": "up"}, "spec": {"clusterRef": {"name": "prod"}, "type": "talos"}}
    )
    assert found == ("prod", ActiveOperation(name="up", what="talos", phase="Pending"))


# --- IchorInstallation ------------------------------------------------------------------


@pytest.mark.parametrize("failed", [False, True])
def test_the_installation_is_ready_exactly_when_every_list_was_listed(failed: bool) -> None:
    targets = UpgradeTargets(
        checked_at=NOW,
        talos=("v1.14.4",),
        kubernetes=("v1.36.7",),
        talos_error="registry answered 503" if failed else None,
    )
    found = decisions.check_conditions(
        targets=targets,
        latest=LatestRelease(checked_at=NOW, version="0.2.0", running="0.1.0", newer=True),
        repository="oci://example.invalid/ichor",
        generation=2,
        now=NOW,
    )
    by_type = {c.type: c for c in found}
    ready, listed = by_type["Ready"], by_type["ReleasesListed"]
    assert (ready.status, ready.reason, ready.message) == (
        listed.status, listed.reason, listed.message
    )  # fmt: skip
    assert ready.status == (F if failed else T)
    assert ready.observed_generation == 2
    assert "Reconciling" not in by_type
    assert "Stalled" not in by_type
