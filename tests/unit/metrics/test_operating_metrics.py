"""The metrics an alert reads: the build, operations that have not ended and how long they
may run, clusters by condition, each release list's last success, and the webhook's
latency and denials, each with its labels bounded."""

from __future__ import annotations

import asyncio
import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import kopf
import pytest
from aiohttp import streams
from aiohttp.test_utils import make_mocked_request

from ichor.api.conditions import Condition, ConditionStatus
from ichor.kube import metrics
from ichor.release.release_set import PINNED
from ichor.settings import ExecutorSettings, OperationSettings, package_version
from ichor.webhook import decisions, handlers, intake, judgement, server
from tests.unit.metrics.test_metrics import sample
from tests.unit.webhook.test_server import GOOD_REVIEW

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_build_info_names_this_build_and_its_release_set() -> None:
    assert (
        sample(
            "ichor_build_info",
            version=package_version(),
            python=platform.python_version(),
            talos=PINNED.talos,
            kubernetes=PINNED.kubernetes,
            cilium_chart=PINNED.cilium_chart,
        )
        == 1
    )


def _started(**labels: str) -> float | None:
    return metrics.REGISTRY.get_sample_value("ichor_operation_started_timestamp_seconds", labels)


def test_a_running_operation_reports_its_start_and_goes_when_it_ends() -> None:
    running = metrics.active_operation(
        name="op-1", type_="talos", phase="Running", started=NOW, created="2026-03-01T11:00:00Z"
    )
    pending = metrics.active_operation(
        name="op-2", type_="kubernetes", phase=None, started=None, created="2026-03-01T11:30:00Z"
    )
    metrics.operations_listed(
        namespace="ns", cluster="prod", operations=[running, pending], fresh_for=60
    )
    labels = {"namespace": "ns", "cluster": "prod"}
    assert _started(**labels, operation="op-1", type="talos", phase="Running") == NOW.timestamp()
    # Pending counts from its creation (never written: a new operation has no phase yet)
    created = datetime(2026, 3, 1, 11, 30, tzinfo=UTC).timestamp()
    assert _started(**labels, operation="op-2", type="kubernetes", phase="Pending") == created
    ended = metrics.active_operation(
        name="op-1", type_="talos", phase="Succeeded", started=NOW, created="2026-03-01T11:00:00Z"
    )
    assert ended is None
    metrics.operations_listed(namespace="ns", cluster="prod", operations=[ended], fresh_for=60)
    assert _started(**labels, operation="op-1", type="talos", phase="Running") is None
    assert _started(**labels, operation="op-2", type="kubernetes", phase="Pending") is None


def test_a_cluster_not_listed_again_stops_reporting_its_operations() -> None:
    """A replica that stopped running the executor, or a cluster it lost, must not show
    an operation running for ever (the alert on its age would fire for nothing)."""
    active = metrics._Operations()
    op = metrics.ActiveOperation(name="op", type="talos", phase="Running", since=1.0)
    active.listed(("ns", "stale"), (op,), fresh_for=10, now=100.0)
    assert len(active.current(now=109.0)) == 1
    assert active.current(now=111.0) == []


@pytest.mark.parametrize(
    ("type_", "phase"), [("upgrade", "Running"), ("talos", "Exploded"), ("cni", "Failed")]
)
def test_a_type_or_phase_outside_the_api_makes_no_series(type_: str, phase: str) -> None:
    assert (
        metrics.active_operation(name="x", type_=type_, phase=phase, started=NOW, created="")
        is None
    )


def test_the_fresh_window_outlasts_the_executors_own_resync() -> None:
    settings = OperationSettings(resync_interval=30, retry_delay=5)
    assert metrics.fresh_for(settings) >= 10 * 30
    slow = OperationSettings(resync_interval=120, retry_delay=5)
    assert metrics.fresh_for(slow) >= 10 * 120


