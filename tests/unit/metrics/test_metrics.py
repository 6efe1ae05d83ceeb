"""The operator's metrics: each function the controller and webhook call moves its series."""

from __future__ import annotations

import urllib.request
from datetime import UTC, datetime, timedelta

import pytest

from ichor.api.taloscluster import ChoiceGroup, UpgradeChoices
from ichor.kube import metrics


def sample(name: str, **labels: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.mark.parametrize(
    ("allowed", "overridden", "result"),
    [(True, False, "allowed"), (False, False, "refused"), (True, True, "overridden")],
)
def test_webhook_decision_is_counted_by_result(
    allowed: bool, overridden: bool, result: str
) -> None:
    before = sample("ichor_webhook_decisions_total", result=result)
    metrics.webhook_decided(allowed=allowed, overridden=overridden)
    assert sample("ichor_webhook_decisions_total", result=result) == before + 1


def test_a_failed_list_counts_an_error_and_keeps_the_last_count() -> None:
    metrics.lists_checked({"talos": 42, "kubernetes": 7})
    errors = sample("ichor_release_check_list_errors_total", list="kubernetes")
    metrics.lists_checked({"talos": 43, "kubernetes": None})
    assert sample("ichor_release_check_listed_tags", list="talos") == 43
    assert sample("ichor_release_check_listed_tags", list="kubernetes") == 7
    assert sample("ichor_release_check_list_errors_total", list="kubernetes") == errors + 1


@pytest.mark.parametrize(("listing_failed", "moves"), [(False, True), (True, False)])
def test_success_time_moves_only_when_every_list_succeeded(
    listing_failed: bool, moves: bool
) -> None:
    metrics.release_check_written(listing_failed=False, at=1000.0)
    metrics.release_check_written(listing_failed=listing_failed, at=2000.0)
    expected = 2000.0 if moves else 1000.0
    assert sample("ichor_release_check_last_success_timestamp_seconds") == expected


def test_upgrades_available_per_component_and_gone_with_the_cluster() -> None:
    choices = UpgradeChoices(
        talos=ChoiceGroup(
            recommended="v1.14.3", patch=("v1.14.3", "v1.14.2"), next_minor=(), available=True
        ),
        kubernetes=ChoiceGroup(patch=("v1.36.7",), available=False),
    )
    metrics.upgrades_available(namespace="ns", cluster="prod", choices=choices)
    assert (
        sample("ichor_upgrades_available", namespace="ns", cluster="prod", component="talos") == 2
    )
    assert (
        sample("ichor_upgrades_available", namespace="ns", cluster="prod", component="kubernetes")
        == 0
    )
    metrics.cluster_forgotten(("ns", "prod"))
    assert (
        metrics.REGISTRY.get_sample_value(
            "ichor_upgrades_available", {"namespace": "ns", "cluster": "prod", "component": "talos"}
        )
        is None
    )


@pytest.mark.parametrize("result", list(metrics.Result))
def test_operation_counted_with_its_duration(result: metrics.Result) -> None:
    created = (datetime.now(UTC) - timedelta(seconds=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = {"type": "talos", "result": result.value}
    count = sample("ichor_operations_total", **labels)
    total = sample("ichor_operation_duration_seconds_sum", **labels)
    metrics.operation_finished(type_="talos", result=result, created=created)
    assert sample("ichor_operations_total", **labels) == count + 1
    assert 89 <= sample("ichor_operation_duration_seconds_sum", **labels) - total <= 120


def test_serve_exposes_the_metrics_over_http() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    metrics.serve(port=port, addr="127.0.0.1")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    assert "ichor_webhook_decisions_total" in text


def test_auto_patch_window_gauges_follow_the_decision_and_go_with_the_cluster() -> None:
    start = datetime(2026, 6, 1, 2, 0, tzinfo=UTC)
    metrics.auto_patch_window(namespace="ns", cluster="ap", open_=True, next_start=start)
    assert sample("ichor_auto_patch_window_open", namespace="ns", cluster="ap") == 1
    assert (
        sample("ichor_auto_patch_next_window_timestamp_seconds", namespace="ns", cluster="ap")
        == start.timestamp()
    )
    metrics.auto_patch_window(namespace="ns", cluster="ap", open_=False, next_start=None)
    assert sample("ichor_auto_patch_window_open", namespace="ns", cluster="ap") == 0
    metrics.auto_patch_window(namespace="ns", cluster="ap", open_=None, next_start=None)
    assert (
        metrics.REGISTRY.get_sample_value(
            "ichor_auto_patch_window_open", {"namespace": "ns", "cluster": "ap"}
        )
        is None
    )
    metrics.auto_patch_window(namespace="ns", cluster="ap", open_=True, next_start=start)
    metrics.cluster_forgotten(("ns", "ap"))
    assert (
        metrics.REGISTRY.get_sample_value(
            "ichor_auto_patch_window_open", {"namespace": "ns", "cluster": "ap"}
        )
        is None
    )


def test_auto_patch_runs_gates_and_halts_are_counted() -> None:
    runs = sample("ichor_auto_patch_runs_total", result="failed")
    gates = sample("ichor_auto_patch_gate_failures_total", gate="NodesNotReady")
    halts = sample("ichor_auto_patch_halts_total", component="talos")
    metrics.auto_patch_run(result="Failed")
    metrics.auto_patch_gate_failed(gate="NodesNotReady")
    metrics.auto_patch_halted(component="talos")
    assert sample("ichor_auto_patch_runs_total", result="failed") == runs + 1
    assert sample("ichor_auto_patch_gate_failures_total", gate="NodesNotReady") == gates + 1
    assert sample("ichor_auto_patch_halts_total", component="talos") == halts + 1
