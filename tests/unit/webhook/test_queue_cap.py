"""The webhook refuses a TalosOperation create while its cluster already has
``max_queued`` operations not finished (``ICHOR_MAX_QUEUED_OPERATIONS``), with a sentence
naming the cap and the step. The cap protects the operator, so it binds everyone: the
override verb, the operator's own starts and a dry run are counted alike."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.api import queue_limits
from ichor.webhook import handlers, judgement
from ichor.webhook.reviews import NamespacedName
from tests.unit.webhook.fakes import FakeBackend, taloscluster, talosoperation, userinfo

pytestmark = pytest.mark.asyncio(loop_scope="session")

REF = NamespacedName("team-a", "prod")
SENTENCE = (
    "TalosOperation team-a/up is refused: TalosCluster team-a/prod already has 3 operations "
    "not finished, the most one cluster queues (ICHOR_MAX_QUEUED_OPERATIONS); wait for them "
    "to finish or delete the queued ones you no longer need, then create it again."
)


def stored(
    name: str,
    *,
    phase: str | None = "Pending",
    cluster: str = "prod",
    namespace: str = "team-a",
    deleting: bool = False,
    status: Any = None,
) -> dict[str, Any]:
    body = talosoperation("talos", "v1.14.4", cluster=cluster)
    body["metadata"] = {"name": name, "namespace": namespace}
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-12-03T08:00:00Z"
    if status is not None:
        body["status"] = status
    elif phase is not None:
        body["status"] = {"phase": phase}
    return body


async def answer(
    backend: FakeBackend, *, user: str = "alice", dryrun: bool = False, operation: str = "CREATE"
) -> Any:
    return await judgement.operation_answer(
        new=talosoperation("talos", "v1.14.4"),
        old=talosoperation("talos", "v1.14.4") if operation == "UPDATE" else None,
        userinfo=userinfo(user),
        operation=operation,
        dryrun=dryrun,
        backend=backend,
        max_queued=3,
    )


def backend_with(*operations: dict[str, Any]) -> FakeBackend:
    return FakeBackend(
        clusters={REF: taloscluster()},
        operations=list(operations),
        holders={"olivia"},
    )


@pytest.mark.parametrize("dryrun", [False, True])
@pytest.mark.parametrize(
    "user", ["alice", "olivia", "system:serviceaccount:ichor-system:ichor"], ids=str
)
async def test_the_create_past_the_cap_is_refused_for_everyone(user: str, dryrun: bool) -> None:
    full = backend_with(
        stored("a", phase="Running"), stored("b"), stored("c", phase=None)
    )  # no phase yet: just created, it counts
    refused = await answer(full, user=user, dryrun=dryrun)
    assert not refused.allowed
    assert refused.code == 403
    assert refused.message == SENTENCE


async def test_below_the_cap_the_create_is_admitted() -> None:
    assert (await answer(backend_with(stored("a", phase="Running"), stored("b")))).allowed


async def test_only_what_is_queued_on_that_cluster_counts() -> None:
    others = backend_with(
        stored("done", phase="Succeeded"),
        stored("failed", phase="Failed"),
        stored("going", deleting=True),
        stored("elsewhere", cluster="staging"),
        stored("elsewhere-2", cluster="staging"),
        stored("other-ns", namespace="team-b"),
        stored("other-ns-2", namespace="team-b"),
        stored("a", phase="Running"),
        stored("b"),
    )
    assert (await answer(others)).allowed


async def test_an_unreadable_status_counts_and_makes_no_room() -> None:
    odd = backend_with(stored("a", status="garbage"), stored("b", status={"phase": 7}), stored("c"))
    assert not (await answer(odd)).allowed


async def test_an_update_is_not_counted() -> None:
    full = backend_with(stored("a"), stored("b"), stored("c"), stored("d"))
    assert (await answer(full, operation="UPDATE")).allowed


async def test_the_handler_uses_the_cap_the_webhooks_start_put_in_the_memo() -> None:
    memo: Any = {}
    assert handlers.max_queued_of(memo) == queue_limits.MAX_QUEUED
    memo[handlers.MAX_QUEUED] = 3
    assert handlers.max_queued_of(memo) == 3


async def test_the_mutating_half_does_not_list_the_queue() -> None:
    # the validating half counts; the mutating half (max_queued None) asks nothing more
    calls: list[str] = []
    full = backend_with(stored("a"), stored("b"), stored("c"))
    listing = full.list_operations

    async def counted(namespace: str) -> list[Any]:
        calls.append(namespace)
        return await listing(namespace)

    full.list_operations = counted  # type: ignore[method-assign]
    judged = await judgement.judge_operation(
        new=talosoperation("talos", "v1.14.4"),
        old=None,
        userinfo=userinfo(),
        operation="CREATE",
        backend=full,
    )
    assert judged.answer.allowed
    assert calls == []
