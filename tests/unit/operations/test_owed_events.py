"""The Events each step of an operation owes (``lifecycle.owed_events``): written with the
status of that step, so a restart finds them; keyed so that the same step is one Event."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ichor.api import owed
from ichor.api.conditions import OperationReason
from ichor.api.talosoperation import TalosOperationStatus
from ichor.controller.talosoperation import lifecycle
from ichor.controller.talosoperation.lifecycle import Operation
from ichor.release.refusals import Rule
from tests.unit.operations.test_lifecycle import cluster, operation

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def _reasons(found: dict[str, owed.OwedEvent]) -> dict[str, str | None]:
    return {event.reason: event.about for event in found.values()}


def _after(op: Operation, status: TalosOperationStatus) -> Operation:
    """The operation as read once ``status`` was written."""
    body: dict[str, Any] = dict(op.body)
    body["status"] = status.to_api()
    return Operation.from_body(body)


def _claim(op: Operation, decision: lifecycle.Decision | None = None) -> TalosOperationStatus:
    return lifecycle.running(
        op, job_name="j", decision=decision or lifecycle.Decision(), job_created=False,
        message="Job j is being created", now=NOW,
    )  # fmt: skip


def _runs(op: Operation, message: str = "Job j runs talosctl upgrade") -> TalosOperationStatus:
    return lifecycle.running(
        op, job_name="j", decision=lifecycle.Decision(), job_created=True, message=message,
        now=NOW,
    )  # fmt: skip


def test_a_plain_run_owes_started_then_succeeded_each_once_on_the_operation_and_cluster() -> None:
    op = operation()
    checking = lifecycle.pending(op, reason=OperationReason.CHECKING, message="checks", now=NOW)
    assert lifecycle.owed_events(op, checking, now=NOW) == {}
    op = _after(op, checking)
    claim = _claim(op)
    assert lifecycle.owed_events(op, claim, now=NOW) == {}  # no Job yet: nothing started
    op = _after(op, claim)
    runs = _runs(op)
    started = lifecycle.owed_events(op, runs, now=NOW)
    assert _reasons(started) == {"Started": None, "UpgradeStarted": owed.CLUSTER}
    messages = {e.reason: e.message for e in started.values()}
    assert messages["Started"] == "Job j runs talosctl upgrade"
    assert messages["UpgradeStarted"] == (
        "TalosOperation team-a/op started: Job j runs talosctl upgrade"
    )
    op = _after(op, runs)
    # following the Job writes its progress: started already, nothing more owed
    assert lifecycle.owed_events(op, _runs(op, "Job j runs: step 2 of 3"), now=NOW) == {}
    spec = lifecycle.spec_updating(op, message="the spec moves next", now=NOW)
    assert lifecycle.owed_events(op, spec, now=NOW) == {}
    op = _after(op, spec)
    done = lifecycle.succeeded(op, message="Talos v1.14.4 is installed", now=NOW)
    ended = lifecycle.owed_events(op, done, now=NOW)
    assert _reasons(ended) == {"Succeeded": None, "UpgradeSucceeded": owed.CLUSTER}
    assert {e.type for e in ended.values()} == {"Normal"}
    # a second look at the ended operation owes nothing
    assert lifecycle.owed_events(_after(op, done), done, now=NOW) == {}


def test_the_keys_are_the_operation_and_the_reason_so_a_step_taken_again_is_one_event() -> None:
    op = _after(operation(), _claim(operation()))
    first = lifecycle.owed_events(op, _runs(op), now=NOW)
    # the same step computed again after a restart (another moment, another message)
    again = lifecycle.owed_events(op, _runs(op, "Job j runs"), now=datetime.now(UTC))
    assert first.keys() == again.keys()
    other = operation("other")
    assert (
        lifecycle.owed_events(_after(other, _claim(other)), _runs(other), now=NOW).keys()
        & (first.keys())
        == set()
    )


def test_a_job_found_after_a_restart_still_owes_started() -> None:
    """Before, Started was posted only when this process's create made the Job: a restart
    between the create and the JobRunning write posted none."""
    op = _after(operation(), _claim(operation()))
    found = lifecycle.owed_events(op, _runs(op, "Job j runs"), now=NOW)
    assert set(_reasons(found)) == {"Started", "UpgradeStarted"}


def test_the_override_is_owed_by_the_claim_before_the_job_exists() -> None:
    op = operation(override=True)
    refusal = lifecycle.check_execution(op, cluster(observed={"kubernetesVersion": "v1.32.4"}))
    decision = lifecycle.decide(refusal, override=True)
    claim = _claim(op, decision)
    found = lifecycle.owed_events(op, claim, now=NOW)
    assert _reasons(found) == {"Override": None}
    (event,) = found.values()
    assert event.type == "Warning"
    assert event.message.startswith("TalosOperation team-a/op runs under override: true, ")
    assert "TalosKubernetes" in event.message
    # the Job's write does not owe it again
    op = _after(op, claim)
    assert "Override" not in _reasons(lifecycle.owed_events(op, _runs(op), now=NOW))


def test_a_refusal_owes_refused_on_the_operation_only() -> None:
    op = operation()
    status = lifecycle.failed(op, reason=Rule.NOT_NEWER, message="refused", now=NOW, refused=True)
    assert _reasons(lifecycle.owed_events(op, status, now=NOW)) == {"Refused": None}


def test_a_failure_owes_failed_and_the_clusters_upgrade_failed_as_warnings() -> None:
    op = _after(operation(), _runs(_after(operation(), _claim(operation()))))
    status = lifecycle.failed(op, reason=OperationReason.JOB_FAILED, message="boom", now=NOW)
    found = lifecycle.owed_events(op, status, now=NOW)
    assert _reasons(found) == {"Failed": None, "UpgradeFailed": owed.CLUSTER}
    assert {e.type for e in found.values()} == {"Warning"}
    assert {e.message for e in found.values()} == {"boom", "TalosOperation team-a/op failed: boom"}


def test_waiting_is_owed_each_time_the_operation_ahead_changes() -> None:
    op = operation()
    first = lifecycle.pending(op, reason=OperationReason.WAITING, message="waits for a", now=NOW)
    found = lifecycle.owed_events(op, first, now=NOW)
    assert _reasons(found) == {"Waiting": None}
    op = _after(op, first)
    assert lifecycle.owed_events(op, first, now=NOW) == {}
    second = lifecycle.pending(op, reason=OperationReason.WAITING, message="waits for b", now=NOW)
    more = lifecycle.owed_events(op, second, now=NOW)
    assert _reasons(more) == {"Waiting": None}
    assert more.keys() != found.keys()


def test_an_operation_deleted_while_running_owes_stopped_on_its_cluster() -> None:
    op = _after(operation(deleting=True), _runs(_after(operation(), _claim(operation()))))
    status = lifecycle.stopped(op, message="deleted while Running", now=NOW)
    assert _reasons(status.pending_events or {}) == {"Stopped": owed.CLUSTER}
    assert status.phase is op.phase  # nothing else moves


def test_owed_events_already_stored_are_kept_by_every_later_step() -> None:
    """A write that owes more keeps what an earlier write owes and was not posted yet."""
    op = _after(operation(), _claim(operation()))
    runs = _runs(op)
    owes = lifecycle.owed_events(op, runs, now=NOW)
    stored = runs.model_copy(update={"pending_events": owes})
    op = _after(op, stored)
    assert op.status.pending_events == owes
    later = lifecycle.succeeded(op, message="ok", now=NOW)
    assert later.pending_events == owes
