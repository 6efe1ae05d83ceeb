"""Each step of the auto-patch decision (``decisions.CHAIN``) and each static health gate
(``decisions.GATE_CHAIN``) on its own, and in its place in ``decide``.

Every test names the step it proves; ``test_decide_mutations`` skips each step in turn
and checks that a test naming it fails.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ichor.api.autopatch import AutoPatchComponent, Window
from ichor.api.events import AutoPatchEventReason
from ichor.api.talosoperation import Phase
from ichor.controller.autopatch import decisions as d
from ichor.controller.autopatch.health import Verdict
from ichor.controller.autopatch.policy import effective
from ichor.upgrade.rule import Component
from tests.unit.autopatch.test_decisions import (
    CLOSED,
    NOW,
    OK,
    cluster,
    decide,
    policy,
    reason,
    run,
    seen_all,
    status,
)


def look(
    c: d.Cluster | None = None,
    *,
    p: Any = None,
    runs: tuple[d.Run, ...] = (),
    fleet: d.Fleet | None = None,
    readyz: d.Probe | None = OK,
    health: tuple[Verdict, ...] | None = None,
) -> d.Look:
    return d.Look(
        cluster=c or cluster(),
        policy=p or policy(),
        runs=runs,
        fleet=fleet or d.Fleet(seen=seen_all()),
        now=NOW,
        readyz=readyz,
        health=health,
    )


def test_the_chain_holds_each_step_once_in_the_order_a_person_reads() -> None:
    assert [step.__name__ for step in d.CHAIN] == [
        "step_not_configured",
        "step_off",
        "step_invalid_settings",
        "step_failed",
        "step_suspended",
        "step_operation_running",
        "step_window_closed",
        "step_nothing_eligible",
        "step_fleet_uncounted",
        "step_fleet_busy",
        "step_health_gate",
        "step_readyz_unasked",
        "step_readyz_failing",
        "step_health_check_failing",
        "step_start",
    ]
    assert [gate.__name__ for gate in d.GATE_CHAIN] == [
        "gate_cluster_ready",
        "gate_nodes_read",
        "gate_nodes_ready",
        "gate_nodes_agree",
        "gate_nodes_on_spec",
        "gate_versions_compatible",
        "gate_release_list_current",
    ]


def test_every_step_but_the_last_passes_a_cluster_ready_to_start() -> None:
    ready = look()
    for step in d.CHAIN[:-1]:
        assert step(ready) is None, step.__name__
    for gate in d.GATE_CHAIN:
        assert gate(ready.cluster, Component.TALOS) is None, gate.__name__


# step_not_configured


def test_step_not_configured_writes_nothing() -> None:
    unset = look(p=effective(cluster=None, fleet=None))
    stop = d.step_not_configured(unset)
    assert stop is not None
    assert stop.reason is None
    assert not stop.needs_probe


def test_step_not_configured_in_decide_leaves_no_status() -> None:
    decision = decide(p=effective(cluster=None, fleet=None))
    assert (decision.status, decision.condition, decision.start) == (None, None, None)


# step_off


def test_step_off_stops_without_a_component() -> None:
    stop = d.step_off(look(p=policy(components=(AutoPatchComponent.CILIUM,))))
    assert stop is not None
    assert stop.reason is d.Reason.DISABLED


def test_step_off_in_decide_is_disabled_without_the_last_run() -> None:
    old = run("auto-patch-prod-0", phase=Phase.SUCCEEDED)
    decision = decide(p=policy(windows=()), runs=[old])
    assert reason(decision) == "Disabled"
    assert decision.status is not None
    assert decision.status.last_run is None  # the settings are read before the operations
    assert decision.events == ()


# step_invalid_settings


BAD_ZONE = Window(schedule="0 2 * * *", duration="1h", time_zone="Mars/Olympus")


def test_step_invalid_settings_quotes_the_setting() -> None:
    stop = d.step_invalid_settings(look(p=policy(windows=(BAD_ZONE,))))
    assert stop is not None
    assert stop.reason is d.Reason.INVALID_SETTINGS
    assert '"Mars/Olympus"' in stop.message


def test_step_invalid_settings_in_decide_stops_before_the_failure() -> None:
    failed = run("auto-patch-prod-1", phase=Phase.FAILED)
    decision = decide(p=policy(windows=(BAD_ZONE,)), runs=[failed])
    assert reason(decision) == "InvalidSettings"
    assert decision.halt is None


# step_failed


def test_step_failed_suspends_with_one_event_and_a_halt() -> None:
    stop = d.step_failed(look(runs=(run("auto-patch-prod-1", phase=Phase.FAILED),)))
    assert stop is not None
    assert stop.reason is d.Reason.FAILED
    assert [e.reason for e in stop.events] == [AutoPatchEventReason.FAILED]
    assert stop.halt is not None
    assert stop.halt == stop.keep_halt
    assert stop.status is not None
    assert stop.status.suspension is not None


def test_step_failed_passes_a_failure_resumed_or_not_auto_patchs() -> None:
    failed = run("auto-patch-prod-1", phase=Phase.FAILED)
    assert d.step_failed(look(cluster(resume="auto-patch-prod-1"), runs=(failed,))) is None
    assert d.step_failed(look(runs=(run("by-nadia", phase=Phase.FAILED, auto=False),))) is None


def test_step_failed_in_decide_starts_nothing() -> None:
    decision = decide(runs=[run("auto-patch-prod-1", phase=Phase.FAILED)])
    assert reason(decision) == "PatchFailed"
    assert decision.start is None


# step_suspended


def test_step_suspended_stops_with_the_way_to_resume() -> None:
    stop = d.step_suspended(look(p=policy(suspended=True)))
    assert stop is not None
    assert stop.reason is d.Reason.SUSPENDED
    assert "ichor autopatch resume prod -n ns" in stop.message


def test_step_suspended_in_decide_starts_nothing() -> None:
    decision = decide(p=policy(suspended=True))
    assert reason(decision) == "Suspended"
    assert decision.start is None


# step_operation_running


def test_step_operation_running_names_each_active_operation() -> None:
    active = (run("b", phase=Phase.RUNNING), run("a", phase=None, type_="kubernetes"))
    stop = d.step_operation_running(look(runs=active))
    assert stop is not None
    assert stop.reason is d.Reason.OPERATION_RUNNING
    assert "a (kubernetes to v1.14.5), b (talos to v1.14.5)" in stop.message
    assert d.step_operation_running(look(runs=(run("c", phase=Phase.SUCCEEDED),))) is None


def test_step_operation_running_in_decide_waits() -> None:
    decision = decide(runs=[run("by-nadia", phase=Phase.PENDING, auto=False)])
    assert reason(decision) == "OperationRunning"
    assert decision.start is None


# step_window_closed


def test_step_window_closed_names_the_next_window() -> None:
    stop = d.step_window_closed(look(p=policy(windows=(CLOSED,))))
    assert stop is not None
    assert stop.reason is d.Reason.WINDOW_CLOSED
    assert "2026-06-01 12:00 UTC to 2026-06-01 13:00 UTC" in stop.message


def test_step_window_closed_in_decide_wakes_at_the_opening() -> None:
    decision = decide(p=policy(windows=(CLOSED,)))
    assert reason(decision) == "WindowClosed"
    assert decision.wake_at == NOW.replace(hour=12, minute=0)


# step_nothing_eligible


def test_step_nothing_eligible_says_why() -> None:
    stop = d.step_nothing_eligible(look(cluster(status(talos_patch=(), kubernetes_patch=()))))
    assert stop is not None
    assert stop.reason is d.Reason.UP_TO_DATE
    assert "no newer patch of the running minor is offered" in stop.message


def test_step_nothing_eligible_in_decide_is_up_to_date() -> None:
    decision = decide(cluster(status(talos_patch=(), kubernetes_patch=())))
    assert reason(decision) == "UpToDate"
    assert decision.start is None


# step_fleet_uncounted


def test_step_fleet_uncounted_starts_nothing_on_a_guess() -> None:
    uncounted = d.Fleet(seen=seen_all(), uncounted=True, max_concurrent=50)
    stop = d.step_fleet_uncounted(look(fleet=uncounted))
    assert stop is not None
    assert stop.reason is d.Reason.FLEET_BUSY
    assert "could not be counted" in stop.message


def test_step_fleet_uncounted_in_decide_waits() -> None:
    decision = decide(fleet=d.Fleet(seen=seen_all(), uncounted=True, max_concurrent=50))
    assert reason(decision) == "FleetBusy"
    assert decision.start is None


# step_fleet_busy


def test_step_fleet_busy_counts_the_other_clusters() -> None:
    busy = d.Fleet(seen=seen_all(), busy=frozenset({"ns/edge"}), max_concurrent=1)
    stop = d.step_fleet_busy(look(fleet=busy))
    assert stop is not None
    assert stop.reason is d.Reason.FLEET_BUSY
    itself = d.Fleet(seen=seen_all(), busy=frozenset({"ns/prod"}), max_concurrent=1)
    assert d.step_fleet_busy(look(fleet=itself)) is None


def test_step_fleet_busy_in_decide_waits() -> None:
    decision = decide(fleet=d.Fleet(seen=seen_all(), busy=frozenset({"ns/a"}), max_concurrent=1))
    assert reason(decision) == "FleetBusy"
    assert decision.start is None


# step_health_gate


def test_step_health_gate_answers_with_the_first_gate_shut() -> None:
    stop = d.step_health_gate(look(cluster(status(ready="False", compatible="False"))))
    assert stop is not None
    assert stop.reason is d.Reason.CLUSTER_NOT_READY
    assert stop.message.startswith("Talos v1.14.5 waits for a health gate: the cluster is not")


def test_step_health_gate_in_decide_posts_one_blocked_event() -> None:
    decision = decide(cluster(status(ready="False")))
    assert reason(decision) == "ClusterNotReady"
    assert [e.reason for e in decision.events] == [AutoPatchEventReason.BLOCKED]


# step_readyz_unasked


def test_step_readyz_unasked_asks_for_the_probe() -> None:
    stop = d.step_readyz_unasked(look(readyz=None))
    assert stop is not None
    assert stop.reason is None
    assert stop.needs_probe


def test_step_readyz_unasked_in_decide_needs_the_probe() -> None:
    decision = decide(probe=None)
    assert decision.needs_probe
    assert decision.start is None


# step_readyz_failing


def test_step_readyz_failing_quotes_the_answer() -> None:
    stop = d.step_readyz_failing(look(readyz=d.Probe(ok=False, message="answered 500")))
    assert stop is not None
    assert stop.reason is d.Reason.WORKLOAD_NOT_READY
    assert stop.message.endswith("/readyz answered 500")


def test_step_readyz_failing_in_decide_is_a_gate() -> None:
    decision = decide(probe=d.Probe(ok=False, message="answered 500"))
    assert reason(decision) == "WorkloadNotReady"
    assert decision.start is None


# step_health_check_failing


FAILING = (Verdict(name="ok", ok=True), Verdict(name="pods", ok=False, message="pods pending"))


def test_step_health_check_failing_quotes_the_first_failure() -> None:
    stop = d.step_health_check_failing(look(health=FAILING))
    assert stop is not None
    assert stop.reason is d.Reason.HEALTH_CHECK_FAILED
    assert "pods pending" in stop.message


def test_step_health_check_failing_in_decide_is_a_gate() -> None:
    decision = d.decide(
        cluster=cluster(), policy=policy(), runs=(), fleet=d.Fleet(seen=seen_all()),
        now=NOW, readyz=OK, health=FAILING,
    )  # fmt: skip
    assert reason(decision) == "HealthCheckFailed"
    assert decision.start is None


# step_start


def test_step_start_always_answers_with_the_picked_patch() -> None:
    stop = d.step_start(look())
    assert stop is not None
    assert stop.reason is d.Reason.STARTED
    assert stop.start is not None
    assert (stop.start.component, stop.start.version) == (Component.TALOS, "v1.14.5")


def test_step_start_in_decide_starts() -> None:
    decision = decide()
    assert reason(decision) == "Started"
    assert decision.start is not None


# The static health gates


@pytest.mark.parametrize(
    ("gate", "kwargs", "not_ready", "shut"),
    [
        ("gate_cluster_ready", {"ready": "False"}, (), "ClusterNotReady"),
        ("gate_nodes_read", {}, None, "NodesNotReady"),
        ("gate_nodes_ready", {}, ("cp-1",), "NodesNotReady"),
        ("gate_nodes_agree", {"differ": True}, (), "NodesDiffer"),
        ("gate_nodes_on_spec", {"talos": "v1.14.2"}, (), "NodesDiffer"),
        ("gate_versions_compatible", {"compatible": "False"}, (), "VersionsIncompatible"),
        ("gate_release_list_current", {"stale": True}, (), "ReleaseListStale"),
    ],
    ids=str,
)
def test_each_gate_on_its_own_and_in_decide(
    gate: str, kwargs: dict[str, Any], not_ready: tuple[str, ...] | None, shut: str
) -> None:
    target = cluster(status(**kwargs), not_ready=not_ready)
    answer = getattr(d, gate)(target, Component.TALOS)
    assert answer is not None
    assert answer[0] == shut
    assert getattr(d, gate)(cluster(), Component.TALOS) is None
    assert reason(decide(target)) == shut


def test_gate_release_list_current_judges_the_picked_component() -> None:
    unread = cluster(status(available=False))
    assert d.gate_release_list_current(unread, Component.KUBERNETES) is None
    shut = d.gate_release_list_current(unread, Component.TALOS)
    assert shut is not None
    assert shut[0] is d.Reason.RELEASE_LIST_STALE


def test_a_resumed_event_comes_only_once_the_failure_check_passed() -> None:
    failed = run("auto-patch-prod-1", phase=Phase.FAILED)
    suspended = decide(runs=[failed])
    assert suspended.status is not None
    record = status(auto_patch=suspended.status)
    resumed = decide(cluster(record, resume="auto-patch-prod-1"), runs=[failed])
    assert [e.reason for e in resumed.events] == [AutoPatchEventReason.RESUMED]
    off = decide(cluster(record, resume="auto-patch-prod-1"), runs=[failed], p=policy(windows=()))
    assert off.events == ()
    later = NOW + timedelta(hours=5)  # the window has closed: waiting, and resumed
    closed = decide(cluster(record, resume="auto-patch-prod-1"), runs=[failed], now=later)
    assert reason(closed) == "WindowClosed"
    assert [e.reason for e in closed.events] == [AutoPatchEventReason.RESUMED]
