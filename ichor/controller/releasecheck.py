"""The release check: list the published Talos, Kubernetes and Ichor releases into the
IchorInstallation singleton's status.

Every ``spec.releaseCheck.interval`` (6h by default; at once after a spec change) the check
lists three OCI repositories concurrently with the tag lister (``ichor.registry``): Talos
(``installer-base``), Kubernetes (``kubelet``) and the Ichor chart. It writes
``status.upgradeTargets`` (the final ``vX.Y.Z`` releases, newest first, and each list's
error), ``status.latestRelease`` (the newest final chart version and whether it is newer
than the running Ichor) and the conditions ``ReleasesListed``, ``IchorUpgradeAvailable`` and
``Ready`` (which kstatus, ``kubectl wait`` and the GitOps tools read).
The TalosCluster controller watches the object and recomputes every cluster's choices.

What it refuses to do:

- lose a good list: a failed listing keeps its last good list and records its own error,
  and never marks another list unavailable; a failed chart listing touches only
  ``latestRelease``. A status that does not load is read field by field, so one bad
  field costs only that field;
- list Cilium: ``cilium`` and ``ciliumError`` that an earlier controller wrote are cleared
  (Cilium moves only to the chart this Ichor embeds);
- post an Event per tick: an Event goes out when a list newly fails or recovers, judged
  against the recorded status, so a restart does not repeat it;
- write outside ``/status``, or over a newer state: the status patch carries the
  resourceVersion it was computed from, so a concurrent writer makes it recompute.

Why not ``kopf.timer``: kopf attaches its finalizer to every object with a timer or daemon,
so the singleton could not be deleted while the operator is gone (``helm uninstall``
removes both at once), and the controller's rule is to write nothing to an object but its
status. The timer is therefore the operator's own task, fed by an ``on.event`` watch of the
singleton: it sleeps until the next check is due (from ``checkedAt`` in the status, so a
restart does not list again early), wakes on any change of the object, and idles while
the object is absent or the check is off.

One replica runs each check, through the object itself rather than kopf's peering: kopf
pauses its watches on a peer that is not the leader, but not a task of ours, and a timer
would bring the finalizer back. So when a check falls due the task waits a random moment
(``jitter``), reads the object afresh and checks again whether it is due; another
replica's recent ``checkedAt`` makes it sleep on. Two replicas that still list together
write once: the second write fails on its resourceVersion, and a re-read showing a check
newer than its own start drops its result. With one replica (``ICHOR_PEERING`` unset) this
costs one read per check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeVar

import aiohttp
import kopf
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException
from pydantic import BaseModel, ValidationError

from ichor import registry
from ichor.api import kinds
from ichor.api.conditions import (
    Condition,
    ConditionStatus,
    InstallationConditionType,
    InstallationReason,
)
from ichor.api.ichorinstallation import (
    IchorInstallationSpec,
    LatestRelease,
    PullSecretRef,
    UpgradeTargets,
)
from ichor.kube import conditions as kube_conditions
from ichor.kube import events, metrics
from ichor.kube.clients import REQUEST_TIMEOUT, KubeconfigError, operator_client, read_secret_key
from ichor.kube.events import EventType
from ichor.kube.patching import MERGE_PATCH, merge_patch
from ichor.release.versions import Version, VersionError, parse
from ichor.settings import ReleaseCheckSettings, Settings
from ichor.upgrade.targets import finals

logger = logging.getLogger(__name__)

#: The memo keys of the running check and of settings a caller may pass in.
RELEASE_CHECK = "ichor_release_check"
SETTINGS = "ichor_release_check_settings"
#: The data key of a ``kubernetes.io/dockerconfigjson`` Secret.
DOCKER_CONFIG_KEY = ".dockerconfigjson"

M = TypeVar("M", bound=BaseModel)


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


# --- merging a listing into the recorded status ------------------------------------------


def read_model(model: type[M], raw: object) -> M | None:
    """``raw`` as ``model``; when the whole does not load, the fields that do (a bad field
    costs that field only). None when ``raw`` is absent, not an object, or lacks a
    required field."""
    if not isinstance(raw, Mapping):
        return None
    try:
        return model.model_validate(raw)
    except ValidationError:
        pass
    good: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            model.model_validate({key: value})
        except ValidationError:
            continue
        good[key] = value
    try:
        return model.model_validate(good)
    except ValidationError:
        return None


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
    for kind, listing, kept in (
        (ListKind.TALOS, talos, before.talos),
        (ListKind.KUBERNETES, kubernetes, before.kubernetes),
    ):
        if isinstance(listing, Listed):
            lists[kind], errors[kind] = release_tags(listing.tags), None
        else:
            lists[kind], errors[kind] = kept, listing.error
    joined = "; ".join(error for error in errors.values() if error)
    return UpgradeTargets(
        checked_at=now,
        talos=lists[ListKind.TALOS],
        kubernetes=lists[ListKind.KUBERNETES],
        talos_error=errors[ListKind.TALOS],
        kubernetes_error=errors[ListKind.KUBERNETES],
        error=joined or None,
    )


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
    return LatestRelease(
        checked_at=now,
        version=version,
        running=running,
        newer=_newer(version, running) if version is not None else False,
        error=error,
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


class EventReason(StrEnum):
    LISTING_FAILED = "ReleaseListingFailed"
    LISTING_RECOVERED = "ReleaseListingRecovered"


@dataclass(frozen=True)
class PlannedEvent:
    type: EventType
    reason: EventReason
    message: str


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
                    EventReason.LISTING_FAILED,
                    f"{label} releases could not be listed: {now}; {keeps}",
                )
            )
        elif was and not now:
            planned.append(
                PlannedEvent(
                    EventType.NORMAL,
                    EventReason.LISTING_RECOVERED,
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
    previous_targets = read_model(UpgradeTargets, raw_status.get("upgradeTargets"))
    previous_latest = read_model(LatestRelease, raw_status.get("latestRelease"))
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


# --- settings and the running check ------------------------------------------------------


@dataclass(frozen=True)
class _Attempt:
    """The last check this process ran: the watch may not have shown its write yet."""

    at: datetime
    generation: int | None
    listing_failed: bool
    write_failed: bool


def _generation(body: Mapping[str, Any]) -> int | None:
    value = (body.get("metadata") or {}).get("generation")
    return int(value) if value is not None else None


def _checked_at(body: Mapping[str, Any]) -> datetime | None:
    targets = read_model(UpgradeTargets, (body.get("status") or {}).get("upgradeTargets"))
    return targets.checked_at if targets is not None else None


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class ReleaseCheck:
    """The singleton's timer: one task, one check at a time, woken by the watch."""

    def __init__(self, *, api: ApiClient, settings: ReleaseCheckSettings) -> None:
        self.api = api
        self.settings = settings
        self.lister = registry.TagLister(limits=settings.limits)
        self.body: Mapping[str, Any] | None = None
        self.checks = 0
        self._attempt: _Attempt | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reported_spec: int | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ichor-release-check")

    async def stop(self, *, grace: float = 5.0) -> None:
        """Let a check in flight finish its write (within ``grace`` seconds), then end."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True
            self._wake.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=grace)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.lister.close()

    def installation_event(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        if (body.get("metadata") or {}).get("name") != kinds.INSTALLATION_NAME:
            return
        self.body = None if event_type == "DELETED" else body
        self._wake.set()

    # --- when -------------------------------------------------------------------------

    def delay(self, now: datetime) -> float | None:
        """Seconds until the next check of the object last seen; None: idle."""
        body = self.body
        if body is None:
            return None
        generation = _generation(body)
        try:
            spec = IchorInstallationSpec.model_validate(body.get("spec") or {}).release_check
            interval = parse_interval(spec.interval)
        except (ValidationError, ValueError) as error:
            if self._reported_spec != generation:
                self._reported_spec = generation
                logger.warning(
                    "release check idle: the IchorInstallation spec is unusable: %s", error
                )
            return None
        if self.settings.max_interval is not None:
            interval = min(interval, self.settings.max_interval)
        status: Mapping[str, Any] = body.get("status") or {}
        targets = read_model(UpgradeTargets, status.get("upgradeTargets"))
        latest = read_model(LatestRelease, status.get("latestRelease"))
        checked_at = targets.checked_at if targets is not None else None
        failed = bool(
            (targets is not None and (targets.talos_error or targets.kubernetes_error))
            or (latest is not None and latest.error)
        )
        observed = status.get("observedGeneration")
        spec_changed = generation is not None and generation != observed
        attempt = self._attempt
        retry = self.settings.retry_failed
        if attempt is not None:
            if checked_at is None or attempt.at > checked_at:
                checked_at = attempt.at
                failed = attempt.listing_failed or attempt.write_failed
                if attempt.write_failed:
                    retry = self.settings.retry_write
            if attempt.generation == generation:
                spec_changed = False
        return due_in(
            enabled=spec.enabled,
            interval=interval,
            retry=retry,
            checked_at=checked_at,
            failed=failed,
            spec_changed=spec_changed,
            now=now,
        )

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            delay = self.delay(_utcnow())
            if delay is not None and delay <= 0:
                if not await self._still_due():
                    continue
                body = self.body
                try:
                    await self.check()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("release check failed unexpectedly")
                    self._attempt = _Attempt(
                        at=_utcnow(),
                        generation=_generation(body) if body is not None else None,
                        listing_failed=True,
                        write_failed=True,
                    )
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=delay)

    async def _still_due(self) -> bool:
        """Wait a moment (jitter), read the object afresh and judge again: another replica
        may have checked meanwhile, or the watch may lag behind (a paused peer)."""
        if self.settings.jitter > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._wake.wait(), timeout=random.uniform(0, self.settings.jitter)
                )
            if self._stopping:
                return False
        try:
            fresh = await self._read()
        except (ApiException, aiohttp.ClientError, TimeoutError) as error:
            logger.info(
                "IchorInstallation not read before the check (%s); the watch's copy is used", error
            )
        else:
            self.body = fresh
        delay = self.delay(_utcnow())
        return delay is not None and delay <= 0

    # --- one check --------------------------------------------------------------------

    async def _pull_secret(self, ref: PullSecretRef | None) -> tuple[bytes | None, str | None]:
        """The ``.dockerconfigjson`` of the pull Secret, or why it cannot be read."""
        if ref is None:
            return None, None
        try:
            found = await read_secret_key(
                self.api, namespace=ref.namespace, name=ref.name, key=DOCKER_CONFIG_KEY
            )
        except KubeconfigError as error:
            return None, f"the pull secret cannot be used: {error}"
        except (ApiException, aiohttp.ClientError, TimeoutError) as error:
            return None, f"the pull secret {ref.namespace}/{ref.name} was not read: {error}"
        return found.value, None

    async def _list(
        self, reference: str, *, docker_config: bytes | None, secret_error: str | None
    ) -> Listing:
        if secret_error is not None:
            return Failed(f"cannot list tags of {reference}: {secret_error}")
        credentials: registry.Credentials | None = None
        try:
            if docker_config is not None:
                host = registry.parse(reference).host
                try:
                    credentials = registry.credentials_from_docker_config(docker_config, host=host)
                except ValueError as error:
                    return Failed(f"cannot list tags of {reference}: the pull secret holds {error}")
            return Listed(tuple(await self.lister.list_tags(reference, credentials=credentials)))
        except registry.ListingError as error:
            return Failed(str(error))
        except (aiohttp.ClientError, OSError, ValueError) as error:
            logger.exception("listing %s failed unexpectedly", reference)
            return Failed(f"cannot list tags of {reference}: {type(error).__name__}: {error}")

    async def check(self) -> None:
        """List the three repositories and write the result; Events after the write."""
        body = self.body
        if body is None:
            return
        generation = _generation(body)
        try:
            spec = IchorInstallationSpec.model_validate(body.get("spec") or {}).release_check
        except ValidationError:
            return  # delay() reports it and idles
        started = datetime.now(UTC)
        docker_config, secret_error = await self._pull_secret(spec.pull_secret_ref)
        talos, kubernetes, chart = await asyncio.gather(
            *(
                self._list(reference, docker_config=docker_config, secret_error=secret_error)
                for reference in (
                    spec.talos_repository,
                    spec.kubernetes_repository,
                    spec.chart_repository,
                )
            )
        )
        results: dict[ListKind, Listing] = {
            ListKind.TALOS: talos,
            ListKind.KUBERNETES: kubernetes,
            ListKind.CHART: chart,
        }
        metrics.lists_checked(
            {k: len(r.tags) if isinstance(r, Listed) else None for k, r in results.items()}
        )
        now = _utcnow()
        self.checks += 1
        listing_failed = any(isinstance(result, Failed) for result in results.values())
        for _ in range(3):
            step = next_status(
                body.get("status") or {},
                results=results,
                running=self.settings.running_version,
                chart_repository=spec.chart_repository,
                generation=generation,
                now=now,
            )
            try:
                written = await self._write(body, step.patch)
            except ApiException as error:
                if error.status == 404:
                    return  # deleted meanwhile: the watch says so
                if error.status == 409:
                    fresh = await self._read()
                    if fresh is None:
                        return
                    body = fresh
                    recorded = _checked_at(fresh)
                    if recorded is not None and recorded > started:
                        # another replica checked after this one began: its lists stand
                        self.body = fresh
                        self._attempt = _Attempt(
                            at=recorded,
                            generation=_generation(fresh),
                            listing_failed=listing_failed,
                            write_failed=False,
                        )
                        return
                    continue
                logger.warning("release check status not written: %s", error)
            except (aiohttp.ClientError, TimeoutError) as error:
                logger.warning("release check status not written: %s", error)
            else:
                self._attempt = _Attempt(
                    at=now, generation=generation, listing_failed=listing_failed, write_failed=False
                )
                metrics.release_check_written(listing_failed=listing_failed)
                if written is not None:
                    self.body = written
                await self._post(written or body, step.events)
                return
            break
        self._attempt = _Attempt(
            at=now, generation=generation, listing_failed=listing_failed, write_failed=True
        )

    async def _read(self) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await client.CustomObjectsApi(
                self.api
            ).get_cluster_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                kinds.Plural.ICHOR_INSTALLATIONS,
                kinds.INSTALLATION_NAME,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    async def _write(
        self, body: Mapping[str, Any], patch: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Merge-patch ``/status``, on condition that the object is still the one read."""
        if not patch:
            return None
        request: dict[str, Any] = {"status": dict(patch)}
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            request["metadata"] = {"resourceVersion": version}
        written: dict[str, Any] = await client.CustomObjectsApi(
            self.api
        ).patch_cluster_custom_object_status(
            kinds.GROUP,
            kinds.VERSION,
            kinds.Plural.ICHOR_INSTALLATIONS,
            kinds.INSTALLATION_NAME,
            request,
            _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # missing from the stubs
            _request_timeout=REQUEST_TIMEOUT,
        )
        return written

    async def _post(self, body: Mapping[str, Any], planned: Sequence[PlannedEvent]) -> None:
        involved = events.reference(body)
        for event in planned:
            try:
                await events.emit(
                    self.api, involved, type_=event.type, reason=event.reason, message=event.message
                )
            except (ApiException, aiohttp.ClientError, TimeoutError) as error:
                logger.warning(
                    "event %s on the IchorInstallation not posted: %s", event.reason, error
                )


