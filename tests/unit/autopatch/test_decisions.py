"""The auto-patch decision with an injected clock: windows, the order of components,
minReleaseAge edges, the gates, failures, resume, the fleet's halt and limit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ichor.api.autopatch import (
    AutoPatchComponent,
    AutoPatchSpec,
    AutoPatchStatus,
    FleetAutoPatchSpec,
    FleetAutoPatchStatus,
    Halt,
    SeenRelease,
    Window,
)
from ichor.api.conditions import Condition, ConditionStatus
from ichor.api.events import AutoPatchEventReason
from ichor.api.taloscluster import (
    ChoiceGroup,
    NodeVersions,
    TalosClusterSpec,
    TalosClusterStatus,
    UpgradeChoices,
)
from ichor.api.talosoperation import Failure, Phase
from ichor.controller.autopatch import decisions as d
from ichor.controller.autopatch.policy import effective, max_concurrent
from ichor.upgrade.rule import Component

NOW = datetime(2026, 6, 1, 2, 30, tzinfo=UTC)  # inside 02:00-06:00 UTC
LONG_AGO = NOW - timedelta(days=30)
OPEN = Window(schedule="0 2 * * *", duration="4h")
CLOSED = Window(schedule="0 12 * * *", duration="1h")
SPEC = TalosClusterSpec(
    talos_version="v1.14.3", kubernetes_version="v1.36.6", version_contract="v1.14"
)


def cond(type_: str, status: str = "True", message: str = "") -> Condition:
    return Condition(
        type=type_, status=ConditionStatus(status), reason="R", message=message,
        last_transition_time=LONG_AGO,
    )  # fmt: skip


def status(
    *,
    talos_patch: Sequence[str] = ("v1.14.5", "v1.14.4"),
    kubernetes_patch: Sequence[str] = ("v1.36.7",),
    next_minor: Sequence[str] = (),
    ready: str = "True",
    compatible: str = "True",
    differ: bool = False,
    talos: str = "v1.14.3",
    available: bool = True,
    stale: bool = False,
    auto_patch: AutoPatchStatus | None = None,
    extra: Sequence[Condition] = (),
) -> TalosClusterStatus:
    return TalosClusterStatus(
        talos_version=talos,
        kubernetes_version="v1.36.6",
        nodes=NodeVersions(
            count=3, talos_versions=(talos,), kubernetes_versions=("v1.36.6",), differ=differ
        ),
        upgrade_choices=UpgradeChoices(
            talos=ChoiceGroup(
                patch=tuple(talos_patch), next_minor=tuple(next_minor), available=available,
                unavailable_reason=None if available and not stale
                else "the release check failed: 503" if not available
                else "the last release listing failed (GitHub answered 503), so the list may "
                "be stale",
            ),
            kubernetes=ChoiceGroup(patch=tuple(kubernetes_patch), available=True),
        ),
        auto_patch=auto_patch,
        conditions=(cond("Ready", ready, "Observed"), cond("VersionsCompatible", compatible),
                    *extra),
    )  # fmt: skip


def cluster(
    st: TalosClusterStatus | None = None,
    *,
    resume: str | None = None,
    not_ready: tuple[str, ...] | None = (),
) -> d.Cluster:
    return d.Cluster(
        namespace="ns", name="prod", spec=SPEC, status=st or status(), resume=resume,
        not_ready=not_ready,
    )  # fmt: skip


def policy(**own: Any) -> Any:
    own.setdefault("components", (AutoPatchComponent.TALOS, AutoPatchComponent.KUBERNETES))
    own.setdefault("windows", (OPEN,))
    own.setdefault("min_release_age", "72h")
    return effective(cluster=AutoPatchSpec(**own), fleet=None)


def seen_all(age: timedelta = timedelta(days=30)) -> dict[tuple[str, str], datetime]:
    versions = {"talos": ["v1.14.4", "v1.14.5", "v1.15.0"], "kubernetes": ["v1.36.7"]}
    return {(c, v): NOW - age for c, vs in versions.items() for v in vs}


def run(
    name: str,
    *,
    phase: Phase | None,
    type_: str = "talos",
    version: str = "v1.14.5",
    auto: bool = True,
    created: datetime = NOW - timedelta(minutes=10),
    message: str | None = None,
    failure: Failure | None = None,
) -> d.Run:
    """An operation of the cluster; a Failed one ran on its nodes and failed unless
    ``failure`` says otherwise."""
    if phase is Phase.FAILED and failure is None:
        failure = Failure.UPGRADE_FAILED
    return d.Run(
        name=name, type=type_, version=version, phase=phase, created=created, auto_patch=auto,
        message=message, failure=failure,
    )  # fmt: skip


OK = d.Probe(ok=True)


def decide(
    c: d.Cluster | None = None,
    *,
    p: Any = None,
    runs: Sequence[d.Run] = (),
    fleet: d.Fleet | None = None,
    now: datetime = NOW,
    probe: d.Probe | None = OK,
) -> d.Decision:
    return d.decide(
        cluster=c or cluster(),
        policy=p or policy(),
        runs=runs,
        fleet=fleet or d.Fleet(seen=seen_all()),
        now=now,
        readyz=probe,
    )


def reason(decision: d.Decision) -> str:
    assert decision.condition is not None
    assert decision.status is not None
    assert decision.status.reason == decision.condition.reason
    return decision.condition.reason


def test_an_open_window_starts_the_newest_talos_patch_first() -> None:
    decision = decide()
    assert decision.start is not None
    assert (decision.start.component, decision.start.version) == (Component.TALOS, "v1.14.5")
    assert decision.start.attempt == "1"
    assert reason(decision) == "Started"
    assert decision.condition
    assert decision.condition.status == ConditionStatus.TRUE
    assert decision.status
    assert decision.status.window_open
    assert decision.status.next_window
    assert decision.status.next_window.end == NOW.replace(hour=6, minute=0)
    assert "2026-06-01 02:00 UTC to 2026-06-01 06:00 UTC" in decision.start.reason


def test_kubernetes_comes_once_talos_has_no_patch_left() -> None:
    decision = decide(cluster(status(talos_patch=())))
    assert decision.start is not None
    assert (decision.start.component, decision.start.version) == (Component.KUBERNETES, "v1.36.7")


def test_only_the_listed_components_are_patched_and_cilium_selects_nothing() -> None:
    decision = decide(p=policy(components=(AutoPatchComponent.KUBERNETES,)))
    assert decision.start is not None
    assert decision.start.component is Component.KUBERNETES
    only_cilium = decide(p=policy(components=(AutoPatchComponent.CILIUM,)))
    assert only_cilium.start is None
    assert reason(only_cilium) == "Disabled"


def test_a_closed_window_starts_nothing_and_wakes_at_the_next_opening() -> None:
    decision = decide(p=policy(windows=(CLOSED,)))
    assert decision.start is None
    assert reason(decision) == "WindowClosed"
    assert decision.wake_at == NOW.replace(hour=12, minute=0)
    assert decision.status
    assert not decision.status.window_open
    assert decision.status.next_window
    assert decision.status.next_window.start == decision.wake_at


def test_a_next_minor_is_never_taken() -> None:
    decision = decide(cluster(status(talos_patch=(), kubernetes_patch=(), next_minor=("v1.15.0",))))
    assert decision.start is None
    assert reason(decision) == "UpToDate"


def test_another_operation_pending_or_running_starts_nothing_whoever_started_it() -> None:
    for phase in (None, Phase.PENDING, Phase.RUNNING):
        person = run("by-nadia", phase=phase, auto=False)
        decision = decide(runs=[person])
        assert decision.start is None
        assert reason(decision) == "OperationRunning"
        assert "by-nadia" in (decision.condition.message if decision.condition else "")


@pytest.mark.parametrize(
    ("age", "taken"),
    [
        (timedelta(hours=72), "v1.14.5"),  # exactly minReleaseAge: taken
        (timedelta(hours=72) - timedelta(seconds=1), None),
    ],
)
def test_min_release_age_edges(age: timedelta, taken: str | None) -> None:
    seen = {("talos", "v1.14.5"): NOW - age, ("talos", "v1.14.4"): NOW - age}
    decision = decide(
        cluster(status(kubernetes_patch=())),
        fleet=d.Fleet(seen=seen),
    )
    if taken:
        assert decision.start is not None
        assert decision.start.version == taken
    else:
        assert decision.start is None
        assert reason(decision) == "WaitingForReleaseAge"
        assert decision.wake_at == NOW + timedelta(seconds=1)
        assert "younger than minReleaseAge 72h" in (decision.status.message or "")  # type: ignore[union-attr]


def test_a_young_newest_patch_leaves_the_older_ripe_one() -> None:
    seen = {("talos", "v1.14.5"): NOW - timedelta(hours=1), ("talos", "v1.14.4"): LONG_AGO}
    decision = decide(fleet=d.Fleet(seen=seen))
    assert decision.start is not None
    assert decision.start.version == "v1.14.4"


def test_a_version_never_seen_is_not_ripe() -> None:
    decision = decide(cluster(status(kubernetes_patch=())), fleet=d.Fleet(seen={}))
    assert decision.start is None
    assert reason(decision) == "WaitingForReleaseAge"


def test_zero_min_release_age_takes_a_patch_seen_now() -> None:
    seen = {("talos", "v1.14.5"): NOW}
    decision = decide(p=policy(min_release_age="0m"), fleet=d.Fleet(seen=seen))
    assert decision.start is not None
    assert decision.start.version == "v1.14.5"


def test_a_halted_version_is_skipped_for_the_older_patch_and_alone_it_halts() -> None:
    halt = Halt(
        component="talos", version="v1.14.5", cluster="ns/edge", operation="op-1",
        reason="Job failed", time=NOW, until=NOW + timedelta(hours=1),
    )  # fmt: skip
    fleet = d.Fleet(seen=seen_all(), halts=(halt,))
    decision = decide(fleet=fleet)
    assert decision.start is not None
    assert decision.start.version == "v1.14.4"
    alone = decide(cluster(status(talos_patch=("v1.14.5",), kubernetes_patch=())), fleet=fleet)
    assert alone.start is None
    assert reason(alone) == "Halted"
    assert "failed on ns/edge (op-1)" in (alone.status.message or "")  # type: ignore[union-attr]
    # once the window it failed in is over, the halt is gone
    later = decide(
        cluster(status(talos_patch=("v1.14.5",), kubernetes_patch=())),
        fleet=fleet, now=NOW + timedelta(hours=1),
    )  # fmt: skip
    assert later.start is not None
    assert later.start.version == "v1.14.5"


def test_the_fleet_limit_counts_other_clusters_only() -> None:
    busy = d.Fleet(seen=seen_all(), busy=frozenset({"ns/edge"}), max_concurrent=1)
    decision = decide(fleet=busy)
    assert decision.start is None
    assert reason(decision) == "FleetBusy"
    two = d.Fleet(seen=seen_all(), busy=frozenset({"ns/edge"}), max_concurrent=2)
    assert decide(fleet=two).start is not None
    itself = d.Fleet(seen=seen_all(), busy=frozenset({"ns/prod"}), max_concurrent=1)
    assert decide(fleet=itself).start is not None


@pytest.mark.parametrize(
    ("kwargs", "not_ready", "gate"),
    [
        ({"ready": "False"}, (), "ClusterNotReady"),
        ({}, ("cp-1",), "NodesNotReady"),
        ({}, None, "NodesNotReady"),
        ({"differ": True}, (), "NodesDiffer"),
        ({"talos": "v1.14.2"}, (), "NodesDiffer"),  # the nodes do not run the spec yet
        ({"compatible": "False"}, (), "VersionsIncompatible"),
        ({"stale": True}, (), "ReleaseListStale"),
    ],
)
def test_each_health_gate_stops_the_start_with_its_name(
    kwargs: dict[str, Any], not_ready: tuple[str, ...] | None, gate: str
) -> None:
    decision = decide(cluster(status(**kwargs), not_ready=not_ready))
    assert decision.start is None
    assert reason(decision) == gate
    assert decision.condition
    assert decision.condition.status == ConditionStatus.FALSE
    (event,) = decision.events
    assert (event.type, event.reason) == ("Warning", AutoPatchEventReason.BLOCKED)
    assert event.message == decision.condition.message


def test_a_failing_gate_posts_its_event_once() -> None:
    first = decide(cluster(status(ready="False")))
    assert len(first.events) == 1
    assert first.condition is not None
    again = decide(cluster(status(ready="False", extra=(first.condition,))))
    assert again.events == ()


def test_a_stale_release_list_stops_that_component_only() -> None:
    decision = decide(cluster(status(available=False)))
    assert decision.start is not None
    assert decision.start.component is Component.KUBERNETES
    alone = decide(cluster(status(available=False, kubernetes_patch=())))
    assert alone.start is None
    assert reason(alone) == "ReleaseListStale"
    assert "503" in (alone.status.message or "")  # type: ignore[union-attr]


def test_a_list_whose_last_listing_failed_holds_the_start_as_a_gate() -> None:
    """The list was recorded once, so it is still offered (``available``), but its last
    listing failed: a patch it offers may not be the newest, or may be withdrawn."""
    decision = decide(cluster(status(stale=True)))
    assert decision.start is None
    assert reason(decision) == "ReleaseListStale"
    message = decision.condition.message if decision.condition else ""
    assert message.startswith("Talos v1.14.5 waits for a health gate: the Talos release list")
    assert "GitHub answered 503" in message
    assert [e.reason for e in decision.events] == [AutoPatchEventReason.BLOCKED]
    assert not decide(cluster(status(stale=True)), probe=None).needs_probe  # no request


def test_the_readyz_probe_comes_last_and_a_failure_is_a_gate() -> None:
    assert decide(probe=None).needs_probe
    assert not decide(p=policy(windows=(CLOSED,)), probe=None).needs_probe
    failed = decide(probe=d.Probe(ok=False, message="answered 500: etcd failed"))
    assert failed.start is None
    assert reason(failed) == "WorkloadNotReady"
    assert "etcd failed" in (failed.status.message or "")  # type: ignore[union-attr]


def test_a_failed_auto_patch_suspends_the_cluster_and_halts_the_version_once() -> None:
    failed = run(
        "auto-patch-prod-1", phase=Phase.FAILED, message="Job failed: node cp-1 did not boot"
    )
    decision = decide(runs=[failed])
    assert decision.start is None
    assert reason(decision) == "PatchFailed"
    assert decision.status
    assert decision.status.suspension
    assert decision.status.suspension.operation == "auto-patch-prod-1"
    assert decision.status.last_run
    assert decision.status.last_run.result == "Failed"
    (event,) = decision.events
    assert event.type == "Warning"
    assert event.reason == AutoPatchEventReason.FAILED
    assert "ichor autopatch resume prod -n ns" in event.message
    assert "ichor.dev/auto-patch-resume=auto-patch-prod-1" in event.message
    assert decision.halt is not None
    assert (decision.halt.version, decision.halt.cluster) == ("v1.14.5", "ns/prod")
    assert decision.halt.until == NOW.replace(hour=6, minute=0)  # the rest of the window
    # a restart reads the recorded suspension: no second Event, no second halt
    again = decide(cluster(status(auto_patch=decision.status)), runs=[failed])
    assert again.events == ()
    assert again.halt is None
    assert reason(again) == "PatchFailed"
    # a window that opens later starts nothing either
    tomorrow = decide(cluster(status(auto_patch=decision.status)), runs=[failed],
                      now=NOW + timedelta(days=1))  # fmt: skip
    assert tomorrow.start is None
    assert reason(tomorrow) == "PatchFailed"


def test_resume_names_the_failed_operation_and_the_retry_gets_a_new_attempt() -> None:
    failed = run("auto-patch-prod-1", phase=Phase.FAILED)
    suspended = decide(runs=[failed])
    assert suspended.status is not None
    wrong = decide(cluster(status(auto_patch=suspended.status), resume="other"), runs=[failed])
    assert reason(wrong) == "PatchFailed"
    resumed = decide(cluster(status(auto_patch=suspended.status), resume="auto-patch-prod-1"),
                     runs=[failed])  # fmt: skip
    assert resumed.start is not None
    assert resumed.start.attempt == "auto-patch-prod-1"
    assert [e.reason for e in resumed.events] == [AutoPatchEventReason.RESUMED]
    assert resumed.status is not None
    assert resumed.status.suspension is None


def test_a_failed_operation_a_person_started_suspends_nothing() -> None:
    person = run("by-nadia", phase=Phase.FAILED, auto=False)
    decision = decide(runs=[person])
    assert decision.start is not None
    assert decision.halt is None


def test_an_older_failure_under_a_newer_success_suspends_nothing() -> None:
    old = run("a", phase=Phase.FAILED, created=NOW - timedelta(days=2))
    new = run("b", phase=Phase.SUCCEEDED, created=NOW - timedelta(days=1), version="v1.14.4")
    decision = decide(runs=[old, new])
    assert decision.halt is None
    assert decision.start is not None
    assert decision.status
    assert decision.status.last_run
    assert decision.status.last_run.operation == "b"


def test_suspended_by_a_person_starts_nothing() -> None:
    decision = decide(p=policy(suspended=True))
    assert decision.start is None
    assert reason(decision) == "Suspended"


def test_not_configured_is_no_status_and_no_condition() -> None:
    decision = d.decide(
        cluster=cluster(), policy=effective(cluster=None, fleet=None), runs=(),
        fleet=d.Fleet(), now=NOW, readyz=OK,
    )  # fmt: skip
    assert decision.status is None
    assert decision.condition is None
    assert decision.start is None


def test_an_unreadable_stored_setting_stops_quoting_it() -> None:
    bad = policy(windows=(Window(schedule="0 2 * * *", duration="1h", time_zone="Mars/Olympus"),))
    decision = decide(p=bad)
    assert decision.start is None
    assert reason(decision) == "InvalidSettings"
    assert '"Mars/Olympus"' in (decision.status.message or "")  # type: ignore[union-attr]


def test_the_cluster_wins_field_by_field_over_the_fleet() -> None:
    fleet = FleetAutoPatchSpec(
        components=(AutoPatchComponent.TALOS,), windows=(CLOSED,), min_release_age="1h",
        max_concurrent_clusters=3,
    )  # fmt: skip
    own = AutoPatchSpec(windows=(OPEN,))
    merged = effective(cluster=own, fleet=fleet)
    assert merged.components == (Component.TALOS,)
    assert merged.min_release_age == timedelta(hours=1)
    assert merged.windows.open_at(NOW) is not None
    assert max_concurrent(fleet) == 3
    assert max_concurrent(None) == 1
    inherited = effective(cluster=None, fleet=fleet)
    assert inherited.windows.open_at(NOW) is None
    stopped = effective(cluster=AutoPatchSpec(suspended=True), fleet=fleet)
    assert stopped.suspended
    # an explicit empty list on the cluster turns the fleet's components off for it
    assert not effective(cluster=AutoPatchSpec(components=()), fleet=fleet).enabled


def test_seen_records_new_versions_once_and_forgets_unlisted_ones() -> None:
    first = d.record_seen((), listed={Component.TALOS: ["v1.14.5"], Component.KUBERNETES: None},
                          now=NOW)  # fmt: skip
    assert first is not None
    assert [(s.version, s.first_seen) for s in first] == [("v1.14.5", NOW)]
    later = NOW + timedelta(hours=5)
    assert d.record_seen(first, listed={Component.TALOS: ["v1.14.5"]}, now=later) is None
    grown = d.record_seen(first, listed={Component.TALOS: ["v1.14.6", "v1.14.5"]}, now=later)
    assert grown is not None
    assert d.seen_map(grown) == {("talos", "v1.14.5"): NOW, ("talos", "v1.14.6"): later}
    dropped = d.record_seen(grown, listed={Component.TALOS: ["v1.14.6"]}, now=later)
    assert dropped is not None
    assert d.seen_map(dropped) == {("talos", "v1.14.6"): later}
    kept = d.record_seen([SeenRelease(component="kubernetes", version="v1.36.7", first_seen=NOW)],
                         listed={Component.KUBERNETES: None}, now=later)  # fmt: skip
    assert kept is None


def test_a_fleet_that_could_not_be_counted_starts_nothing_and_says_so() -> None:
    decision = decide(fleet=d.Fleet(seen=seen_all(), uncounted=True, max_concurrent=50))
    assert decision.start is None
    assert reason(decision) == "FleetBusy"
    assert "could not be counted" in (decision.status.message or "")  # type: ignore[union-attr]


def test_a_busy_fleet_names_five_clusters_and_counts_the_rest() -> None:
    busy = frozenset(f"ns/c{n}" for n in range(12))
    decision = decide(fleet=d.Fleet(seen=seen_all(), busy=busy, max_concurrent=3))
    assert decision.start is None
    message = decision.status.message or ""  # type: ignore[union-attr]
    assert "12 cluster(s)" in message
    assert "and 7 more" in message


def test_while_suspended_every_look_keeps_the_halt_in_place() -> None:
    """The halt is asked for at each look while the cluster stays suspended (the
    recorder takes it once, by operation name), so a halt whose write failed is written
    at the next look; the Event stays one."""
    failed = run("auto-patch-prod-1", phase=Phase.FAILED, message="Job failed")
    first = decide(runs=[failed])
    assert first.halt is not None
    assert first.keep_halt == first.halt
    again = decide(cluster(status(auto_patch=first.status)), runs=[failed],
                   now=NOW + timedelta(minutes=5))  # fmt: skip
    assert again.halt is None
    assert again.events == ()
    assert again.keep_halt is not None
    assert (again.keep_halt.operation, again.keep_halt.version, again.keep_halt.until) == (
        "auto-patch-prod-1", "v1.14.5", first.halt.until,
    )  # fmt: skip
    # recorded and the operation marked so: nothing more to ask for
    marked = replace(failed, halt_recorded=True)
    done = decide(cluster(status(auto_patch=first.status)), runs=[marked],
                  now=NOW + timedelta(minutes=6))  # fmt: skip
    assert reason(done) == "PatchFailed"
    assert done.keep_halt is None
    # resumed: nothing is kept in place any more
    resumed = decide(cluster(status(auto_patch=first.status), resume="auto-patch-prod-1"),
                     runs=[failed])  # fmt: skip
    assert resumed.keep_halt is None


def test_a_failure_after_the_window_closed_halts_through_the_next_window() -> None:
    """Started at 02:20 in the 02:00-06:00 window, failed at 06:30 once it had closed:
    "the rest of the window" is over, so the halt lasts to the end of the next window
    (the next chance the fleet's windows give to start it again), not to 06:00, which
    is past."""
    failed = d.Run(
        name="auto-patch-prod-1", type="talos", version="v1.14.5", phase=Phase.FAILED,
        created=NOW.replace(hour=2, minute=20), auto_patch=True, message="Job failed",
        finished=NOW.replace(hour=6, minute=30), failure=Failure.UPGRADE_FAILED,
    )  # fmt: skip
    decision = decide(runs=[failed], now=NOW.replace(hour=6, minute=40))
    assert reason(decision) == "PatchFailed"
    assert decision.halt is not None
    assert decision.halt.until == NOW.replace(hour=6, minute=0) + timedelta(days=1)
    # failed inside its window: the rest of that window
    inside = replace(failed, finished=NOW.replace(hour=5))
    assert decide(runs=[inside], now=NOW.replace(hour=5, minute=5)).halt.until == NOW.replace(  # type: ignore[union-attr]
        hour=6, minute=0
    )


def test_a_failure_whose_halt_would_be_over_halts_nothing() -> None:
    failed = d.Run(
        name="auto-patch-prod-1", type="talos", version="v1.14.5", phase=Phase.FAILED,
        created=NOW - timedelta(days=3), auto_patch=True, message="Job failed",
        finished=NOW - timedelta(days=3) + timedelta(minutes=30), failure=Failure.UPGRADE_FAILED,
    )  # fmt: skip
    decision = decide(runs=[failed], now=NOW + timedelta(hours=4))  # 06:30, after today's
    assert reason(decision) == "PatchFailed"
    assert decision.halt is None
    assert decision.keep_halt is None


def _fleet_run(name: str, *, cluster: str = "ns/edge", phase: Phase | None = Phase.FAILED,
               finished: datetime | None = NOW - timedelta(minutes=1),
               failure: Failure | None = None) -> d.FleetRun:  # fmt: skip
    if phase is Phase.FAILED and failure is None:
        failure = Failure.UPGRADE_FAILED  # ran on its nodes and failed
    return d.FleetRun(
        cluster=cluster, operation=name, component="talos", version="v1.14.5", phase=phase,
        created=NOW - timedelta(minutes=20), finished=finished, failure=failure,
    )  # fmt: skip


def test_a_failed_operation_whose_halt_is_not_recorded_yet_halts_its_version() -> None:
    """Between a failure on one cluster and that cluster's next look, the fleet's listing
    (read afresh in the lock) already shows the failed operation: it halts its version."""
    failed = _fleet_run("op-edge")
    halts = d.unrecorded_halts([failed], recorded=(), now=NOW, cluster="ns/prod", resume=None)
    (halt,) = halts
    assert (halt.component, halt.version, halt.cluster, halt.operation) == (
        "talos", "v1.14.5", "ns/edge", "op-edge",
    )  # fmt: skip
    assert halt.until == NOW - timedelta(minutes=1) + d.UNRECORDED_HALT
    decision = decide(fleet=d.Fleet(seen=seen_all(), halts=halts))
    assert decision.start is not None
    assert decision.start.version == "v1.14.4"  # the older patch, as for a recorded halt
    # recorded (live or over): the record decides, not the listing
    recorded = Halt(component="talos", version="v1.14.5", cluster="ns/edge", operation="op-edge",
                    reason="x", time=NOW, until=NOW - timedelta(seconds=1))  # fmt: skip
    assert d.unrecorded_halts([failed], recorded=(recorded,), now=NOW, cluster="ns/prod",
                              resume=None) == ()  # fmt: skip
    # not failed, long over, or the cluster's own failure it resumed: no halt
    for other in (
        _fleet_run("op-ok", phase=Phase.SUCCEEDED),
        _fleet_run("op-running", phase=Phase.RUNNING),
        _fleet_run("op-old", finished=NOW - d.UNRECORDED_HALT),
    ):
        assert d.unrecorded_halts([other], recorded=(), now=NOW, cluster="ns/prod",
                                  resume=None) == ()  # fmt: skip
    marked = replace(failed, halt_recorded=True)  # its halt was recorded, then dropped
    assert d.unrecorded_halts([marked], recorded=(), now=NOW, cluster="ns/prod",
                              resume=None) == ()  # fmt: skip
    own = _fleet_run("op-prod", cluster="ns/prod")
    assert d.unrecorded_halts([own], recorded=(), now=NOW, cluster="ns/prod",
                              resume="op-prod") == ()  # fmt: skip
    assert d.unrecorded_halts([own], recorded=(), now=NOW, cluster="ns/prod", resume=None)


def test_every_write_of_the_fleet_record_drops_the_halts_that_are_over() -> None:
    over = Halt(component="talos", version="v1.14.4", cluster="ns/a", operation="op-a",
                reason="x", time=LONG_AGO, until=NOW - timedelta(seconds=1))  # fmt: skip
    live = over.model_copy(update={"version": "v1.14.5", "operation": "op-b",
                                   "until": NOW + timedelta(hours=1)})  # fmt: skip
    current = FleetAutoPatchStatus(halts=(over, live))
    seen = (SeenRelease(component="talos", version="v1.14.6", first_seen=NOW),)
    written = d.fleet_record(current, now=NOW, seen=seen)
    assert written is not None
    assert written.halts == (live,)
    assert written.seen == seen
    new = live.model_copy(update={"operation": "op-c", "version": "v1.14.6"})
    added = d.fleet_record(current, now=NOW, halt=new)
    assert added is not None
    assert added.halts == (live, new)
    assert d.fleet_record(FleetAutoPatchStatus(halts=(live,)), now=NOW, halt=live) is None
    assert d.fleet_record(current, now=NOW, halt=over) is None  # over: nothing to record
