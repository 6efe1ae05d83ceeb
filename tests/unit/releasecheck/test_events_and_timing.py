"""When the check runs, and which checks post an Event: only a new failure or a recovery."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ichor.api.events import ReleaseCheckEventReason
from ichor.api.ichorinstallation import IchorInstallationStatus, read_status
from ichor.controller.releasecheck.decisions import (
    Attempt,
    Failed,
    LastCheck,
    Listed,
    Listing,
    ListKind,
    _with_attempt,
    due_in,
    last_check,
    listing_events,
    next_status,
    parse_interval,
)
from ichor.kube.bodies import EventType

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
DOWN = "cannot list tags of ghcr.io/siderolabs/kubelet: the registry is unreachable"
GOOD: dict[ListKind, Listing] = {
    ListKind.TALOS: Listed(("v1.14.3", "v1.14.4")),
    ListKind.KUBERNETES: Listed(("v1.36.6",)),
    ListKind.CHART: Listed(("0.1.0",)),
}


def check(raw: dict[str, Any], results: dict[ListKind, Listing]) -> Any:
    return next_status(
        raw,
        results=results,
        running="0.1.0",
        chart_repository="ghcr.io/ichor-dev/charts/ichor",
        generation=1,
        now=NOW,
    )


def apply(raw: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386: what the API server makes of the merge patch."""
    merged = dict(raw)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = apply(merged[key], value)
        else:
            merged[key] = value
    return merged


def run(sequence: list[dict[ListKind, Listing]]) -> list[list[tuple[EventType, str, str]]]:
    """The Events of each check in turn, each check starting from the status the last wrote."""
    status: dict[str, Any] = {}
    seen = []
    for results in sequence:
        result = check(status, results)
        status = apply(status, result.patch)
        seen.append([(e.type, e.reason, e.message) for e in result.events])
    return seen


def failing(kind: ListKind, error: str = DOWN) -> dict[ListKind, Listing]:
    return {**GOOD, kind: Failed(error)}


def test_an_unchanged_tick_posts_nothing() -> None:
    assert run([GOOD, GOOD, GOOD]) == [[], [], []]


def test_a_failure_posts_one_warning_and_a_recovery_one_normal_event() -> None:
    first, failed, still, other_words, recovered, quiet = run(
        [
            GOOD,
            failing(ListKind.KUBERNETES),
            failing(ListKind.KUBERNETES),
            failing(ListKind.KUBERNETES, DOWN + " (again)"),
            GOOD,
            GOOD,
        ]
    )
    assert first == []
    ((type_, reason, message),) = failed
    assert (type_, reason) == (EventType.WARNING, ReleaseCheckEventReason.LISTING_FAILED)
    assert message == (
        f"Kubernetes releases could not be listed: {DOWN}; what was last listed (1 release) is kept"
    )
    assert still == []
    assert other_words == []
    ((type_, reason, message),) = recovered
    assert (type_, reason) == (EventType.NORMAL, ReleaseCheckEventReason.LISTING_RECOVERED)
    assert message == "Kubernetes releases are listed again (1 release)"
    assert quiet == []


def test_a_failure_on_the_first_check_says_nothing_was_recorded() -> None:
    (events,) = run([failing(ListKind.TALOS)])
    ((_, _, message),) = events
    assert message.endswith("nothing was recorded yet")


def test_each_list_has_its_own_transition() -> None:
    everything_down: dict[ListKind, Listing] = {kind: Failed(DOWN) for kind in ListKind}
    _, down, up_again = run([GOOD, everything_down, failing(ListKind.CHART)])
    assert [reason for _, reason, _ in down] == [ReleaseCheckEventReason.LISTING_FAILED] * 3
    assert [message.split(" releases")[0] for _, _, message in up_again] == [
        "Talos",
        "Kubernetes",
    ]
    assert {reason for _, reason, _ in up_again} == {ReleaseCheckEventReason.LISTING_RECOVERED}


def test_the_chart_event_names_the_version_it_keeps() -> None:
    _, (failed,) = run([GOOD, failing(ListKind.CHART)])
    assert failed[2].endswith("what was last listed (newest 0.1.0) is kept")


def test_an_earlier_controllers_error_counts_as_a_failure_of_both_lists() -> None:
    raw = {"upgradeTargets": {"talos": ["v1.14.3"], "error": "timeout"}}
    result = check(raw, GOOD)
    assert [e.reason for e in result.events] == [ReleaseCheckEventReason.LISTING_RECOVERED] * 2


