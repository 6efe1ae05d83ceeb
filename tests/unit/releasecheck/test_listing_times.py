"""When each list was last listed whole and since when it fails: what an alert counts from
("the release check has not succeeded for a day"), kept across checks and restarts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ichor.api.ichorinstallation import LatestRelease, UpgradeTargets
from ichor.controller.releasecheck.decisions import (
    Failed,
    Listed,
    ListKind,
    last_successes,
    merge_latest,
    merge_targets,
)

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
DOWN = Failed("cannot list tags of ghcr.io/siderolabs/kubelet: the registry is down")


def test_a_listed_list_records_the_check_and_a_failure_keeps_that_time() -> None:
    first = merge_targets(None, talos=Listed(("v1.14.3",)), kubernetes=DOWN, now=T0)
    assert first.talos_listed_at == T0
    assert first.talos_failing_since is None
    assert first.kubernetes_listed_at is None
    assert first.kubernetes_failing_since == T0
    later = merge_targets(first, talos=DOWN, kubernetes=DOWN, now=T0 + 6 * HOUR)
    assert later.talos_listed_at == T0  # the last success stays
    assert later.talos_failing_since == T0 + 6 * HOUR
    assert later.kubernetes_failing_since == T0  # the run of failures began at the first
    recovered = merge_targets(
        later, talos=DOWN, kubernetes=Listed(("v1.36.6",)), now=T0 + 12 * HOUR
    )
    assert recovered.kubernetes_listed_at == T0 + 12 * HOUR
    assert recovered.kubernetes_failing_since is None
    assert recovered.talos_failing_since == T0 + 6 * HOUR


def test_a_status_an_earlier_ichor_wrote_counts_its_check_time() -> None:
    """An earlier Ichor wrote ``checkedAt`` and the errors only: a list it recorded
    without an error was listed at ``checkedAt``; one with an error failed by then."""
    earlier = UpgradeTargets(
        checked_at=T0, talos=("v1.14.3",), kubernetes=("v1.36.6",), kubernetes_error="down"
    )
    merged = merge_targets(earlier, talos=DOWN, kubernetes=DOWN, now=T0 + HOUR)
    assert merged.talos_listed_at == T0
    assert merged.talos_failing_since == T0 + HOUR
    assert merged.kubernetes_listed_at is None
    assert merged.kubernetes_failing_since == T0


def test_the_chart_listing_keeps_its_own_times() -> None:
    first = merge_latest(None, chart=Listed(("0.1.0",)), running="0.1.0", now=T0)
    assert (first.listed_at, first.failing_since) == (T0, None)
    failed = merge_latest(first, chart=DOWN, running="0.1.0", now=T0 + HOUR)
    assert (failed.listed_at, failed.failing_since) == (T0, T0 + HOUR)


def test_the_alert_counts_from_the_last_success_else_the_first_failure_else_creation() -> None:
    targets = UpgradeTargets(
        checked_at=T0 + 2 * HOUR,
        talos=("v1.14.3",),
        talos_listed_at=T0,
        talos_failing_since=T0 + HOUR,
        kubernetes_error="down",
        kubernetes_failing_since=T0 + HOUR,
    )
    status = {"upgradeTargets": targets.to_api()}
    found = last_successes(status, created=T0 - HOUR)
    assert found[ListKind.TALOS] == T0
    assert found[ListKind.KUBERNETES] == T0 + HOUR
    assert found[ListKind.CHART] == T0 - HOUR  # never checked: since the object exists
    assert last_successes({}, created=None)[ListKind.TALOS] is None


def test_a_garbled_time_costs_only_itself() -> None:
    status = {
        "upgradeTargets": {"talosListedAt": "yesterday", "checkedAt": T0.isoformat()},
        "latestRelease": {"listedAt": T0.isoformat()},
    }
    found = last_successes(status)
    assert found[ListKind.TALOS] == T0  # the check's own time stands in
    assert found[ListKind.CHART] == T0
    assert LatestRelease.model_validate(status["latestRelease"]).listed_at == T0
