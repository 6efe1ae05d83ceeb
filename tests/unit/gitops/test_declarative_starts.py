"""The declarative mode's start, without a cluster: what an operation the start created
or found says (``starting.outcome``), and the reconciler's declarative step over several
reconciles with a fake starter: a rule's refusal or a failed operation is remembered for
the spec generation (one call, no retry loop), anything else that refused the start (a
namesake, a race, throttling, RBAC) is tried again at the next check, never in a tight
loop."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import owed
from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import SpecReachedReason as Reason
from ichor.api.events import ClusterEventReason
from ichor.api.taloscluster import TalosClusterStatus
from ichor.api.talosoperation import OperationType
from ichor.controller.declarative import starting
from ichor.controller.declarative.decisions import Target
from ichor.controller.taloscluster import reconciler
from ichor.controller.taloscluster.reconciler import ClusterController, _Cluster
from ichor.controller.taloscluster.status import evaluate
from ichor.controller.talosoperation import creating, start_request
from ichor.kube import events, patching
from ichor.kube.accounts import NAMESPACE_DEFAULT, Origin, ServiceAccount
from ichor.kube.bodies import PlannedEvent
from ichor.settings import ControllerSettings
from tests.unit.controller.test_status_rules import LISTED, seen

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
TARGET = Target(type=OperationType.KUBERNETES, version="v1.36.7", running="v1.36.6")
SENTENCE = "spec.kubernetesVersion is Kubernetes v1.36.7, the Nodes run v1.36.6"
DENIAL = (
    'admission webhook "taloscluster.ichor.dev" denied the request: Kubernetes v1.36.7 is '
    "refused: rule Final"
)


def started(phase: str | None, message: str | None = None, *, created: bool = False) -> Any:
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if message is not None:
        status["message"] = message
    return creating.Started(name="declarative-prod-x", created=created, body={"status": status})


# --- what the start says -----------------------------------------------------------------


def test_a_failed_operation_is_a_failed_decision_and_the_cluster_stalls() -> None:
    decided = starting.outcome(started("Failed", "the Job failed: exit 1"), target=TARGET)
    assert (decided.reason, decided.start) == (Reason.FAILED, None)
    assert decided.message == (
        f"TalosOperation declarative-prod-x for {SENTENCE} failed: the Job failed: exit 1; "
        "change the spec, or create a TalosOperation, to try again"
    )
    declared = decided.declared()
    assert declared.stalled
    assert not declared.reached
    assert declared.reason == "Failed"
    silent = starting.outcome(started("Failed"), target=TARGET)
    assert "failed: no message;" in silent.message

    spec = {
        "talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.7", "versionContract": "v1.14",
        "upgradeStrategy": "Declarative",
    }  # fmt: skip
    first = evaluate(
        spec=spec, generation=2, previous=TalosClusterStatus(), observation=seen(),
        failure=None, installation=LISTED, now=NOW, declared=declared,
    )  # fmt: skip
    stalled = next(c for c in first.status.conditions if c.type == Type.STALLED)
    assert (stalled.reason, stalled.message) == ("Failed", decided.message)
    assert [e.message for e in first.events if e.reason == ClusterEventReason.SPEC_NOT_REACHED] == [
        decided.message
    ]
    again = evaluate(
        spec=spec, generation=2, previous=first.status, observation=seen(),
        failure=None, installation=LISTED, now=NOW, declared=declared,
    )  # fmt: skip
    assert [e for e in again.events if e.reason == ClusterEventReason.SPEC_NOT_REACHED] == []


@pytest.mark.parametrize(
    ("phase", "created", "says"),
    [
        (None, True, "TalosOperation declarative-prod-x started for " + SENTENCE),
        ("Pending", False, "TalosOperation declarative-prod-x is Pending for " + SENTENCE),
        ("Running", False, "TalosOperation declarative-prod-x is Running for " + SENTENCE),
        (
            "Succeeded",
            False,
            "TalosOperation declarative-prod-x succeeded; waiting for the Nodes to report v1.36.7",
        ),
    ],
)
def test_any_other_phase_is_upgrading(phase: str | None, created: bool, says: str) -> None:
    decided = starting.outcome(started(phase, created=created), target=TARGET)
    assert (decided.reason, decided.message) == (Reason.UPGRADING, says)
    assert not decided.declared().stalled


# --- the reconciler's declarative step ---------------------------------------------------


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386, as the API server applies a merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeQueue:
    """The controller's work queue, recording when each key is asked for again."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def add(self, key: object) -> None:
        self.delays.append(0.0)

    def add_after(self, key: object, delay: float) -> None:
        self.delays.append(delay)

    def forget(self, key: object) -> None:
        pass


