"""The declarative mode's decisions, without a cluster: when the controller starts which
operation, when it waits, when it stands (Stalled), and what the status shows of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import ConditionStatus
from ichor.api.conditions import SpecReachedReason as Reason
from ichor.api.events import ClusterEventReason
from ichor.api.taloscluster import TalosClusterSpec, TalosClusterStatus
from ichor.api.talosoperation import OperationType
from ichor.controller.declarative import decisions
from ichor.controller.declarative.decisions import ActiveOperation, Decision, decide
from ichor.controller.taloscluster.status import Outcome, evaluate
from tests.unit.controller.test_status_rules import LISTED, seen

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
T, F = ConditionStatus.TRUE, ConditionStatus.FALSE


def spec(**overrides: Any) -> TalosClusterSpec:
    base: dict[str, Any] = {
        "talosVersion": "v1.14.3",
        "kubernetesVersion": "v1.36.6",
        "versionContract": "v1.14",
        "upgradeStrategy": "Declarative",
    }
    base.update(overrides)
    return TalosClusterSpec.model_validate(base)


def go(
    cluster: TalosClusterSpec,
    *,
    talos: tuple[str, ...] | None = ("v1.14.3",),
    kubernetes: tuple[str, ...] | None = ("v1.36.6",),
    active: tuple[ActiveOperation, ...] = (),
) -> Decision | None:
    return decide(spec=cluster, talos_nodes=talos, kubernetes_nodes=kubernetes, active=active)


def test_the_operations_mode_decides_nothing() -> None:
    assert go(spec(upgradeStrategy="Operations", talosVersion="v1.14.4")) is None
    unset = spec(talosVersion="v1.14.4").to_api()
    del unset["upgradeStrategy"]
    assert go(TalosClusterSpec.model_validate(unset)) is None  # the default: Operations


def test_a_spec_the_nodes_run_is_reached() -> None:
    decided = go(spec())
    assert decided is not None
    assert (decided.reason, decided.status, decided.start) == (Reason.REACHED, T, None)
    assert decided.declared().reached


def test_a_newer_kubernetes_starts_a_kubernetes_operation_for_it() -> None:
    decided = go(spec(kubernetesVersion="v1.36.7"))
    assert decided is not None
    assert decided.start is not None
    assert (decided.start.type, decided.start.version) == (OperationType.KUBERNETES, "v1.36.7")
    assert decided.start.sentence == (
        "spec.kubernetesVersion is Kubernetes v1.36.7, the Nodes run v1.36.6"
    )
    assert decided.declared().stalled is False


def test_when_both_moved_talos_goes_first() -> None:
    decided = go(spec(talosVersion="v1.14.4", kubernetesVersion="v1.36.7"))
    assert decided is not None
    assert decided.start is not None
    assert decided.start.type is OperationType.TALOS


def test_a_half_done_upgrade_starts_again_from_the_lowest_node() -> None:
    decided = go(spec(talosVersion="v1.14.4"), talos=("v1.14.3", "v1.14.4"))
    assert decided is not None
    assert decided.start is not None
    assert decided.start.running == "v1.14.3"


def test_nothing_starts_while_another_operation_runs() -> None:
    other = ActiveOperation(name="manual", what="talos v1.14.4", phase="Running")
    decided = go(spec(kubernetesVersion="v1.36.7"), active=(other,))
    assert decided is not None
    assert decided.start is None
    assert decided.reason is Reason.WAITING
    assert decided.message.startswith("TalosOperation manual (talos v1.14.4) is Running; spec.")
    ours = ActiveOperation(name="d", what="kubernetes v1.36.7", phase="Pending", declarative=True)
    decided = go(spec(kubernetesVersion="v1.36.7"), active=(ours,))
    assert decided is not None
    assert (decided.reason, decided.start) == (Reason.UPGRADING, None)


@pytest.mark.parametrize(
    ("talos", "kubernetes"), [(None, ("v1.36.6",)), (("v1.14.3",), None), ((), ())]
)
def test_unread_nodes_start_nothing(
    talos: tuple[str, ...] | None, kubernetes: tuple[str, ...] | None
) -> None:
    decided = go(spec(talosVersion="v1.14.4"), talos=talos, kubernetes=kubernetes)
    assert decided is not None
    assert (decided.reason, decided.start) == (Reason.NOT_OBSERVED, None)


def test_nodes_ahead_of_the_spec_are_never_downgraded() -> None:
    decided = go(spec(), talos=("v1.14.3", "v1.14.5"))
    assert decided is not None
    assert (decided.reason, decided.start) == (Reason.NODES_AHEAD, None)
    assert "never downgrades" in decided.message
    assert decided.declared().stalled


def test_a_version_that_cannot_be_compared_is_stalled_not_started() -> None:
    decided = go(spec(talosVersion="v1.14.4"), talos=("banana",))
    assert decided is not None
    assert (decided.reason, decided.start) == (Reason.UNREADABLE, None)
    assert decided.declared().stalled


def test_every_stalled_reason_is_a_reason() -> None:
    assert set(Reason) >= decisions.STALLED
    assert Reason.UPGRADING not in decisions.STALLED


# --- what the status shows ---------------------------------------------------------------


def run(
    declared: Decision | None,
    *,
    previous: TalosClusterStatus | None = None,
    generation: int = 2,
) -> Outcome:
    return evaluate(
        spec=spec(kubernetesVersion="v1.36.7").to_api(),
        generation=generation,
        previous=previous or TalosClusterStatus(),
        observation=seen(),
        failure=None,
        installation=LISTED,
        now=NOW,
        declared=declared.declared() if declared else None,
    )


def by_type(outcome: Outcome) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in outcome.status.conditions}


def test_while_the_spec_is_not_reached_ready_is_false_and_the_cluster_reconciles() -> None:
    upgrading = Decision(Reason.UPGRADING, "TalosOperation d is Running")
    found = by_type(run(upgrading))
    assert found["SpecReached"] == (F, "Upgrading")
    assert found["Ready"] == (F, "Upgrading")
    assert found["Reconciling"] == (T, "Upgrading")
    assert "Stalled" not in found


def test_a_refused_start_is_stalled_with_the_sentence_and_one_event() -> None:
    sentence = "spec.kubernetesVersion is ...: Kubernetes v1.38.0 skips a minor"
    refused = Decision(Reason.REFUSED, sentence)
    first = run(refused)
    found = by_type(first)
    assert found["Stalled"] == (T, "Refused")
    assert "Reconciling" not in found
    stalled = next(c for c in first.status.conditions if c.type == Type.STALLED)
    assert stalled.message == sentence
    warnings = [e for e in first.events if e.reason == ClusterEventReason.UPGRADE_REFUSED]
    assert [e.message for e in warnings] == [sentence]
    # the same refusal for the same generation: no second Event (no retry loop)
    again = run(refused, previous=first.status)
    assert [e for e in again.events if e.reason == ClusterEventReason.UPGRADE_REFUSED] == []
    # a new spec generation refused again is judged afresh: one more Event
    later = run(refused, previous=again.status, generation=3)
    assert len([e for e in later.events if e.reason == ClusterEventReason.UPGRADE_REFUSED]) == 1


def test_reached_is_ready_and_back_in_operations_the_condition_goes() -> None:
    reached = Decision(Reason.REACHED, "the Nodes run it", status=ConditionStatus.TRUE)
    before = run(Decision(Reason.UPGRADING, "runs"))
    done = run(reached, previous=before.status)
    found = by_type(done)
    assert found["SpecReached"] == (T, "Reached")
    assert found["Ready"] == (T, "Observed")
    assert "Reconciling" not in found
    assert "Stalled" not in found
    assert [e.reason for e in done.events if e.reason == ClusterEventReason.SPEC_REACHED] == [
        ClusterEventReason.SPEC_REACHED
    ]
    operations = run(None, previous=done.status)
    assert "SpecReached" not in by_type(operations)


def test_auto_patch_leaves_nothing_stale_on_a_declarative_cluster() -> None:
    """Switched from Operations (generation 1, auto-patch configured) to Declarative
    (generation 2): auto-patch does not run, so its condition and its status go rather
    than stay at generation 1 saying what no longer holds."""
    from ichor.api.autopatch import AutoPatchStatus
    from ichor.api.conditions import Condition

    auto = Condition(
        type=Type.AUTO_PATCH_READY, status=T, reason="WindowClosed",
        message="the next window opens at 02:00", observed_generation=1,
        last_transition_time=NOW,
    )  # fmt: skip
    before = run(None, generation=1).status
    before = before.model_copy(
        update={
            "conditions": (*before.conditions, auto),
            "auto_patch": AutoPatchStatus(enabled=True, reason="WindowClosed"),
        }
    )
    declarative = run(Decision(Reason.UPGRADING, "runs"), previous=before)
    assert Type.AUTO_PATCH_READY not in by_type(declarative)
    assert declarative.status.auto_patch is None
    assert "autoPatch" not in declarative.status.to_api()
    # in Operations the controller's auto-patch step owns both: evaluate keeps them
    operations = run(None, previous=before)
    assert by_type(operations)[Type.AUTO_PATCH_READY] == (T, "WindowClosed")
    assert operations.status.auto_patch == before.auto_patch