# --- kopf wiring --------------------------------------------------------------------------


async def stop(memo: kopf.Memo, **_: Any) -> None:
    check = memo.get(RELEASE_CHECK)
    if isinstance(check, ReleaseCheck):
        await check.stop()
        await check.api.close()


async def installation_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    check = memo.get(RELEASE_CHECK)
    if isinstance(check, ReleaseCheck):
        check.installation_event(event.get("type"), event["object"])


def register(registry_: kopf.OperatorRegistry, *, settings: Settings | None = None) -> None:
    """Put the release check's handlers into ``registry_``; ``settings`` (else the
    environment's, read at start) are the operator's, a ``SETTINGS`` memo entry wins for
    the check's own part."""

    async def start(memo: kopf.Memo, **_: Any) -> None:
        given = memo.get(SETTINGS)
        running = settings if settings is not None else Settings.from_env()
        check = ReleaseCheck(
            api=await operator_client(kube=running.kube),
            settings=given if isinstance(given, ReleaseCheckSettings) else running.release_check,
        )
        check.start()
        memo[RELEASE_CHECK] = check

    kopf.on.startup(id="releasecheck-start", registry=registry_)(start)
    kopf.on.cleanup(id="releasecheck-stop", registry=registry_)(stop)
    kopf.on.event(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.ICHOR_INSTALLATIONS,
        id="releasecheck-installation",
        registry=registry_,
    )(installation_event)
