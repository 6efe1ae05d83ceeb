"""The release check's decisions, pure: what a listing gave (``Listed``/``Failed``), when
the next check is due, how the lists, the latest chart release and the conditions merge
into the IchorInstallation's status, and which Events a change earns. No I/O: the check
(``check``) lists and writes; these functions say what to write.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from ichor.api.conditions import (
    Condition,
    ConditionStatus,
    InstallationConditionType,
    InstallationReason,
)
from ichor.api.events import ReleaseCheckEventReason
from ichor.api.ichorinstallation import (
    IchorInstallationStatus,
    LatestRelease,
    UpgradeTargets,
    read_status,
)
from ichor.api.reading import read_model
from ichor.kube import conditions as kube_conditions
from ichor.kube.bodies import EventType, PlannedEvent, merge_patch
from ichor.release.versions import Version, VersionError, parse
from ichor.upgrade.choices import finals

# --- what a listing gave ------------------------------------------------------------------


class ListKind(StrEnum):
    TALOS = "talos"
    KUBERNETES = "kubernetes"
    CHART = "chart"


LABELS: dict[ListKind, str] = {
    ListKind.TALOS: "Talos",
    ListKind.KUBERNETES: "Kubernetes",
    ListKind.CHART: "Ichor chart",
}


@dataclass(frozen=True)
class Listed:
    """Every tag of a repository, as the registry listed them."""

    tags: tuple[str, ...]


@dataclass(frozen=True)
class Failed:
    """Why a listing did not finish (the lister's sentence: repository and cause)."""

    error: str


Listing = Listed | Failed


# --- the interval -------------------------------------------------------------------------

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_interval(text: str) -> float:
    """Seconds of a duration as the CRD accepts it (``6h``, ``30m``, ``1h30m``, ``1.5h``);
    ValueError for anything else."""
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        total += float(match[1]) * _UNIT_SECONDS[match[2]]
        position = match.end()
    if not text or position != len(text):
        raise ValueError(f"interval {text!r} is not a duration such as 6h or 30m")
    return total


def due_in(
    *,
    enabled: bool,
    interval: float,
    retry: float,
    checked_at: datetime | None,
    failed: bool,
    spec_changed: bool,
    now: datetime,
) -> float | None:
    """Seconds until the next check (zero or less: now), or None: idle (the check is off).

    A spec change, or no check recorded yet, makes a check due at once; after a failed
    listing the next one comes after ``min(interval, retry)``, so a passing outage does
    not leave a list stale for a whole interval.
    """
    if not enabled:
        return None
    if spec_changed or checked_at is None:
        return 0.0
    wait = min(interval, retry) if failed else interval
    return (checked_at + timedelta(seconds=wait) - now).total_seconds()


@dataclass(frozen=True)
class Attempt:
    """The last check this process ran: the watch may not have shown its write yet."""

    at: datetime
    generation: int | None
    listing_failed: bool
    write_failed: bool


@dataclass(frozen=True)
class LastCheck:
    """The last check, as the next one is timed from it: when it ran, whether it failed,
    the wait after a failure, and whether the spec changed since."""

    checked_at: datetime | None
    failed: bool
    retry: float
    spec_changed: bool


def last_check(
    status: IchorInstallationStatus,
    attempt: Attempt | None,
    *,
    generation: int | None,
    retry_failed: float,
    retry_write: float,
) -> LastCheck:
    """The last check as the status records it, or as this process ran it when that is
    newer (its write failed: retried after ``retry_write``)."""
    targets, latest = status.upgrade_targets, status.latest_release
    recorded = LastCheck(
        checked_at=targets.checked_at if targets is not None else None,
        failed=bool(
            (targets is not None and (targets.talos_error or targets.kubernetes_error))
            or (latest is not None and latest.error)
        ),
        retry=retry_failed,
        spec_changed=generation is not None and generation != status.observed_generation,
    )
    if attempt is None:
        return recorded
    return _with_attempt(recorded, attempt, generation=generation, retry_write=retry_write)


def _with_attempt(
    recorded: LastCheck, attempt: Attempt, *, generation: int | None, retry_write: float
) -> LastCheck:
    last = recorded
    if last.checked_at is None or attempt.at > last.checked_at:
        last = replace(
            last,
            checked_at=attempt.at,
            failed=attempt.listing_failed or attempt.write_failed,
            retry=retry_write if attempt.write_failed else last.retry,
        )
    if attempt.generation == generation:
        last = replace(last, spec_changed=False)
    return last


# --- merging a listing into the recorded status ------------------------------------------


def release_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """The final ``vX.Y.Z`` releases among tags, newest first (the rules' ``finals``)."""
    return tuple(version.tag for version in finals(tags))


def chart_versions(tags: Sequence[str]) -> list[Version]:
    """The final chart versions, newest first. Chart tags carry no leading ``v`` (Helm
    pushes ``0.2.0``); one with a ``v`` counts the same."""
    return finals(tag if tag.startswith("v") else f"v{tag}" for tag in tags)


def previous_error(targets: UpgradeTargets | None, kind: ListKind) -> str | None:
    """The last recorded failure of one list. A status an earlier controller wrote has only
    ``error``, which then counts against every list."""
    if targets is None:
        return None
    own = targets.talos_error if kind is ListKind.TALOS else targets.kubernetes_error
    if own or targets.talos_error or targets.kubernetes_error:
        return own
    return targets.error


def merge_targets(
    previous: UpgradeTargets | None,
    *,
    talos: Listing,
    kubernetes: Listing,
    now: datetime,
) -> UpgradeTargets:
    """The new ``upgradeTargets``: each listed list replaced, each failed one kept with its
    own error, ``error`` joining them, and no Cilium list."""
    before = previous or UpgradeTargets()
    lists: dict[ListKind, tuple[str, ...] | None] = {}
    errors: dict[ListKind, str | None] = {}
    times: dict[ListKind, _Times] = {}
    for kind, listing, kept in (
        (ListKind.TALOS, talos, before.talos),
        (ListKind.KUBERNETES, kubernetes, before.kubernetes),
    ):
        if isinstance(listing, Listed):
            lists[kind], errors[kind] = release_tags(listing.tags), None
        else:
            lists[kind], errors[kind] = kept, listing.error
        times[kind] = _times(
            listed=isinstance(listing, Listed),
            now=now,
            listed_at=getattr(before, f"{kind.value}_listed_at"),
            failing_since=getattr(before, f"{kind.value}_failing_since"),
            checked_at=before.checked_at,
            had_list=kept is not None,
            had_error=previous_error(previous, kind) is not None,
        )
    joined = "; ".join(error for error in errors.values() if error)
    return UpgradeTargets(
        checked_at=now,
        talos=lists[ListKind.TALOS],
        kubernetes=lists[ListKind.KUBERNETES],
        talos_error=errors[ListKind.TALOS],
        kubernetes_error=errors[ListKind.KUBERNETES],
        error=joined or None,
        talos_listed_at=times[ListKind.TALOS].listed_at,
        kubernetes_listed_at=times[ListKind.KUBERNETES].listed_at,
        talos_failing_since=times[ListKind.TALOS].failing_since,
        kubernetes_failing_since=times[ListKind.KUBERNETES].failing_since,
    )


@dataclass(frozen=True)
class _Times:
    listed_at: datetime | None
    failing_since: datetime | None


def _times(
    *,
    listed: bool,
    now: datetime,
    listed_at: datetime | None,
    failing_since: datetime | None,
    checked_at: datetime | None,
    had_list: bool,
    had_error: bool,
) -> _Times:
    """When a list was last listed whole, and since when it fails (None: it does not).

    A status an earlier Ichor wrote has neither: its ``checkedAt`` is when the list was
    last listed if that check recorded it without an error, and when its failures began at
    the latest if it recorded an error.
    """
    if listed_at is None and had_list and not had_error:
        listed_at = checked_at
    if listed:
        return _Times(listed_at=now, failing_since=None)
    if failing_since is None:
        failing_since = checked_at if had_error and checked_at is not None else now
    return _Times(listed_at=listed_at, failing_since=failing_since)


def last_successes(
    status: Mapping[str, Any], *, created: datetime | None = None
) -> dict[ListKind, datetime | None]:
    """Per list, when it was last listed whole; for a list never listed, when its failures
    began; for a list never checked, ``created`` (the object's creation). The moment from
    which an alert counts how long a list has gone without a success (None: none known).
    A status an earlier Ichor wrote has only ``checkedAt``, which stands for either."""
    targets = read_model(UpgradeTargets, status.get("upgradeTargets")) or UpgradeTargets()
    latest = read_model(LatestRelease, status.get("latestRelease")) or LatestRelease()
    rows = (
        (ListKind.TALOS, targets.talos_listed_at, targets.talos_failing_since, targets),
        (
            ListKind.KUBERNETES,
            targets.kubernetes_listed_at,
            targets.kubernetes_failing_since,
            targets,
        ),
        (ListKind.CHART, latest.listed_at, latest.failing_since, latest),
    )
    found: dict[ListKind, datetime | None] = {}
    for kind, listed_at, failing_since, recorded in rows:
        found[kind] = listed_at or failing_since or recorded.checked_at or created
    return found


def _newer(version: str | None, running: str) -> bool | None:
    if version is None:
        return None
    try:
        return parse(version) > parse(running)
    except VersionError:
        return None


def merge_latest(
    previous: LatestRelease | None, *, chart: Listing, running: str, now: datetime
) -> LatestRelease:
    """The new ``latestRelease``: the newest final chart version, or on a failure the last
    one with the error; ``newer`` is judged against the Ichor running now."""
    if isinstance(chart, Listed):
        found = chart_versions(chart.tags)
        version = str(found[0]) if found else None
        error = None
    else:
        version = previous.version if previous is not None else None
        error = chart.error
    before = previous or LatestRelease()
    times = _times(
        listed=isinstance(chart, Listed),
        now=now,
        listed_at=before.listed_at,
        failing_since=before.failing_since,
        checked_at=before.checked_at,
        had_list=before.version is not None,
        had_error=before.error is not None,
    )
    return LatestRelease(
        checked_at=now,
        version=version,
        running=running,
        newer=_newer(version, running) if version is not None else False,
        error=error,
        listed_at=times.listed_at,
        failing_since=times.failing_since,
    )


def _count(releases: Sequence[str] | None) -> str:
    if releases is None:
        return "no list yet"
    return f"{len(releases)} release" + ("" if len(releases) == 1 else "s")


def check_conditions(
    *,
    targets: UpgradeTargets,
    latest: LatestRelease,
    repository: str,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """``ReleasesListed``, ``IchorUpgradeAvailable`` and ``Ready`` as this check found
    them."""
    failures = [e for e in (targets.talos_error, targets.kubernetes_error, latest.error) if e]
    if failures:
        listed = Condition(
            type=InstallationConditionType.RELEASES_LISTED,
            status=ConditionStatus.FALSE,
            reason=InstallationReason.LISTING_FAILED,
            message="; ".join(failures) + " (the last good lists are kept)",
            observed_generation=generation,
            last_transition_time=now,
        )
    else:
        listed = Condition(
            type=InstallationConditionType.RELEASES_LISTED,
            status=ConditionStatus.TRUE,
            reason=InstallationReason.LISTED,
            message=(
                f"Talos ({_count(targets.talos)}), Kubernetes ({_count(targets.kubernetes)}) "
                f"and the Ichor chart were listed"
            ),
            observed_generation=generation,
            last_transition_time=now,
        )
    stale = f"; the last chart listing failed ({latest.error})" if latest.error else ""
    if latest.version is None and latest.error:
        status, reason = ConditionStatus.UNKNOWN, InstallationReason.LIST_UNAVAILABLE
        message = f"no Ichor release is known: {latest.error}"
    elif latest.newer:
        status, reason = ConditionStatus.TRUE, InstallationReason.UPGRADE_AVAILABLE
        message = (
            f"Ichor {latest.version} is published in {repository} (this is {latest.running}): "
            f"upgrade the chart for its release set and fixes{stale}"
        )
    elif latest.version is None:
        status, reason = ConditionStatus.FALSE, InstallationReason.UP_TO_DATE
        message = f"{repository} holds no final Ichor release"
    elif latest.newer is None:
        status, reason = ConditionStatus.UNKNOWN, InstallationReason.LIST_UNAVAILABLE
        message = (
            f"Ichor {latest.version} is published, and the running version "
            f"{latest.running!r} cannot be compared with it{stale}"
        )
    else:
        status, reason = ConditionStatus.FALSE, InstallationReason.UP_TO_DATE
        message = (
            f"Ichor {latest.running} is up to date: the newest final release in "
            f"{repository} is {latest.version}{stale}"
        )
    upgrade = Condition(
        type=InstallationConditionType.ICHOR_UPGRADE_AVAILABLE,
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
        last_transition_time=now,
    )
    # Ready follows ReleasesListed: a failed listing is retried at the next check, so it
    # is False (kstatus: InProgress), never Stalled.
    ready = listed.model_copy(update={"type": InstallationConditionType.READY})
    return [listed, upgrade, ready]


def listing_events(
    *,
    before: Mapping[ListKind, str | None],
    after: Mapping[ListKind, str | None],
    held: Mapping[ListKind, str | None],
) -> list[PlannedEvent]:
    """An Event for each list that newly failed or recovered; none for a list whose state
    did not change (a failure whose wording changed is the same failure).

    ``before``/``after``: each list's error; ``held``: what each list holds after the
    merge, for a person (``12 releases``, ``0.2.0``; None: nothing recorded yet)."""
    planned: list[PlannedEvent] = []
    for kind in ListKind:
        was, now = before.get(kind), after.get(kind)
        label = LABELS[kind]
        holding = held.get(kind)
        if now and not was:
            keeps = (
                "nothing was recorded yet"
                if holding is None
                else f"what was last listed ({holding}) is kept"
            )
            planned.append(
                PlannedEvent(
                    EventType.WARNING,
                    ReleaseCheckEventReason.LISTING_FAILED,
                    f"{label} releases could not be listed: {now}; {keeps}",
                )
            )
        elif was and not now:
            planned.append(
                PlannedEvent(
                    EventType.NORMAL,
                    ReleaseCheckEventReason.LISTING_RECOVERED,
                    f"{label} releases are listed again ({holding or 'none published'})",
                )
            )
    return planned


@dataclass(frozen=True)
class Step:
    """What one check writes: the status merge patch (empty: nothing) and its Events."""

    patch: dict[str, Any]
    events: tuple[PlannedEvent, ...]
    targets: UpgradeTargets
    latest: LatestRelease


OWNED_CONDITIONS = frozenset(InstallationConditionType)


def _merge_conditions(
    raw: object, updates: Sequence[Condition], *, now: datetime
) -> list[dict[str, Any]]:
    """The conditions list with ours merged (transition times kept when the status
    holds); other types, readable or not, are kept as they are, in place."""
    listed: list[Any] = list(raw) if isinstance(raw, list) else []
    ours = [
        condition
        for item in listed
        if isinstance(item, Mapping) and item.get("type") in OWNED_CONDITIONS
        for condition in [read_model(Condition, item)]
        if condition is not None
    ]
    merged = {c.type: c.to_api() for c in kube_conditions.merge(ours, updates, now=now)}
    result: list[dict[str, Any]] = []
    for item in listed:
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind in merged:
            result.append(merged.pop(kind))
        elif kind not in OWNED_CONDITIONS:
            result.append(item)
    result.extend(merged.values())
    return result


def next_status(
    raw_status: Mapping[str, Any],
    *,
    results: Mapping[ListKind, Listing],
    running: str,
    chart_repository: str,
    generation: int | None,
    now: datetime,
) -> Step:
    """The whole decision of one check, pure: merge the listings into the recorded status,
    and plan the Events of the lists that newly failed or recovered."""
    previous = read_status(raw_status)
    previous_targets, previous_latest = previous.upgrade_targets, previous.latest_release
    targets = merge_targets(
        previous_targets,
        talos=results[ListKind.TALOS],
        kubernetes=results[ListKind.KUBERNETES],
        now=now,
    )
    latest = merge_latest(previous_latest, chart=results[ListKind.CHART], running=running, now=now)
    updates = check_conditions(
        targets=targets,
        latest=latest,
        repository=chart_repository,
        generation=generation,
        now=now,
    )
    new: dict[str, Any] = {
        "upgradeTargets": targets.to_api(),
        "latestRelease": latest.to_api(),
        "conditions": _merge_conditions(raw_status.get("conditions"), updates, now=now),
    }
    if generation is not None:
        new["observedGeneration"] = generation
    old = {key: raw_status[key] for key in new if key in raw_status}
    before = {
        ListKind.TALOS: previous_error(previous_targets, ListKind.TALOS),
        ListKind.KUBERNETES: previous_error(previous_targets, ListKind.KUBERNETES),
        ListKind.CHART: previous_latest.error if previous_latest else None,
    }
    after = {
        ListKind.TALOS: targets.talos_error,
        ListKind.KUBERNETES: targets.kubernetes_error,
        ListKind.CHART: latest.error,
    }
    held = {
        ListKind.TALOS: None if targets.talos is None else _count(targets.talos),
        ListKind.KUBERNETES: None if targets.kubernetes is None else _count(targets.kubernetes),
        ListKind.CHART: None if latest.version is None else f"newest {latest.version}",
    }
    planned = listing_events(before=before, after=after, held=held)
    return Step(patch=merge_patch(old, new), events=tuple(planned), targets=targets, latest=latest)
