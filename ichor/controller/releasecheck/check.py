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
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio.client.api_client import ApiClient
from pydantic import ValidationError

from ichor import registry
from ichor.api import kinds, owed
from ichor.api.ichorinstallation import (
    IchorInstallationSpec,
    PullSecretRef,
    read_status,
)
from ichor.controller.releasecheck.decisions import (
    Failed,
    Listed,
    Listing,
    ListKind,
    Step,
    due_in,
    last_successes,
    next_status,
    parse_interval,
)
from ichor.kube import bodies, clock, errors, metrics, objects, owing, patching
from ichor.kube.clients import KubeconfigError, read_secret_key
from ichor.settings import ReleaseCheckSettings

logger = logging.getLogger(__name__)

#: The data key of a ``kubernetes.io/dockerconfigjson`` Secret.
DOCKER_CONFIG_KEY = ".dockerconfigjson"


# --- settings and the running check ------------------------------------------------------


@dataclass(frozen=True)
class _Attempt:
    """The last check this process ran: the watch may not have shown its write yet."""

    at: datetime
    generation: int | None
    listing_failed: bool
    write_failed: bool


def _checked_at(body: Mapping[str, Any]) -> datetime | None:
    targets = read_status(body.get("status")).upgrade_targets
    return targets.checked_at if targets is not None else None


def _successes(body: Mapping[str, Any] | None) -> dict[str, datetime | None] | None:
    """What the metrics count each list's last success from; None while the object is
    absent or the check is off (then no alert should count)."""
    if body is None:
        return None
    try:
        spec = IchorInstallationSpec.model_validate(body.get("spec") or {}).release_check
    except ValidationError:
        return None
    if not spec.enabled:
        return None
    created = (body.get("metadata") or {}).get("creationTimestamp")
    try:
        since = datetime.fromisoformat(str(created).replace("Z", "+00:00")) if created else None
    except ValueError:
        since = None
    found = last_successes(body.get("status") or {}, created=since)
    return {kind.value: moment for kind, moment in found.items()}


class ReleaseCheck:
    """The singleton's timer: one task, one check at a time, woken by the watch."""

    def __init__(self, *, api: ApiClient, settings: ReleaseCheckSettings) -> None:
        self.api = api
        self.settings = settings
        self.lister = registry.TagLister(limits=settings.limits)
        self._body: Mapping[str, Any] | None = None
        self.checks = 0
        self._attempt: _Attempt | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reported_spec: int | None = None
        self._stopping = False

    @property
    def body(self) -> Mapping[str, Any] | None:
        """The singleton as last seen (its watch, or the check's own write)."""
        return self._body

    @body.setter
    def body(self, body: Mapping[str, Any] | None) -> None:
        self._body = body
        metrics.release_lists_recorded(_successes(body))

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
        generation = bodies.generation(body)
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
        status = read_status(body.get("status"))
        targets, latest = status.upgrade_targets, status.latest_release
        checked_at = targets.checked_at if targets is not None else None
        failed = bool(
            (targets is not None and (targets.talos_error or targets.kubernetes_error))
            or (latest is not None and latest.error)
        )
        observed = status.observed_generation
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
            delay = self.delay(clock.now())
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
                        at=clock.now(),
                        generation=bodies.generation(body) if body is not None else None,
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
        except errors.FAILED as error:
            logger.info(
                "IchorInstallation not read before the check (%s); the watch's copy is used", error
            )
        else:
            self.body = fresh
        delay = self.delay(clock.now())
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
        except errors.FAILED as error:
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
        """List the three repositories and write the result with the Events it owes
        (``ichor.api.owed``), then post them."""
        body = self.body
        if body is None:
            return
        if owing.owes(body):
            body = await self._flush(body)
        generation = bodies.generation(body)
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
        now = clock.now()
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
                written = await self._write(body, _owing(body, step, now=now))
            except errors.NotFound:
                return  # deleted meanwhile: the watch says so
            except errors.Conflict:
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
                        generation=bodies.generation(fresh),
                        listing_failed=listing_failed,
                        write_failed=False,
                    )
                    return
                continue
            except errors.FAILED as error:
                logger.warning("release check status not written: %s", error)
            else:
                self._attempt = _Attempt(
                    at=now, generation=generation, listing_failed=listing_failed, write_failed=False
                )
                metrics.release_check_written(listing_failed=listing_failed)
                if written is not None:
                    self.body = written
                    await self._flush(written)
                return
            break
        self._attempt = _Attempt(
            at=now, generation=generation, listing_failed=listing_failed, write_failed=True
        )

    async def _read(self) -> dict[str, Any] | None:
        return await objects.get_installation(self.api)

    async def _write(
        self, body: Mapping[str, Any], patch: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Merge-patch ``/status``, on condition that the object is still the one read."""
        if not patch:
            return None
        version = (body.get("metadata") or {}).get("resourceVersion")
        return await patching.patch_status(
            self.api,
            kind=kinds.Kind.ICHOR_INSTALLATION,
            name=kinds.INSTALLATION_NAME,
            namespace=None,
            status_patch=patch,
            resource_version=str(version) if version else None,
        )

    async def _flush(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """Post the Events the stored status owes; what is left owed is posted at the
        next check. Returns the object as last written."""
        try:
            written = await owing.flush(self.api, kind=kinds.Kind.ICHOR_INSTALLATION, body=body)
        except errors.FAILED as error:
            logger.warning("release check events not posted yet: %s", error)
            return body
        if written is None:
            return body
        self.body = written
        return written


def _owing(body: Mapping[str, Any], step: Step, *, now: datetime) -> dict[str, Any]:
    """``step``'s status patch with the Events it owes (keyed by the object's uid, the
    resourceVersion the step was computed from, the reason and the message)."""
    if not step.events:
        return dict(step.patch)
    meta: Mapping[str, Any] = body.get("metadata") or {}
    uid, version = str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))
    entries: dict[str, Any] = {}
    for event in step.events:
        key = owed.key(uid, version, event.reason, event.message)
        entries[key] = owed.owe(str(event.type), event.reason, event.message, at=now).to_api()
    return {**step.patch, owed.FIELD: entries}
