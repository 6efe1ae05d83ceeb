"""Merging a listing into the recorded status: what is kept, replaced, cleared and said."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ichor.api.ichorinstallation import LatestRelease, UpgradeTargets
from ichor.api.reading import read_model
from ichor.controller.releasecheck.decisions import (
    Failed,
    Listed,
    Listing,
    ListKind,
    chart_versions,
    merge_latest,
    merge_targets,
    next_status,
    previous_error,
)

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
BEFORE = "2026-12-03T02:00:00Z"
TALOS_TAGS = ("v1.14.3", "1.14.9", "v1.14.4", "v1.15.0-beta.0", "v1.13.2", "v1.14.4")
KUBERNETES_TAGS = ("v1.36.6", "v1.37.1", "1.37.2", "v1.36.7+build")
CHART_TAGS = ("0.1.0", "0.2.0", "0.3.0-rc.1", "latest", "v0.2.1")
TALOS_ERROR = "cannot list tags of ghcr.io/siderolabs/installer-base: the registry is down"
KUBERNETES_ERROR = "cannot list tags of ghcr.io/siderolabs/kubelet: no such repository"
CHART_ERROR = "cannot list tags of ghcr.io/ichor-dev/charts/ichor: 403 Forbidden"
PREVIOUS = UpgradeTargets(
    checked_at=datetime(2026, 12, 3, 2, 0, tzinfo=UTC),
    talos=("v1.14.3",),
    kubernetes=("v1.36.6",),
)


def step(
    raw: dict[str, Any],
    *,
    talos: Listing | None = None,
    kubernetes: Listing | None = None,
    chart: Listing | None = None,
    running: str = "0.1.0",
) -> Any:
    return next_status(
        raw,
        results={
            ListKind.TALOS: talos or Listed(TALOS_TAGS),
            ListKind.KUBERNETES: kubernetes or Listed(KUBERNETES_TAGS),
            ListKind.CHART: chart or Listed(CHART_TAGS),
        },
        running=running,
        chart_repository="ghcr.io/ichor-dev/charts/ichor",
        generation=3,
        now=NOW,
    )


def test_a_listing_records_the_final_releases_newest_first() -> None:
    merged = merge_targets(
        None, talos=Listed(TALOS_TAGS), kubernetes=Listed(KUBERNETES_TAGS), now=NOW
    )
    assert merged.talos == ("v1.14.4", "v1.14.3", "v1.13.2")
    assert merged.kubernetes == ("v1.37.1", "v1.36.6")
    assert (merged.talos_error, merged.kubernetes_error, merged.error) == (None, None, None)
    assert merged.checked_at == NOW


@pytest.mark.parametrize(
    ("talos", "kubernetes", "expected_talos", "expected_kubernetes", "error"),
    [
        (
            Failed(TALOS_ERROR),
            Listed(KUBERNETES_TAGS),
            ("v1.14.3",),
            ("v1.37.1", "v1.36.6"),
            TALOS_ERROR,
        ),
        (
            Listed(TALOS_TAGS),
            Failed(KUBERNETES_ERROR),
            ("v1.14.4", "v1.14.3", "v1.13.2"),
            ("v1.36.6",),
            KUBERNETES_ERROR,
        ),
        (
            Failed(TALOS_ERROR),
            Failed(KUBERNETES_ERROR),
            ("v1.14.3",),
            ("v1.36.6",),
            f"{TALOS_ERROR}; {KUBERNETES_ERROR}",
        ),
    ],
    ids=["talos fails", "kubernetes fails", "both fail"],
)
def test_a_failed_list_keeps_its_last_good_list_and_records_only_its_own_error(
    talos: Listing,
    kubernetes: Listing,
    expected_talos: tuple[str, ...],
    expected_kubernetes: tuple[str, ...],
    error: str,
) -> None:
    merged = merge_targets(PREVIOUS, talos=talos, kubernetes=kubernetes, now=NOW)
    assert merged.talos == expected_talos
    assert merged.kubernetes == expected_kubernetes
    assert merged.talos_error == (TALOS_ERROR if isinstance(talos, Failed) else None)
    assert merged.kubernetes_error == (KUBERNETES_ERROR if isinstance(kubernetes, Failed) else None)
    assert merged.error == error


def test_a_failure_before_any_good_list_records_no_list() -> None:
    merged = merge_targets(None, talos=Failed(TALOS_ERROR), kubernetes=Listed(()), now=NOW)
    assert merged.talos is None  # "no list yet", not "no release"
    assert merged.kubernetes == ()
    assert merged.talos_error == TALOS_ERROR


def test_an_empty_listing_is_an_empty_list_not_a_failure() -> None:
    merged = merge_targets(PREVIOUS, talos=Listed(("latest",)), kubernetes=Listed(()), now=NOW)
    assert (merged.talos, merged.kubernetes, merged.error) == ((), (), None)


def test_the_cilium_list_of_an_earlier_controller_is_cleared() -> None:
    raw = {
        "upgradeTargets": {
            "checkedAt": BEFORE,
            "talos": ["v1.14.3"],
            "cilium": ["1.20.5"],
            "ciliumError": "signature did not verify",
        }
    }
    patch = step(raw).patch
    assert patch["upgradeTargets"]["cilium"] is None
    assert patch["upgradeTargets"]["ciliumError"] is None


@pytest.mark.parametrize(
    ("tags", "newest"),
    [
        (CHART_TAGS, "0.2.1"),
        (("0.10.0", "0.9.0"), "0.10.0"),
        (("1.0.0-rc.1", "0.9.0+build"), None),
        ((), None),
    ],
)
def test_the_newest_chart_version_counts_finals_with_or_without_v(
    tags: tuple[str, ...], newest: str | None
) -> None:
    found = chart_versions(tags)
    assert (str(found[0]) if found else None) == newest


@pytest.mark.parametrize(
    ("running", "newer"),
    [("0.1.0", True), ("0.2.1", False), ("0.3.0", False), ("not-a-version", None)],
)
def test_latest_release_says_whether_it_is_newer_than_the_running_ichor(
    running: str, newer: bool | None
) -> None:
    latest = merge_latest(None, chart=Listed(CHART_TAGS), running=running, now=NOW)
    assert latest.version == "0.2.1"
    assert latest.running == running
    assert latest.newer is newer
    assert latest.error is None


def test_a_failed_chart_listing_keeps_the_last_version_judged_against_the_running_ichor() -> None:
    previous = LatestRelease(version="0.2.0", running="0.1.0", newer=True)
    latest = merge_latest(previous, chart=Failed(CHART_ERROR), running="0.2.0", now=NOW)
    assert latest.version == "0.2.0"
    assert latest.newer is False  # this Ichor was upgraded meanwhile
    assert latest.error == CHART_ERROR


def test_a_failed_chart_listing_never_touches_the_talos_and_kubernetes_lists() -> None:
    raw = {"upgradeTargets": PREVIOUS.to_api()}
    result = step(
        raw, talos=Listed(("v1.14.3",)), kubernetes=Listed(("v1.36.6",)), chart=Failed(CHART_ERROR)
    )
    targets = result.patch["upgradeTargets"]
    # only the times moved: the check's, and each listed list's
    assert set(targets) == {"checkedAt", "talosListedAt", "kubernetesListedAt"}
    assert result.latest.error == CHART_ERROR
    assert result.targets.error is None


def test_a_status_field_that_does_not_load_costs_only_that_field() -> None:
    raw = {
        "upgradeTargets": {
            "checkedAt": "not a time",
            "talos": ["v1.14.3"],
            "kubernetes": "not a list",
        }
    }
    previous = read_model(UpgradeTargets, raw["upgradeTargets"])
    assert previous is not None
    assert previous.talos == ("v1.14.3",)
    assert previous.kubernetes is None
    result = step(raw, talos=Failed(TALOS_ERROR))
    assert result.targets.talos == ("v1.14.3",)  # the good list survives the bad neighbour


@pytest.mark.parametrize("raw", [None, "text", 3, ["a"]])
def test_a_status_part_that_is_not_an_object_reads_as_absent(raw: object) -> None:
    assert read_model(UpgradeTargets, raw) is None


@pytest.mark.parametrize(
    ("targets", "talos", "kubernetes"),
    [
        (None, None, None),
        (UpgradeTargets(error="old failure"), "old failure", "old failure"),
        (UpgradeTargets(error="x", talos_error="t"), "t", None),
        (UpgradeTargets(error="x", kubernetes_error="k"), None, "k"),
    ],
    ids=["nothing", "an earlier controller's error counts for both", "talos", "kubernetes"],
)
def test_the_previous_error_of_each_list(
    targets: UpgradeTargets | None, talos: str | None, kubernetes: str | None
) -> None:
    assert previous_error(targets, ListKind.TALOS) == talos
    assert previous_error(targets, ListKind.KUBERNETES) == kubernetes


def test_other_conditions_and_status_fields_are_left_alone() -> None:
    other = {
        "type": "SomethingElse",
        "status": "True",
        "reason": "Kept",
        "lastTransitionTime": BEFORE,
    }
    raw = {"conditions": [other], "someNewerField": {"a": 1}}
    patch = step(raw).patch
    assert "someNewerField" not in patch
    assert patch["conditions"][0] == other
    assert {c["type"] for c in patch["conditions"]} == {
        "SomethingElse",
        "ReleasesListed",
        "IchorUpgradeAvailable",
        "Ready",
    }


def test_an_unchanged_condition_keeps_its_transition_time() -> None:
    first = step({})
    raw: dict[str, Any] = {
        **first.patch,
        "upgradeTargets": {**first.patch["upgradeTargets"], "checkedAt": BEFORE},
        "conditions": [{**c, "lastTransitionTime": BEFORE} for c in first.patch["conditions"]],
    }
    again = step(raw)
    assert "conditions" not in again.patch  # same statuses, same times: nothing to write
    assert again.patch["upgradeTargets"] == {"checkedAt": "2026-12-03T08:00:00Z"}


@pytest.mark.parametrize(
    ("chart", "running", "status", "reason", "words"),
    [
        (Listed(CHART_TAGS), "0.1.0", "True", "UpgradeAvailable", "Ichor 0.2.1 is published"),
        (Listed(CHART_TAGS), "0.2.1", "False", "UpToDate", "Ichor 0.2.1 is up to date"),
        (Listed(()), "0.1.0", "False", "UpToDate", "holds no final Ichor release"),
        (Failed(CHART_ERROR), "0.1.0", "Unknown", "ListUnavailable", "403 Forbidden"),
        (Listed(CHART_TAGS), "dev", "Unknown", "ListUnavailable", "cannot be compared"),
    ],
    ids=["newer", "up to date", "none published", "never listed", "running unknown"],
)
def test_the_ichor_upgrade_condition(
    chart: Listing, running: str, status: str, reason: str, words: str
) -> None:
    patch = step({}, chart=chart, running=running).patch
    (found,) = [c for c in patch["conditions"] if c["type"] == "IchorUpgradeAvailable"]
    assert (found["status"], found["reason"]) == (status, reason)
    assert words in found["message"]
    assert found["observedGeneration"] == 3


def test_a_stale_newer_release_stays_offered_with_the_listing_error() -> None:
    raw = {"latestRelease": {"version": "0.2.0", "running": "0.1.0", "newer": True}}
    patch = step(raw, chart=Failed(CHART_ERROR)).patch
    (found,) = [c for c in patch["conditions"] if c["type"] == "IchorUpgradeAvailable"]
    assert found["status"] == "True"
    assert "the last chart listing failed" in found["message"]


@pytest.mark.parametrize(
    ("talos", "chart", "status", "reason"),
    [
        (Listed(TALOS_TAGS), Listed(CHART_TAGS), "True", "Listed"),
        (Failed(TALOS_ERROR), Listed(CHART_TAGS), "False", "ListingFailed"),
        (Listed(TALOS_TAGS), Failed(CHART_ERROR), "False", "ListingFailed"),
    ],
)
def test_releases_listed_says_whether_every_repository_was_listed(
    talos: Listing, chart: Listing, status: str, reason: str
) -> None:
    patch = step({}, talos=talos, chart=chart).patch
    (found,) = [c for c in patch["conditions"] if c["type"] == "ReleasesListed"]
    assert (found["status"], found["reason"]) == (status, reason)


def test_the_observed_generation_is_the_spec_the_check_used() -> None:
    assert step({"observedGeneration": 1}).patch["observedGeneration"] == 3
