"""An operator stopped while it posts an Event loses nothing and doubles nothing.

The operator runs in-process; one Event create of a chosen reason is held in the
operator's loop (before it is sent, or after the API server stored it and before its
answer is read) until the operator stops, as a process killed inside that call would.
Then the operator starts again: the Event is there exactly once, next to exactly one Job.
tests/component/crash sweeps every call of the operator's life the same way, with the
operator in a process of its own that is killed; these are its quick, pointed cases.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any

import pytest
from kubernetes.aio import client

from tests.component.operations.conftest import (
    Objects,
    Operator,
    Workload,
    eventually,
    phase,
    running_job,
)

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

HELD_WITHIN = 20.0


class Held:
    """Holds the first Event create of ``reason`` forever: before it reaches the API
    server (``sent=False``) or once it is stored there (``sent=True``)."""

    def __init__(self, reason: str, *, sent: bool) -> None:
        self.reason = reason
        self.sent = sent
        self.holding = threading.Event()
        self._done = False

    def takes(self, body: Any) -> bool:
        if self._done or not isinstance(body, dict) or body.get("reason") != self.reason:
            return False
        self._done = True
        return True


@pytest.fixture
def held_events(monkeypatch: pytest.MonkeyPatch) -> list[Held]:
    holds: list[Held] = []
    original = client.CoreV1Api.create_namespaced_event_without_preload_content

    async def create(self: client.CoreV1Api, namespace: str, body: Any, **kwargs: Any) -> Any:
        hold = next((h for h in holds if h.takes(body)), None)
        if hold is None:
            return await original(self, namespace, body, **kwargs)
        if hold.sent:
            answer = await original(self, namespace, body, **kwargs)
            release = getattr(answer, "release", None)
            if callable(release):
                release()
        hold.holding.set()
        await asyncio.Event().wait()  # until the operator stops and cancels it
        raise AssertionError("unreachable")

    monkeypatch.setattr(client.CoreV1Api, "create_namespaced_event_without_preload_content", create)
    return holds


async def _holding(hold: Held) -> None:
    if not await asyncio.to_thread(hold.holding.wait, HELD_WITHIN):
        raise AssertionError(f"no {hold.reason} Event create was made within {HELD_WITHIN} s")


async def _counts(objects: Objects, name: str) -> collections.Counter[str]:
    return collections.Counter(e["reason"] for e in await objects.events(name))


async def _overridden_running(workload: Workload, objects: Objects) -> None:
    """A Talos operation under override (the Nodes' kubelets pair badly with its target),
    stamped as the webhook stamps one a holder of the verb created."""
    for node in list(workload.nodes):
        await workload.core.patch_node_status(
            node, {"status": {"nodeInfo": {"kubeletVersion": "v1.32.4"}}}
        )
    await objects.create_cluster()
    await eventually(
        objects.cluster,
        lambda c: (c.get("status") or {}).get("kubernetesVersion") == "v1.32.4",
        what="the old kubelets observed",
    )
    await objects.create_operation("up", "talos", "v1.14.4", override=True)


@pytest.mark.parametrize("sent", [False, True], ids=["before-it-is-sent", "after-it-is-stored"])
async def test_the_override_event_survives_a_stop_inside_its_create_and_is_posted_once(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    held_events: list[Held],
    sent: bool,
) -> None:
    """A failure once measured: killed inside the executor's Override Event create,
    the operation ran and succeeded with no Override Event at all."""
    hold = Held("Override", sent=sent)
    held_events.append(hold)
    await _overridden_running(workload, objects)
    await _holding(hold)
    await operator.stop()
    await operator.start()
    _, job = await running_job(objects, "up")
    await workload.report(talos="v1.14.4")
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Succeeded", what="Succeeded"
    )
    await objects.saw_events("up", "Override", "Started", "Succeeded")
    counts = await _counts(objects, "up")
    assert (counts["Override"], counts["Started"], counts["Succeeded"]) == (1, 1, 1), counts
    assert len(await objects.jobs()) == 1
    stored = await objects.operation("up")
    assert not (stored.get("status") or {}).get("pendingEvents"), stored["status"]


@pytest.mark.parametrize("reason", ["Started", "UpgradeStarted", "Succeeded"])
@pytest.mark.parametrize("sent", [False, True], ids=["before-it-is-sent", "after-it-is-stored"])
async def test_start_and_end_events_survive_a_stop_inside_their_create_once(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    held_events: list[Held],
    reason: str,
    sent: bool,
) -> None:
    """Two of seven kills left an operation without its Started Event: posted once after
    the status write, it was never posted again."""
    hold = Held(reason, sent=sent)
    held_events.append(hold)
    await objects.create_cluster()
    await objects.create_operation("up", "talos", "v1.14.4")
    if reason == "Succeeded":
        _, job = await running_job(objects, "up")
        await workload.report(talos="v1.14.4")
        await objects.play_job(job["metadata"]["name"], succeeded=True)
    await _holding(hold)
    await operator.stop()
    await operator.start()
    if reason != "Succeeded":
        _, job = await running_job(objects, "up")
        await workload.report(talos="v1.14.4")
        await objects.play_job(job["metadata"]["name"], succeeded=True)
    await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Succeeded", what="Succeeded"
    )
    await objects.saw_events("up", "Started", "Succeeded")
    await objects.saw_events("prod", "UpgradeStarted", "UpgradeSucceeded")
    on_op, on_cluster = await _counts(objects, "up"), await _counts(objects, "prod")
    assert (on_op["Started"], on_op["Succeeded"]) == (1, 1), on_op
    assert (on_cluster["UpgradeStarted"], on_cluster["UpgradeSucceeded"]) == (1, 1), on_cluster
    assert len(await objects.jobs()) == 1
    assert (await objects.cluster())["spec"]["talosVersion"] == "v1.14.4"
