"""The release check: list the published Talos, Kubernetes and Ichor releases into the
IchorInstallation singleton's status.

Every ``spec.releaseCheck.interval`` (at once after a spec change) it lists three OCI
repositories concurrently (``ichor.registry``) and writes ``status.upgradeTargets``,
``status.latestRelease`` and the conditions ``ReleasesListed``, ``IchorUpgradeAvailable``
and ``Ready``. A failed listing keeps its last good list; an Event goes out only when a
list newly fails or recovers; the write carries the resourceVersion it came from. The
timer is the operator's own task, not ``kopf.timer``, and one replica runs each check.
More in docs/design/notes.md, "ichor/controller/releasecheck/check.py".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes.aio.client.api_client import ApiClient
from pydantic import ValidationError

from ichor import registry
from ichor.api import kinds, owed
from ichor.api.ichorinstallation import (
    IchorInstallationSpec,
    PullSecretRef,
    ReleaseCheckSpec,
    read_status,
)
from ichor.controller.releasecheck.decisions import (
    Attempt,
    Failed,
    Listed,
    Listing,
    ListKind,
    Step,
    due_in,
    last_check,
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
        self._attempt: Attempt | None = None
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
        timing = self._timing(body, generation)
        if timing is None:
            return None
        enabled, interval = timing
        last = last_check(
            read_status(body.get("status")),
            self._attempt,
            generation=generation,
            retry_failed=self.settings.retry_failed,
            retry_write=self.settings.retry_write,
        )
        return due_in(
            enabled=enabled,
            interval=interval,
            retry=last.retry,
            checked_at=last.checked_at,
            failed=last.failed,
            spec_changed=last.spec_changed,
            now=now,
        )

    def _timing(self, body: Mapping[str, Any], generation: int | None) -> tuple[bool, float] | None:
        """Whether the check is on and its interval (at most ``max_interval``); None, said
        once per generation, when the spec is unusable."""
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
        return spec.enabled, interval

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
                    self._attempt = Attempt(
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
        results = await self._listings(spec)
        metrics.lists_checked(
            {k: len(r.tags) if isinstance(r, Listed) else None for k, r in results.items()}
        )
        now = clock.now()
        self.checks += 1
        attempt = Attempt(
            at=now,
            generation=generation,
            listing_failed=any(isinstance(result, Failed) for result in results.values()),
            write_failed=False,
        )
        await self._record(body, spec, results, attempt=attempt, started=started)

    async def _listings(self, spec: ReleaseCheckSpec) -> dict[ListKind, Listing]:
        """The three repositories, listed together with the pull Secret's credentials."""
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
        return {ListKind.TALOS: talos, ListKind.KUBERNETES: kubernetes, ListKind.CHART: chart}

    async def _record(
        self,
        body: Mapping[str, Any],
        spec: ReleaseCheckSpec,
        results: Mapping[ListKind, Listing],
        *,
        attempt: Attempt,
        started: datetime,
    ) -> None:
        """Write the lists into the status, computed again from a fresh read after a
        conflict (three times at most); ``attempt`` is what this check ran."""
        for _ in range(3):
            step = next_status(
                body.get("status") or {},
                results=results,
                running=self.settings.running_version,
                chart_repository=spec.chart_repository,
                generation=attempt.generation,
                now=attempt.at,
            )
            try:
                written = await self._write(body, _owing(body, step, now=attempt.at))
            except errors.NotFound:
                return  # deleted meanwhile: the watch says so
            except errors.Conflict:
                fresh = await self._unchecked(started, listing_failed=attempt.listing_failed)
                if fresh is None:
                    return
                body = fresh
                continue
            except errors.FAILED as error:
                logger.warning("release check status not written: %s", error)
            else:
                await self._recorded(written, attempt)
                return
            break
        self._attempt = replace(attempt, write_failed=True)

    async def _unchecked(
        self, started: datetime, *, listing_failed: bool
    ) -> Mapping[str, Any] | None:
        """The object read afresh after a conflict; None when it is gone, or when another
        replica checked after this one began (its lists stand)."""
        fresh = await self._read()
        if fresh is None:
            return None
        recorded = _checked_at(fresh)
        if recorded is not None and recorded > started:
            self.body = fresh
            self._attempt = Attempt(
                at=recorded,
                generation=bodies.generation(fresh),
                listing_failed=listing_failed,
                write_failed=False,
            )
            return None
        return fresh

    async def _recorded(self, written: Mapping[str, Any] | None, attempt: Attempt) -> None:
        self._attempt = attempt
        metrics.release_check_written(listing_failed=attempt.listing_failed)
        if written is not None:
            self.body = written
            await self._flush(written)

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
