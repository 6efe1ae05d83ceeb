"""Which failure an operation had, read from its Job's pod: only an upgrade step that ran
on the nodes and failed is ``UpgradeFailed`` (auto-patch halts a version on it alone); a
refusal, missing credentials, an image that cannot be pulled, a deadline before the step
started or a container the runtime could not start never reached the nodes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ichor.api.conditions import OperationReason as Reason
from ichor.api.talosoperation import Failure, Phase
from ichor.controller.talosoperation import lifecycle
from tests.unit.operations.test_lifecycle import NOW, operation, pod

STARTED = "2026-12-03T08:01:00Z"


def container(state: dict[str, Any], name: str = "upgrade-000") -> dict[str, Any]:
    return {"name": name, "state": state}


@pytest.mark.parametrize(
    "state",
    [
        {"waiting": {"reason": "ErrImagePull", "message": "not found"}},
        {"waiting": {"reason": "ImagePullBackOff"}},
        {"waiting": {"reason": "CreateContainerConfigError", "message": "secret not found"}},
        {"waiting": {"reason": "ContainerCreating"}},
        {"terminated": {"exitCode": 128, "reason": "StartError",
                        "startedAt": "1970-01-01T00:00:00Z", "finishedAt": STARTED}},
        {"terminated": {"exitCode": 128, "reason": "ContainerCannotRun", "startedAt": STARTED}},
        {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "1970-01-01T00:00:00Z"}},
        {"terminated": {"exitCode": 1, "reason": "Error"}},
        {"running": {}},
        {"running": {"startedAt": "garbage"}},
        {},
    ],
    ids=[
        "image-pull", "pull-backoff", "secret-missing", "creating", "start-error",
        "cannot-run", "epoch", "no-start-time", "running-no-time", "running-bad-time", "no-state",
    ],
)  # fmt: skip
def test_a_step_that_never_ran_is_not_started(state: dict[str, Any]) -> None:
    assert lifecycle.step_started([pod(container(state))]) is None
    assert lifecycle.step_started([]) is None


@pytest.mark.parametrize(
    "state",
    [
        {"running": {"startedAt": STARTED}},
        {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": STARTED}},
        {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": STARTED}},
    ],
    ids=["running", "failed", "done"],
)
def test_a_step_that_ran_says_when(state: dict[str, Any]) -> None:
    found = lifecycle.step_started([pod(container(state))])
    assert found == datetime(2026, 12, 3, 8, 1, tzinfo=UTC)


def test_the_first_step_started_is_the_earliest_of_every_container() -> None:
    first = container({"terminated": {"exitCode": 0, "startedAt": STARTED}})
    second = container({"running": {"startedAt": "2026-12-03T08:09:00Z"}}, name="upgrade-001")
    main = container({"waiting": {"reason": "PodInitializing"}}, name="versions")
    assert lifecycle.step_started([pod(second, first, main=main)]) == datetime(
        2026, 12, 3, 8, 1, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("reason", "started", "kind"),
    [
        (Reason.JOB_FAILED, True, Failure.UPGRADE_FAILED),
        (Reason.JOB_FAILED, False, Failure.NOT_STARTED),
        (Reason.NODES_NOT_UPGRADED, False, Failure.UPGRADE_FAILED),
        (Reason.NODES_NOT_UPGRADED, True, Failure.UPGRADE_FAILED),
        (Reason.JOB_DELETED, False, Failure.NOT_STARTED),
        (Reason.JOB_DELETED, True, Failure.INTERRUPTED),
        (Reason.SPEC_NOT_UPDATED, True, Failure.INTERRUPTED),
        (Reason.CREDENTIALS_UNUSABLE, False, Failure.NOT_STARTED),
        (Reason.NO_NODES, False, Failure.NOT_STARTED),
        (Reason.CLUSTER_NOT_FOUND, True, Failure.INTERRUPTED),
        (Reason.INVALID_OPERATION, False, Failure.NOT_STARTED),
    ],
)
def test_only_a_step_that_ran_and_failed_is_upgrade_failed(
    reason: Reason, started: bool, kind: Failure
) -> None:
    assert lifecycle.failure_kind(reason, started=started) is kind


def test_the_failed_status_carries_the_kind() -> None:
    pending = operation()
    refused = lifecycle.failed(pending, reason="Pair", message="refused", now=NOW, refused=True)
    assert (refused.phase, refused.failure) == (Phase.FAILED, Failure.REFUSED)
    no_credentials = lifecycle.failed(
        pending, reason=Reason.CREDENTIALS_UNUSABLE, message="no talosconfig", now=NOW,
        refused=True, kind=Failure.NOT_STARTED,
    )  # fmt: skip
    assert no_credentials.failure is Failure.NOT_STARTED
    never = lifecycle.failed(pending, reason=Reason.JOB_FAILED, message="deadline", now=NOW)
    assert never.failure is Failure.NOT_STARTED
    seen = operation(status={"phase": "Running", "upgradeStartedAt": STARTED})
    assert seen.status.upgrade_started_at is not None
    ran = lifecycle.failed(seen, reason=Reason.JOB_FAILED, message="node did not boot", now=NOW)
    assert ran.failure is Failure.UPGRADE_FAILED
    assert ran.to_api()["failure"] == "UpgradeFailed"
    assert ran.to_api()["upgradeStartedAt"] == STARTED
    marked = lifecycle.step_seen(operation(status={"phase": "Running"}), NOW)
    assert marked.upgrade_started_at == NOW
