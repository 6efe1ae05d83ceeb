"""Only an upgrade that ran and failed on its nodes halts a version, and only for whom its
namespace may halt: a refusal, missing credentials or a Job that never started suspend
the failing cluster alone; a halt from an untrusted namespace holds that namespace's
clusters; a person lifts a halt early (``ichor autopatch unhalt``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ichor.api.autopatch import (
    EVERY_NAMESPACE,
    FleetAutoPatchStatus,
    Halt,
    HaltScope,
    Unhalt,
    parse_unhalt,
)
from ichor.api.talosoperation import Failure, Phase
from ichor.controller.autopatch import decisions as d
from ichor.upgrade.rule import Component
from tests.unit.autopatch.test_decisions import NOW, cluster, decide, reason, run, seen_all, status

FAILED = "auto-patch-prod-1"


def failed(kind: Failure | None) -> d.Run:
    run_ = run(FAILED, phase=Phase.FAILED, message="the Job failed")
    return d.Run(**{**run_.__dict__, "failure": kind})


@pytest.mark.parametrize(
    "kind",
    [Failure.REFUSED, Failure.NOT_STARTED, Failure.INTERRUPTED, None],
    ids=["refused", "no-credentials-or-never-started", "interrupted", "older-ichor"],
)
def test_a_failure_that_never_ran_on_the_nodes_suspends_the_cluster_alone(
    kind: Failure | None,
) -> None:
    decision = decide(runs=[failed(kind)])
    assert reason(decision) == "PatchFailed"  # the cluster is suspended, as before
    assert decision.status is not None
    assert decision.status.suspension is not None
    assert decision.halt is None  # nothing is halted for anyone else
    assert decision.keep_halt is None
    message = decision.status.message or ""
    assert "halts Talos v1.14.5 for no other cluster" in message
    assert (kind.value if kind else "not known to have run") in message
    # at every later look too
    again = decide(cluster(status(auto_patch=decision.status)), runs=[failed(kind)],
                   now=NOW + timedelta(minutes=5))  # fmt: skip
    assert again.halt is None
    assert again.keep_halt is None


def test_an_upgrade_that_ran_and_failed_halts_its_namespace() -> None:
    decision = decide(runs=[failed(Failure.UPGRADE_FAILED)])
    assert decision.halt is not None
    assert decision.halt.scope is HaltScope.NAMESPACE
    assert decision.halt.namespace == "ns"
    assert "Talos v1.14.5 is halted for the clusters of namespace ns until" in (
        decision.status.message or ""  # type: ignore[union-attr]
    )


@pytest.mark.parametrize("trusted", [frozenset({"ns"}), frozenset({EVERY_NAMESPACE})])
def test_a_trusted_namespace_halts_the_fleet(trusted: frozenset[str]) -> None:
    fleet = d.Fleet(seen=seen_all(), trusted=trusted)
    decision = decide(runs=[failed(Failure.UPGRADE_FAILED)], fleet=fleet)
    assert decision.halt is not None
    assert decision.halt.scope is HaltScope.FLEET
    assert "is halted for the fleet until" in (decision.status.message or "")  # type: ignore[union-attr]
    other = decide(
        runs=[failed(Failure.UPGRADE_FAILED)],
        fleet=d.Fleet(seen=seen_all(), trusted=frozenset({"other"})),
    )
    assert other.halt is not None
    assert other.halt.scope is HaltScope.NAMESPACE


def halt(
    *, cluster: str = "team-a/prod", scope: HaltScope = HaltScope.NAMESPACE, **more: object
) -> Halt:
    return Halt(
        component="talos", version="v1.14.5", cluster=cluster, operation="op-a",
        reason="the Job failed", time=NOW, until=NOW + timedelta(hours=1), scope=scope,
        **more,
    )  # fmt: skip


def picked(fleet: d.Fleet, namespace: str) -> str | None:
    c = cluster()
    c = d.Cluster(namespace=namespace, name="x", spec=c.spec, status=c.status, not_ready=())
    decision = decide(c, fleet=fleet)
    return decision.start.version if decision.start else None


def test_a_namespace_halt_holds_only_that_namespace() -> None:
    fleet = d.Fleet(seen=seen_all(), halts=(halt(),))
    assert picked(fleet, "team-a") == "v1.14.4"  # the older patch: v1.14.5 is halted here
    assert picked(fleet, "team-b") == "v1.14.5"  # another tenant is not held


def test_a_fleet_halt_holds_every_namespace_and_an_older_record_is_a_fleet_halt() -> None:
    fleet = d.Fleet(seen=seen_all(), halts=(halt(scope=HaltScope.FLEET),))
    assert picked(fleet, "team-a") == "v1.14.4"
    assert picked(fleet, "team-b") == "v1.14.4"
    # a halt an earlier Ichor recorded has no scope: it held the fleet, and still does
    old = Halt.model_validate({k: v for k, v in halt().to_api().items() if k != "scope"})
    assert old.scope is HaltScope.FLEET


def test_a_lifted_halt_holds_nothing() -> None:
    lifted = halt(scope=HaltScope.FLEET, lifted_by="olivia", lifted_at=NOW)
    fleet = d.Fleet(seen=seen_all(), halts=(lifted,))
    assert picked(fleet, "team-a") == "v1.14.5"
    assert picked(fleet, "team-b") == "v1.14.5"


def fleet_run(kind: Failure | None, *, cluster: str = "team-a/edge") -> d.FleetRun:
    return d.FleetRun(
        cluster=cluster, operation="op-edge", component="talos", version="v1.14.5",
        phase=Phase.FAILED, created=NOW - timedelta(minutes=20),
        finished=NOW - timedelta(minutes=1), failure=kind,
    )  # fmt: skip


@pytest.mark.parametrize("kind", [Failure.REFUSED, Failure.NOT_STARTED, Failure.INTERRUPTED, None])
def test_a_failure_not_recorded_yet_halts_only_when_it_ran(kind: Failure | None) -> None:
    none = d.unrecorded_halts([fleet_run(kind)], recorded=(), now=NOW, cluster="team-b/x",
                              resume=None)  # fmt: skip
    assert none == ()
    (found,) = d.unrecorded_halts([fleet_run(Failure.UPGRADE_FAILED)], recorded=(), now=NOW,
                                  cluster="team-b/x", resume=None)  # fmt: skip
    assert found.scope is HaltScope.NAMESPACE
    assert found.holds(component="talos", version="v1.14.5", namespace="team-a", now=NOW)
    assert not found.holds(component="talos", version="v1.14.5", namespace="team-b", now=NOW)
    (trusted,) = d.unrecorded_halts([fleet_run(Failure.UPGRADE_FAILED)], recorded=(), now=NOW,
                                    cluster="team-b/x", resume=None,
                                    trusted=frozenset({"team-a"}))  # fmt: skip
    assert trusted.scope is HaltScope.FLEET


def test_unhalt_lifts_the_named_version_and_keeps_it_in_the_record() -> None:
    a = halt()
    b = halt(cluster="team-b/db").model_copy(update={"operation": "op-b", "version": "v1.14.4"})
    over = halt().model_copy(update={"operation": "op-over", "until": NOW})
    halts, lifted = d.lift((a, b, over), request=Unhalt("talos", "v1.14.5"), user="olivia",
                           now=NOW)  # fmt: skip
    assert [h.operation for h in lifted] == ["op-a"]
    assert halts[0].lifted_by == "olivia"
    assert halts[0].lifted_at == NOW
    assert halts[1] == b  # another version stays halted
    assert halts[2] == over  # one that is over is not lifted (it is dropped on the next write)
    # lifted, it stays in the record until its end, so its failure is not recorded again...
    record = d.fleet_record(FleetAutoPatchStatus(halts=halts), now=NOW, halt=a)
    assert record is None  # a halt of op-a is there already
    assert d.unrecorded_halts([d.FleetRun(cluster="team-a/prod", operation="op-a",
                                          component="talos", version="v1.14.5",
                                          phase=Phase.FAILED, created=NOW,
                                          failure=Failure.UPGRADE_FAILED)],
                              recorded=halts, now=NOW, cluster="team-a/x",
                              resume=None) == ()  # fmt: skip
    # ...and holds nothing
    assert d.active_halt(halts, component=Component.TALOS, version="v1.14.5", now=NOW,
                         namespace="team-a") is None  # fmt: skip


def test_unhalt_all_and_a_repeat_after_a_crash_posts_again() -> None:
    a, b = halt(), halt().model_copy(update={"operation": "op-b", "version": "v1.14.4"})
    halts, lifted = d.lift((a, b), request=Unhalt(), user="olivia", now=NOW)
    assert [h.operation for h in lifted] == ["op-a", "op-b"]
    # the operator lifted them and stopped before its Event: the same request lifts them
    # again for the Event (never a gap); another person's request finds nothing to lift
    again, relifted = d.lift(halts, request=Unhalt(), user="olivia", now=NOW)
    assert again == halts
    assert [h.operation for h in relifted] == ["op-a", "op-b"]
    assert d.lift(halts, request=Unhalt(), user="mallory", now=NOW) == (halts, ())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("kubernetes/v1.36.7", Unhalt("kubernetes", "v1.36.7")),
        ("talos/v1.14.5", Unhalt("talos", "v1.14.5")),
        ("all", Unhalt()),
    ],
)
def test_an_unhalt_request_reads(value: str, expected: Unhalt) -> None:
    assert parse_unhalt(value) == expected
    assert str(parse_unhalt(value)) == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "ALL",
        "all ",
        "kubernetes",
        "kubernetes/",
        "/v1.36.7",
        "kubernetes/1.36.7",
        "kubernetes/v1.36",
        "kubernetes/v1.36.7-rc.1",
        "cilium/v1.20.4",
        "cni/v1.20.4",
        "kubernetes/v1.36.7/x",
        "kubernetes\\v1.36.7",
        "kubernetes/v1.36.7\n",
        "k" * 10_000,
        7,
        None,
        ["kubernetes/v1.36.7"],
    ],
)
def test_a_malformed_unhalt_request_is_a_sentence_never_a_crash(value: object) -> None:
    with pytest.raises(ValueError, match=r"ichor.dev/unhalt takes <component>/<version>") as said:
        parse_unhalt(value)
    assert len(str(said.value)) < 400  # a huge value is not echoed whole