def test_deadlines_are_the_jobs_plus_the_wait_for_the_nodes() -> None:
    settings = OperationSettings(
        node_version_deadline=600, executor=ExecutorSettings(active_deadline_seconds=3600)
    )
    metrics.operation_deadlines(settings)
    assert sample("ichor_operation_deadline_seconds", type="talos") == 4200
    assert sample("ichor_operation_deadline_seconds", type="kubernetes") == 4200
    assert sample("ichor_operation_deadline_seconds", type="cni") == 3600


def _condition(type_: str, status: str, reason: str) -> Condition:
    return Condition(
        type=type_, status=ConditionStatus(status), reason=reason, last_transition_time=NOW
    )


def _clusters(condition: str, status: str, reason: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "ichor_clusters", {"condition": condition, "status": status, "reason": reason}
    )
    return 0.0 if value is None else value


def test_clusters_are_counted_by_condition_and_a_deleted_one_is_not() -> None:
    before = _clusters("Ready", "False", "WorkloadUnreachable")
    for name in ("a", "b"):
        metrics.cluster_conditions(
            namespace="count",
            cluster=name,
            conditions=[_condition("Ready", "False", "WorkloadUnreachable")],
        )
    assert _clusters("Ready", "False", "WorkloadUnreachable") == before + 2
    # a cluster's next reconcile replaces its conditions, never adds to them
    metrics.cluster_conditions(
        namespace="count", cluster="a", conditions=[_condition("Ready", "True", "Observed")]
    )
    assert _clusters("Ready", "False", "WorkloadUnreachable") == before + 1
    metrics.cluster_forgotten(("count", "b"))
    assert _clusters("Ready", "False", "WorkloadUnreachable") == before
    metrics.cluster_forgotten(("count", "a"))


def test_a_condition_value_outside_the_api_is_counted_as_other() -> None:
    """Conditions come from the status the controller computes; a value no enum holds
    (an older Ichor's reason, garbage) must not become a label value of its own."""
    garbage = [_condition(f"Type{i}", "True", f"Reason{i}") for i in range(50)]
    metrics.cluster_conditions(namespace="garbage", cluster="g", conditions=garbage)
    assert _clusters("Other", "True", "Other") >= 50
    names = {
        tuple(s.labels.values())
        for family in metrics.CLUSTERS.collect()
        for s in family.samples
        if "Reason7" in s.labels.values() or "Type7" in s.labels.values()
    }
    assert names == set()
    metrics.cluster_forgotten(("garbage", "g"))


def test_each_release_list_reports_its_last_success_and_none_while_the_check_is_off() -> None:
    talos = datetime(2026, 3, 1, tzinfo=UTC)
    metrics.release_lists_recorded({"talos": talos, "kubernetes": None, "chart": NOW})
    value = "ichor_release_check_list_last_success_timestamp_seconds"
    assert sample(value, list="talos") == talos.timestamp()
    assert metrics.REGISTRY.get_sample_value(value, {"list": "kubernetes"}) is None
    assert sample(value, list="chart") == NOW.timestamp()
    metrics.release_lists_recorded(None)
    for name in metrics.RELEASE_LISTS:
        assert metrics.REGISTRY.get_sample_value(value, {"list": name}) is None


@pytest.mark.parametrize(
    ("reason", "code", "counted"),
    [
        ("TalosKubernetes", 403, "TalosKubernetes"),
        ("StatusWrite", 403, "StatusWrite"),
        (None, 400, "Unreadable"),
        (None, 503, "Unavailable"),
        (None, 403, "Refused"),
        ("a reason no one named" * 10, 403, "Other"),
    ],
)
def test_a_denial_is_counted_by_a_reason_from_a_fixed_set(
    reason: str | None, code: int, counted: str
) -> None:
    before = sample("ichor_webhook_denials_total", reason=counted)
    metrics.webhook_denied(reason=reason, code=code)
    assert sample("ichor_webhook_denials_total", reason=counted) == before + 1