def test_events_are_planned_from_errors_alone() -> None:
    planned = listing_events(
        before={ListKind.TALOS: "a"},
        after={ListKind.TALOS: "b", ListKind.CHART: "c"},
        held={ListKind.TALOS: "3 releases"},
    )
    assert [(e.reason, e.message) for e in planned] == [
        (
            ReleaseCheckEventReason.LISTING_FAILED,
            "Ichor chart releases could not be listed: c; nothing was recorded yet",
        )
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("6h", 21600), ("30m", 1800), ("1h30m", 5400), ("1.5h", 5400), ("90s", 90), ("500ms", 0.5)],
)
def test_the_interval_reads_the_durations_the_crd_accepts(text: str, seconds: float) -> None:
    assert parse_interval(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "6", "h", "6d", "6h ", "-1h", "1h-30m", "6H"])
def test_an_interval_that_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_interval(text)


HOUR = 3600.0


@pytest.mark.parametrize(
    ("enabled", "checked_ago", "failed", "spec_changed", "expected"),
    [
        (False, None, False, True, None),
        (True, None, False, False, 0.0),
        (True, 1.0, False, True, 0.0),
        (True, 1.0, False, False, 5 * HOUR),
        (True, 7.0, False, False, -1 * HOUR),
        (True, 0.0, True, False, 600.0),
    ],
    ids=[
        "off: idle",
        "never checked: now",
        "spec changed: now",
        "checked an hour ago: in five",
        "overdue: now",
        "failed: after the retry",
    ],
)
def test_when_the_next_check_is_due(
    enabled: bool,
    checked_ago: float | None,
    failed: bool,
    spec_changed: bool,
    expected: float | None,
) -> None:
    checked_at = None if checked_ago is None else NOW - timedelta(hours=checked_ago)
    assert (
        due_in(
            enabled=enabled,
            interval=6 * HOUR,
            retry=600.0,
            checked_at=checked_at,
            failed=failed,
            spec_changed=spec_changed,
            now=NOW,
        )
        == expected
    )


def test_a_retry_never_waits_longer_than_the_interval() -> None:
    assert due_in(
        enabled=True,
        interval=60.0,
        retry=600.0,
        checked_at=NOW,
        failed=True,
        spec_changed=False,
        now=NOW,
    ) == pytest.approx(60.0)


def status(**fields: Any) -> IchorInstallationStatus:
    return read_status(fields)


def attempt(at: datetime, *, generation: int | None = 2, **failed: bool) -> Attempt:
    return Attempt(
        at=at,
        generation=generation,
        listing_failed=failed.get("listing", False),
        write_failed=failed.get("write", False),
    )


def test_last_check_is_the_recorded_one_without_an_attempt() -> None:
    recorded = status(
        upgradeTargets={"checkedAt": "2026-12-03T07:00:00Z", "kubernetesError": "down"},
        observedGeneration=1,
    )
    found = last_check(recorded, None, generation=2, retry_failed=60, retry_write=5)
    assert found == LastCheck(
        checked_at=NOW - timedelta(hours=1), failed=True, retry=60, spec_changed=True
    )
    same = last_check(recorded, None, generation=1, retry_failed=60, retry_write=5)
    assert not same.spec_changed
    chart = status(latestRelease={"error": "no chart"})
    assert last_check(chart, None, generation=None, retry_failed=60, retry_write=5).failed
    assert not last_check(status(), None, generation=None, retry_failed=60, retry_write=5).failed


def test_with_attempt_takes_a_newer_attempt_and_retries_a_failed_write_sooner() -> None:
    recorded = LastCheck(
        checked_at=NOW - timedelta(hours=1), failed=False, retry=60, spec_changed=True
    )
    newer = _with_attempt(recorded, attempt(NOW, write=True), generation=2, retry_write=5)
    assert newer == LastCheck(checked_at=NOW, failed=True, retry=5, spec_changed=False)
    listing = _with_attempt(recorded, attempt(NOW, listing=True), generation=3, retry_write=5)
    assert listing == LastCheck(checked_at=NOW, failed=True, retry=60, spec_changed=True)
    older = attempt(NOW - timedelta(hours=2), write=True)
    assert _with_attempt(recorded, older, generation=3, retry_write=5) == recorded
    unrecorded = replace(recorded, checked_at=None)
    first = _with_attempt(unrecorded, attempt(NOW - timedelta(days=1)), generation=3, retry_write=5)
    assert first.checked_at == NOW - timedelta(days=1)