class Reconciles:
    """One Declarative cluster reconciled by the real ``ClusterController`` with its
    Nodes already read, its status writes and Events kept here, and the operation's create faked:
    ``answer`` is what each call of ``creating.start_operation`` gives (a ``Started`` or
    an exception to raise)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, answer: object) -> None:
        self.answer = answer
        self.calls: list[start_request.StartRequest] = []
        self.events: list[PlannedEvent | owed.OwedEvent] = []
        self.settings = ControllerSettings(
            observe_interval=60.0, backoff_initial=5.0, backoff_max=300.0, workers=1
        )
        monkeypatch.setattr(creating, "start_operation", self._start)
        monkeypatch.setattr(reconciler, "patch_status", self._patch_status)
        monkeypatch.setattr(events, "post", self._post)
        # the Events the stored status owes are posted by name, then cleared from it
        monkeypatch.setattr(events, "post_owed", self._post_owed)
        monkeypatch.setattr(patching, "patch_status", self._patch_status)
        self.controller = ClusterController(cast(ApiClient, object()), self.settings)
        self.queue = FakeQueue()
        self.controller.queue = cast(Any, self.queue)
        self.key = ("team-a", "prod")
        self.body: dict[str, Any] = {
            "apiVersion": "ichor.dev/v1alpha1",
            "kind": "TalosCluster",
            "metadata": {"namespace": "team-a", "name": "prod", "uid": "u-1", "generation": 2},
            "spec": {
                "talosVersion": "v1.14.3",
                "kubernetesVersion": "v1.36.7",
                "versionContract": "v1.14",
                "upgradeStrategy": "Declarative",
            },
        }
        # the Nodes were read (as the namespace's default account): they run v1.36.6
        reader = ServiceAccount("team-a", NAMESPACE_DEFAULT, Origin.NAMESPACE)
        self.controller.clusters[self.key] = _Cluster(
            body=copy.deepcopy(self.body), observation=seen(), account=reader
        )

    async def _start(
        self, api: ApiClient, *, request: start_request.StartRequest, owes: object = None
    ) -> creating.Started:
        self.calls.append(request)
        answer = self.answer
        if isinstance(answer, BaseException):
            raise answer
        return cast(creating.Started, answer)

    async def _patch_status(self, api: ApiClient, **call: Any) -> dict[str, Any]:
        _merge(self.body.setdefault("status", {}), call["status_patch"])
        return copy.deepcopy(self.body)

    async def _post(self, api: ApiClient, involved: object, event: PlannedEvent) -> bool:
        self.events.append(event)
        return True

    async def _post_owed(
        self, api: ApiClient, involved: object, *, key: str, event: owed.OwedEvent
    ) -> bool:
        self.events.append(event)
        return True

    async def reconcile(self) -> None:
        """One reconcile, the Nodes read a moment ago (their next read is an
        ``observe_interval`` away: the controller's normal next check)."""
        self.queue.delays.clear()
        loop = asyncio.get_running_loop()
        self.controller.clusters[self.key].next_observe = (
            loop.time() + self.settings.observe_interval
        )
        await self.controller.reconcile(self.key)

    def bump(self, **spec: str) -> None:
        """A new spec generation, as its watch event brings it."""
        self.body["spec"].update(spec)
        self.body["metadata"]["generation"] += 1
        self.controller.cluster_event("MODIFIED", copy.deepcopy(self.body))

    def condition(self, type_: str) -> dict[str, Any]:
        for found in (self.body.get("status") or {}).get("conditions") or ():
            if found["type"] == type_:
                return cast(dict[str, Any], found)
        return {}

    def warnings(self, reason: ClusterEventReason) -> list[str]:
        return [e.message for e in self.events if e.reason == reason]

    @property
    def next_check(self) -> float:
        """When the cluster is looked at again (the queue keeps the earliest ask)."""
        return min(self.queue.delays)


def refused(status: int, message: str) -> creating.StartRefused:
    return creating.StartRefused(message, status=status)


async def test_a_rule_refusal_is_one_start_per_spec_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = Reconciles(monkeypatch, refused(403, DENIAL))
    for _ in range(4):
        await run.reconcile()
    assert len(run.calls) == 1
    assert run.calls[0].attempt == "g2"
    assert run.condition("Stalled")["reason"] == "Refused"
    assert run.condition("Stalled")["message"] == (
        f"{SENTENCE}, and the start was refused: {DENIAL}"
    )
    assert len(run.warnings(ClusterEventReason.UPGRADE_REFUSED)) == 1
    # the next spec change is judged afresh: one more call, then none again
    run.bump(kubernetesVersion="v1.36.8")
    for _ in range(3):
        await run.reconcile()
    assert [c.attempt for c in run.calls] == ["g2", "g3"]
    assert run.calls[1].version == "v1.36.8"
    assert len(run.warnings(ClusterEventReason.UPGRADE_REFUSED)) == 2
    assert run.condition("Stalled")["observedGeneration"] == 3


async def test_a_failed_operation_is_not_started_again_for_the_same_spec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = Reconciles(monkeypatch, started("Failed", "the Job failed: exit 1"))
    for _ in range(4):
        await run.reconcile()
    assert len(run.calls) == 1
    assert run.condition("Stalled")["reason"] == "Failed"
    assert run.condition("SpecReached")["reason"] == "Failed"
    assert len(run.warnings(ClusterEventReason.SPEC_NOT_REACHED)) == 1
    run.bump(kubernetesVersion="v1.36.8")
    await run.reconcile()
    assert [c.attempt for c in run.calls] == ["g2", "g3"]


@pytest.mark.parametrize(
    "answer",
    [
        refused(
            409,
            "TalosOperation team-a/declarative-prod-x is not the one the controller starts; "
            "delete it to let the controller start its own",
        ),
        refused(403, 'talosoperations.ichor.dev is forbidden: User "ichor" cannot create'),
        refused(422, "TalosOperation.ichor.dev is invalid: spec.version: Invalid value"),
    ],
    ids=["namesake-409", "rbac-403", "invalid-422"],
)
async def test_a_refusal_that_is_no_rule_is_tried_again_at_the_next_check(
    monkeypatch: pytest.MonkeyPatch, answer: creating.StartRefused
) -> None:
    """Not the webhook's rule: what refused the start may be gone at the next check (the
    namesake deleted, the role granted), so it is not remembered; the cluster shows it
    Stalled, with one Event, and is looked at again at its next observation, never in a
    tight loop."""
    run = Reconciles(monkeypatch, answer)
    for expected in (1, 2, 3):
        await run.reconcile()
        assert len(run.calls) == expected
        assert run.next_check >= run.settings.backoff_initial
    assert run.condition("Stalled")["reason"] == "Refused"
    message = run.condition("Stalled")["message"]
    assert message.startswith(f"{SENTENCE}, and the start was refused: {answer.message}")
    assert message.endswith("; it is tried again at the next check")
    assert len(run.warnings(ClusterEventReason.UPGRADE_REFUSED)) == 1
    # once the start passes, it runs
    run.answer = started(None, created=True)
    await run.reconcile()
    assert len(run.calls) == 4
    assert run.condition("Stalled") == {}
    assert run.condition("Reconciling")["reason"] == "Upgrading"


@pytest.mark.parametrize(
    "answer",
    [
        refused(
            404,
            "TalosOperation team-a/declarative-prod-x was deleted while it was being "
            "created; it is created again at the next check",
        ),
        refused(429, "Too many requests, please try again later."),
    ],
    ids=["create-delete-race-404", "throttled-429"],
)
async def test_a_race_or_throttling_defers_the_start_with_a_growing_backoff(
    monkeypatch: pytest.MonkeyPatch, answer: creating.StartRefused
) -> None:
    """Nothing a person must do: the cluster is Reconciling (never Stalled, no Warning),
    and the start is tried again after the controller's backoff, doubling."""
    run = Reconciles(monkeypatch, answer)
    waits = []
    for expected in (1, 2, 3, 4):
        await run.reconcile()
        assert len(run.calls) == expected
        waits.append(run.next_check)
    assert waits == [5.0, 10.0, 20.0, 40.0]
    assert run.condition("Stalled") == {}
    assert run.condition("Reconciling")["reason"] == "Upgrading"
    assert "the start is tried again" in run.condition("Reconciling")["message"]
    assert run.warnings(ClusterEventReason.UPGRADE_REFUSED) == []
    run.answer = started(None, created=True)
    await run.reconcile()
    assert run.condition("Reconciling")["message"] == (
        f"TalosOperation declarative-prod-x started for {SENTENCE}"
    )
    # the backoff starts over after a start that went through
    run.answer = answer
    await run.reconcile()
    assert run.next_check == 5.0


async def test_the_status_written_for_a_declarative_cluster_drops_auto_patch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stored status of the Operations mode (generation 1) had auto-patch's condition
    and record; the first write in Declarative removes both."""
    run = Reconciles(monkeypatch, started(None, created=True))
    run.body["status"] = {
        "observedGeneration": 1,
        "autoPatch": {"enabled": True, "windowOpen": False, "reason": "WindowClosed"},
        "conditions": [
            {
                "type": "AutoPatchReady", "status": "True", "reason": "WindowClosed",
                "message": "the next window opens at 02:00", "observedGeneration": 1,
                "lastTransitionTime": "2026-12-03T07:00:00Z",
            }
        ],
    }  # fmt: skip
    run.controller.clusters[run.key].body = copy.deepcopy(run.body)
    await run.reconcile()
    assert "autoPatch" not in run.body["status"]
    assert run.condition("AutoPatchReady") == {}
    assert run.body["status"]["observedGeneration"] == 2
    assert run.condition("Reconciling")["observedGeneration"] == 2