def test_every_denial_of_the_webhook_carries_a_reason_of_the_fixed_set() -> None:
    """Each Answer the decisions give for a denial names a reason the metric keeps."""
    source = Path(decisions.__file__).read_text() + Path(judgement.__file__).read_text()
    assert source.count("allowed=False") == source.count("reason=")
    for named in (
        "Adoption",
        "StatusWrite",
        "OverrideVerb",
        "ClusterNotFound",
        "Unreadable",
        "Undecided",
        "QueueFull",
        "SecretNotReadable",
        "HealthCheckBudget",
        "Stamp",
        "OperatorMark",
        "UnhaltRequest",
    ):
        assert f'reason="{named}"' in source
        assert named in metrics.DENIAL_REASONS


def _request(body: bytes, path: str) -> Any:
    protocol = mock.Mock(_reading_paused=False)
    payload = streams.StreamReader(protocol, 2**16, loop=asyncio.get_running_loop())
    payload.feed_data(body)
    payload.feed_eof()
    return make_mocked_request(
        "POST",
        f"/{path}",
        headers={"Content-Length": str(len(body)), "Content-Type": "application/json"},
        match_info={"id": path},
        payload=payload,
    )


async def _kopf_refusing(request: Any, *, webhook: str | None = None, **_: Any) -> Any:
    """kopf with the real handlers' delivery of a rule's denial."""
    answer = decisions.Answer(
        allowed=False, message="no", code=decisions.Code.FORBIDDEN, reason="TalosKubernetes"
    )
    try:
        handlers.deliver(answer, [], path=webhook or "")
    except kopf.AdmissionError as error:
        return {
            "response": {
                "uid": request["request"]["uid"],
                "allowed": False,
                "status": {"code": error.code, "message": str(error)},
            }
        }
    raise AssertionError("deliver allowed a denial")


async def test_the_endpoint_times_each_review_and_counts_the_handlers_reason(
    tmp_path: Path,
) -> None:
    endpoint = server.AdmissionServer(port=1, certfile=tmp_path / "c", pkeyfile=tmp_path / "k")
    latency = "ichor_webhook_request_duration_seconds_count"
    before = sample(latency, webhook="taloscluster")
    denied = sample("ichor_webhook_denials_total", reason="TalosKubernetes")
    body = json.dumps(GOOD_REVIEW).encode()
    response = await endpoint.reply(_kopf_refusing, _request(body, "taloscluster"))
    assert isinstance(response.body, bytes)
    assert json.loads(response.body)["response"]["allowed"] is False
    assert sample(latency, webhook="taloscluster") == before + 1
    assert sample("ichor_webhook_denials_total", reason="TalosKubernetes") == denied + 1


async def test_a_path_no_handler_serves_is_timed_as_other_and_denied_as_unreadable(
    tmp_path: Path,
) -> None:
    """A caller naming any path it likes must not grow the label's values."""
    endpoint = server.AdmissionServer(port=1, certfile=tmp_path / "c", pkeyfile=tmp_path / "k")
    before = sample("ichor_webhook_request_duration_seconds_count", webhook="other")
    refused = sample("ichor_webhook_denials_total", reason="Unreadable")
    for i in range(5):
        body = json.dumps(GOOD_REVIEW).encode()
        await endpoint.reply(_kopf_refusing, _request(body, f"made-up-{i}"))
    assert sample("ichor_webhook_request_duration_seconds_count", webhook="other") == before + 5
    assert sample("ichor_webhook_denials_total", reason="Unreadable") == refused + 5
    labels = {
        s.labels.get("webhook")
        for family in metrics.REGISTRY.collect()
        if family.name == "ichor_webhook_request_duration_seconds"
        for s in family.samples
    }
    assert not any(str(label).startswith("made-up") for label in labels)


async def test_an_unreadable_body_is_counted_as_unreadable(tmp_path: Path) -> None:
    endpoint = server.AdmissionServer(port=1, certfile=tmp_path / "c", pkeyfile=tmp_path / "k")
    before = sample("ichor_webhook_denials_total", reason="Unreadable")
    await endpoint.reply(_kopf_refusing, _request(b"{not json", "taloscluster"))
    assert sample("ichor_webhook_denials_total", reason="Unreadable") == before + 1
    assert intake._DENIED.get() is None  # the reasons stay inside the one review
