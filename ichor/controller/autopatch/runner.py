"""Auto-patch's I/O: read what ``decide`` needs, start what it decides, record the fleet's
halts and first-seen times on the IchorInstallation.

The TalosCluster controller calls ``AutoPatcher.reconcile`` after computing the status,
and writes ``status.autoPatch`` and ``AutoPatchReady`` in the same status write. Starts
are taken one at a time for the whole operator, from fresh lists of the API server, so
``maxConcurrentClusters`` holds. The health checks run in the evaluator's worker process
(``evaluator``), never in this one.

More in docs/design/notes.md, "ichor/controller/autopatch/runner.py".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException
from pydantic import ValidationError

from ichor.api import kinds, owed
from ichor.api.autopatch import (
    DEFAULT_HEALTH_CHECK_RESOURCES,
    HALTED_ANNOTATION,
    RESUME_ANNOTATION,
    AutoPatchSpec,
    FleetAutoPatchSpec,
    FleetAutoPatchStatus,
    Halt,
    LastRun,
    RunResult,
    Unhalt,
)
from ichor.api.conditions import Condition
from ichor.api.events import AutoPatchEventReason
from ichor.api.ichorinstallation import read_status
from ichor.api.reading import read_whole
from ichor.api.taloscluster import TalosClusterSpec, TalosClusterStatus
from ichor.api.talosoperation import (
    STARTED_BY_LABEL,
    Failure,
    OperationType,
    Phase,
    StartedBy,
)
from ichor.controller.autopatch import decisions, health
from ichor.controller.autopatch.evaluator import Evaluator
from ichor.controller.autopatch.policy import Policy, effective, max_concurrent
from ichor.controller.talosoperation import creating, start_request
from ichor.kube import bodies, clock, errors, metrics, objects, patching, untrusted
from ichor.upgrade.rule import Component

logger = logging.getLogger(__name__)

#: Seconds the workload's ``/readyz`` may take.
READYZ_TIMEOUT = 5.0
#: Bytes of the ``/readyz`` answer read (its verbose form is a few KiB).
READYZ_MAX_BYTES = 64 * 1024
#: Seconds one health check's evaluation may take: then its worker process is killed.
HEALTH_TIMEOUT = 10.0
#: Seconds ``/readyz`` and every health check may take together (the reconciler passes
#: ``ICHOR_OBSERVE_TIMEOUT``).
ASK_TIMEOUT = 20.0
#: Seconds of evaluation all of one cluster's health checks may take in one look.
HEALTH_LOOK_TIME = 10.0
#: Seconds a check stopped for what it cost (time, CPU, memory, steps) is not evaluated
#: again, unless its expression changes.
HEALTH_RETRY_AFTER = 300.0


def _fleet_record(installation: Mapping[str, Any] | None) -> FleetAutoPatchStatus:
    """The fleet's record of halts and seen releases in ``installation``'s status."""
    return read_status((installation or {}).get("status")).auto_patch or FleetAutoPatchStatus()


async def _read_bounded(stream: Any, limit: int) -> bytes:
    """At most ``limit`` bytes of ``stream`` (an aiohttp StreamReader)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await stream.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


async def _get(
    workload: ApiClient, path: str, *, query: Sequence[tuple[str, str]] = (), limit: int
) -> tuple[int, bytes]:
    """GET ``path`` of the workload's API server: its status and at most ``limit`` bytes of
    its body. ``call_api`` neither raises on a status that is not 2xx nor reads the body:
    the caller checks the status, and the response is released here whatever happens
    (its connection goes back to the pool, or is closed when the body was not read to
    its end)."""
    method, url, headers, _, _ = await workload.param_serialize(
        "GET", path, query_params=list(query), auth_settings=["BearerToken"]
    )
    answered = await workload.call_api(
        method, url, header_params=headers, _request_timeout=READYZ_TIMEOUT
    )
    response = answered.response
    try:
        status = int(response.status)
        raw = await _read_bounded(response.content, limit)
    finally:
        response.release()
    return status, raw


def _last_line(raw: bytes) -> str:
    lines = raw.decode(errors="replace").strip().splitlines()
    return f": {lines[-1][:200]}" if lines else ""


async def probe_readyz(workload: ApiClient) -> decisions.Probe:
    """The workload's ``/readyz``: ready only on a 2xx; else the status and the last line
    of the answer (the failing check, for the API server's verbose answer)."""
    try:
        async with asyncio.timeout(READYZ_TIMEOUT):
            status, raw = await _get(workload, "/readyz", limit=READYZ_MAX_BYTES)
    except ApiException as error:
        body = error.body
        said = _last_line(body if isinstance(body, bytes) else str(body or "").encode())
        return decisions.Probe(ok=False, message=f"answered {error.status}{said}")
    except errors.TRANSIENT as error:
        return decisions.Probe(ok=False, message=f"did not answer: {error or 'timeout'}")
    if not 200 <= status <= 299:
        return decisions.Probe(ok=False, message=f"answered {status}{_last_line(raw)}")
    return decisions.Probe(ok=True)


#: The phases of an operation that runs (or is about to).
_ACTIVE = (None, Phase.PENDING, Phase.RUNNING)


def _names(fleet: FleetAutoPatchStatus, halt: Halt) -> bool:
    """Whether ``fleet`` (as the watch cache shows it) holds a halt of ``halt``'s
    operation: then there is nothing to write."""
    return any(h.operation == halt.operation for h in fleet.halts)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _uid(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")


@dataclass(frozen=True)
class Result:
    """What the cluster controller writes and posts for auto-patch."""

    #: None: no ``status.autoPatch`` (not configured); the condition goes too.
    status: Any
    condition: Condition | None
    events: tuple[bodies.PlannedEvent, ...] = ()
    wake_at: datetime | None = None


def parse_run(body: Mapping[str, Any], *, cluster_uid: str) -> decisions.Run | None:
    meta: Mapping[str, Any] = body.get("metadata") or {}
    spec: Mapping[str, Any] = body.get("spec") or {}
    status: Mapping[str, Any] = body.get("status") or {}
    when = _time(meta.get("creationTimestamp"))
    if when is None:
        return None
    labels = meta.get("labels") or {}
    owners = meta.get("ownerReferences") or []
    owned = any(isinstance(o, Mapping) and o.get("uid") == cluster_uid for o in owners)
    return decisions.Run(
        name=str(meta.get("name") or ""),
        type=str(spec.get("type") or ""),
        version=str(spec.get("version") or ""),
        phase=_phase(status),
        created=when,
        auto_patch=labels.get(STARTED_BY_LABEL) == StartedBy.AUTO_PATCH.value and owned,
        message=str(status["message"]) if status.get("message") else None,
        finished=_time(status.get("finishedAt")),
        halt_recorded=HALTED_ANNOTATION in (meta.get("annotations") or {}),
        failure=_failure(status),
    )


def _failure(status: Mapping[str, Any]) -> Failure | None:
    """``status.failure`` (None: not set, or a kind this operator does not know)."""
    raw = status.get("failure")
    try:
        return Failure(raw) if raw is not None else None
    except ValueError:
        return None


def _trusted(fleet: FleetAutoPatchSpec | None) -> frozenset[str]:
    """The namespaces trusted to halt a version for the fleet."""
    return frozenset((fleet.fleet_halt_namespaces or ()) if fleet else ())


def _time(raw: object) -> datetime | None:
    if not raw:
        return None
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None


def _phase(status: Mapping[str, Any]) -> Phase | None:
    """``status.phase`` (None: not set yet, or a phase this operator does not know)."""
    raw = status.get("phase")
    try:
        return Phase(raw) if raw is not None else None
    except ValueError:
        return None


def parse_fleet_run(body: Mapping[str, Any]) -> decisions.FleetRun | None:
    """An operation of the fleet's auto-patch listing (labelled by the operator)."""
    meta: Mapping[str, Any] = body.get("metadata") or {}
    spec: Mapping[str, Any] = body.get("spec") or {}
    status: Mapping[str, Any] = body.get("status") or {}
    created = _time(meta.get("creationTimestamp"))
    if created is None:
        return None
    ref = (spec.get("clusterRef") or {}).get("name")
    return decisions.FleetRun(
        cluster=f"{meta.get('namespace')}/{ref}",
        operation=str(meta.get("name") or ""),
        component=str(spec.get("type") or ""),
        version=str(spec.get("version") or ""),
        phase=_phase(status),
        created=created,
        finished=_time(status.get("finishedAt")),
        halt_recorded=HALTED_ANNOTATION in (meta.get("annotations") or {}),
        failure=_failure(status),
    )


class AutoPatcher:
    def __init__(
        self,
        *,
        api: ApiClient,
        health_resources: Sequence[str] = DEFAULT_HEALTH_CHECK_RESOURCES,
        clock: Callable[[], datetime] = clock.now,
        ask_timeout: float = ASK_TIMEOUT,
        evaluator: Evaluator | None = None,
    ) -> None:
        self.api = api
        #: Seconds the workload's ``/readyz`` and health checks may take together, so a
        #: slow workload holds its worker no longer (``ICHOR_OBSERVE_TIMEOUT``).
        self.ask_timeout = ask_timeout
        #: The health checks' worker process, started at the first check.
        self.evaluator = evaluator if evaluator is not None else Evaluator()
        #: Checks stopped for what they cost, by (cluster, name, expression): until when
        #: (the event loop's clock) and the verdict said meanwhile.
        self._held: dict[tuple[str, str, str], tuple[float, health.Verdict]] = {}
        #: What a health check may read (``ICHOR_HEALTH_CHECK_RESOURCES``).
        self.health_resources = tuple(health_resources)
        #: The time inside the fleet lock (the workload was asked before, for a while).
        self.clock = clock
        #: Held only around quick reads and writes of the API server: count the fleet,
        #: read its halts, create; or write the fleet's record. Never while asking a
        #: workload cluster.
        self._lock = asyncio.Lock()

    async def _operations(
        self, namespace: str | None, *, selector: str = ""
    ) -> list[dict[str, Any]]:
        return await objects.list_all(
            self.api, kind=kinds.Kind.TALOS_OPERATION, namespace=namespace, label_selector=selector
        )

    async def _fleet_runs(self) -> tuple[decisions.FleetRun, ...]:
        """The fleet's auto-patch operations, listed afresh (never a cache)."""
        selector = f"{STARTED_BY_LABEL}={StartedBy.AUTO_PATCH.value}"
        return tuple(
            run
            for body in await self._operations(None, selector=selector)
            if (run := parse_fleet_run(body)) is not None
        )

    async def _readyz(self, workload: ApiClient) -> decisions.Probe:
        return await probe_readyz(workload)

    async def _health(
        self, workload: ApiClient, checks: Sequence[health.Compiled], *, cluster: str = ""
    ) -> tuple[health.Verdict, ...]:
        """Each check over the objects it names, listed from the workload cluster
        (bounded: ``MAX_OBJECTS`` items, ``MAX_LIST_BYTES`` of response), evaluated in the
        worker process; ``cluster`` (``namespace/name``) keys what a check cost."""
        verdicts: list[health.Verdict] = []
        spent = 0.0
        for check in checks:
            items, failure = await self._list(workload, check)
            if items is None:
                verdicts.append(health.evaluate(check, objects=None, failure=failure))
                continue
            verdict, took = await self._evaluate(
                cluster, check, items, left=HEALTH_LOOK_TIME - spent
            )
            spent += took
            verdicts.append(verdict)
            if not verdict.ok:
                break
        return tuple(verdicts)

    async def _evaluate(
        self, cluster: str, check: health.Compiled, items: list[Any], *, left: float
    ) -> tuple[health.Verdict, float]:
        """The verdict of one check and the seconds its evaluation took: the held verdict
        while a check that cost too much waits, else the worker's."""
        key = (cluster, check.check.name, check.check.expression)
        now = asyncio.get_running_loop().time()
        held = self._held.get(key)
        if held is not None and held[0] > now:
            return held[1], 0.0
        if left <= 0:
            return health.not_evaluated(
                check.check,
                f"not evaluated: the cluster's checks took over {HEALTH_LOOK_TIME:.0f} s in "
                "this look; it is evaluated at the next look",
            ), 0.0
        outcome, took = await self.evaluator.run(check, items, within=min(HEALTH_TIMEOUT, left))
        verdict = health.verdict(check.check, outcome)
        if outcome.result in health.COSTLY:
            until = self.clock() + timedelta(seconds=HEALTH_RETRY_AFTER)
            verdict = replace(
                verdict,
                message=f"{verdict.message}; it is not evaluated again before "
                f"{_stamp(until)} unless its expression changes",
            )
            self._held = {k: v for k, v in self._held.items() if v[0] > now}
            self._held[key] = (now + HEALTH_RETRY_AFTER, verdict)
        return verdict, took

    async def health_now(
        self,
        workload: ApiClient,
        body: Mapping[str, Any],
        installation: Mapping[str, Any] | None,
    ) -> tuple[health.Verdict, ...]:
        """The cluster's own health checks (its spec's, else the fleet's), now, in the
        worker process: what the executor asks between the nodes of a Talos operation,
        for a person's operation as for auto-patch's."""
        meta: Mapping[str, Any] = body.get("metadata") or {}
        own = read_whole(AutoPatchSpec, (body.get("spec") or {}).get("autoPatch"))
        fleet_spec = read_whole(
            FleetAutoPatchSpec, ((installation or {}).get("spec") or {}).get("autoPatch")
        )
        policy = effective(cluster=own, fleet=fleet_spec, health_resources=self.health_resources)
        if not policy.health:
            return ()
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        async with asyncio.timeout(self.ask_timeout):
            return await self._health(workload, policy.health, cluster=key)

    async def close(self) -> None:
        """Stop the health checks' worker process."""
        await self.evaluator.close()

    async def _list(
        self, workload: ApiClient, check: health.Compiled
    ) -> tuple[list[Any] | None, str]:
        try:
            async with asyncio.timeout(READYZ_TIMEOUT):
                status, raw = await _get(
                    workload,
                    check.path,
                    query=[("limit", str(health.MAX_OBJECTS + 1))],
                    limit=health.MAX_LIST_BYTES + 1,
                )
        except ApiException as error:
            return None, f"its objects could not be listed (the API server answered {error.status})"
        except errors.TRANSIENT:
            return None, "its objects could not be listed (the API server did not answer)"
        if not 200 <= status <= 299:
            return None, f"its objects could not be listed (the API server answered {status})"
        if len(raw) > health.MAX_LIST_BYTES:
            return None, f"its objects exceed {health.MAX_LIST_BYTES // 1024} KiB"
        listed, problem = untrusted.loads(
            raw,
            max_bytes=health.MAX_LIST_BYTES,
            max_values=health.MAX_LIST_VALUES,
            max_depth=health.MAX_LIST_DEPTH,
            what="the API server's answer",
        )
        if problem is not None:
            return None, f"its objects could not be read: {problem}"
        items = listed.get("items") if isinstance(listed, dict) else None
        if not isinstance(items, list):
            return None, "the API server's answer is not a list"
        more = len(items) > health.MAX_OBJECTS
        if more:
            return None, f"it names more than {health.MAX_OBJECTS} objects"
        return items, ""

    async def _installation(self) -> dict[str, Any] | None:
        return await objects.get_installation(self.api)

    async def _write_fleet(self, body: Mapping[str, Any], fleet: FleetAutoPatchStatus) -> bool:
        """Write ``status.autoPatch`` of the installation read as ``body`` (False: it
        changed meanwhile, or the write failed; the next check tries again)."""
        version = (body.get("metadata") or {}).get("resourceVersion")
        try:
            await patching.patch_status(
                self.api,
                kind=kinds.Kind.ICHOR_INSTALLATION,
                name=kinds.INSTALLATION_NAME,
                namespace=None,
                status_patch={"autoPatch": fleet.to_api()},
                resource_version=str(version) if version else None,
            )
        except errors.FAILED as error:
            logger.warning("auto-patch: IchorInstallation status not written: %s", error)
            return False
        return True

    async def reconcile(
        self,
        *,
        body: Mapping[str, Any],
        status: TalosClusterStatus,
        not_ready: tuple[str, ...] | None,
        workload: ApiClient | None,
        installation: Mapping[str, Any] | None,
        now: datetime,
    ) -> Result:
        """One look at a cluster, in steps: its policy, the cluster as ``decide`` reads it,
        its operations, the fleet's record, the decision (a probe and a start when it
        needs one), the halt it keeps, then the figures."""
        meta: Mapping[str, Any] = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        fleet_spec = _fleet_spec(installation)
        policy = effective(
            cluster=read_whole(AutoPatchSpec, (body.get("spec") or {}).get("autoPatch")),
            fleet=fleet_spec,
            health_resources=self.health_resources,
        )
        previous_condition = next((c for c in status.conditions if c.type == decisions.READY), None)
        if not policy.configured:
            return Result(status=None, condition=None)
        unchanged = Result(status=status.auto_patch, condition=previous_condition)
        cluster = _cluster(body, status=status, not_ready=not_ready)
        if cluster is None:
            return unchanged
        try:
            runs = await self._runs(namespace, name, uid=_uid(body))
        except errors.FAILED as error:
            logger.warning("auto-patch of %s/%s: operations not listed: %s", namespace, name, error)
            return unchanged

        fleet_status, fleet = _fleet(installation, fleet_spec, now=now)
        if policy.enabled and installation is not None:
            fleet_status, fleet = await self._record_seen(installation, fleet_status, fleet, now)

        decision = decisions.decide(cluster=cluster, policy=policy, runs=runs, fleet=fleet, now=now)
        if decision.needs_probe:
            decision = await self._probe_and_start(
                cluster=cluster, policy=policy, body=body, workload=workload,
                runs=runs, fleet=fleet, previous=previous_condition,
            )  # fmt: skip
        if installation is not None:
            await self._keep_halt(namespace, decision.keep_halt, fleet_status)
        self._count(previous=status.auto_patch, decision=decision, old=previous_condition)
        _window_metric(namespace, name, decision)
        return Result(
            status=decision.status,
            condition=decision.condition,
            events=decision.events,
            wake_at=decision.wake_at,
        )

    async def _keep_halt(
        self, namespace: str, kept: Halt | None, fleet_status: FleetAutoPatchStatus
    ) -> None:
        """The halt a decision keeps: recorded in the fleet's record unless it is there,
        then the namespace's clusters marked halted (not when the record failed)."""
        if kept is not None and (_names(fleet_status, kept) or await self._record_halt(kept)):
            await self._mark_halted(namespace, kept)

    async def _runs(self, namespace: str, name: str, *, uid: str) -> list[decisions.Run]:
        return [
            run
            for item in await self._operations(namespace)
            if ((item.get("spec") or {}).get("clusterRef") or {}).get("name") == name
            for run in [parse_run(item, cluster_uid=uid)]
            if run is not None
        ]

    async def _ask(
        self,
        workload: ApiClient | None,
        checks: Sequence[health.Compiled],
        *,
        cluster: str,
    ) -> tuple[decisions.Probe, tuple[health.Verdict, ...] | None]:
        """``/readyz``, then the health checks when it is ready, all within
        ``ask_timeout``: past it the gate is shut, saying so."""
        if workload is None:
            return decisions.Probe(ok=False, message="cannot be asked"), None
        probe = decisions.Probe(ok=False, message="did not answer")
        try:
            async with asyncio.timeout(self.ask_timeout):
                probe = await self._readyz(workload)
                if not probe.ok:
                    return probe, None
                return probe, await self._health(workload, checks, cluster=cluster)
        except TimeoutError:
            said = "answered, but its health checks were not" if probe.ok else "did not answer"
            return decisions.Probe(ok=False, message=f"{said} within {self.ask_timeout:g} s"), None

    async def _probe_and_start(
        self,
        *,
        cluster: decisions.Cluster,
        policy: Policy,
        body: Mapping[str, Any],
        workload: ApiClient | None,
        runs: Sequence[decisions.Run],
        fleet: decisions.Fleet,
        previous: Condition | None,
    ) -> decisions.Decision:
        """Ask the workload (``/readyz``, then the health checks), outside the fleet lock:
        that takes seconds, at most ``ask_timeout`` (``_ask``). Then, in the lock, decide again
        on what is true now: the time (the window may have closed meanwhile), the
        cluster's operations, the fleet's auto-patch operations (the count, and a failure
        whose halt is not recorded yet) and the halts read afresh; and start."""
        probe, verdicts = await self._ask(workload, policy.health, cluster=cluster.key)
        async with self._lock:
            now = self.clock()
            try:
                runs = await self._runs(cluster.namespace, cluster.name, uid=_uid(body))
                listed = await self._fleet_runs()
                fresh = await self._installation()
            except errors.FAILED as error:
                # nothing starts on a guess: the fleet is "not counted" (FleetBusy)
                logger.warning("auto-patch: the fleet not read afresh: %s", error)
                fleet = replace(fleet, halts=decisions.live_halts(fleet.halts, now=now),
                                uncounted=True)  # fmt: skip
            else:
                recorded = _fleet_record(fresh)
                fleet_spec = read_whole(
                    FleetAutoPatchSpec, ((fresh or {}).get("spec") or {}).get("autoPatch")
                )
                trusted = _trusted(fleet_spec)
                fleet = decisions.Fleet(
                    halts=(
                        *decisions.live_halts(recorded.halts, now=now),
                        *decisions.unrecorded_halts(
                            listed, recorded=recorded.halts, now=now, cluster=cluster.key,
                            resume=cluster.resume, trusted=trusted,
                        ),
                    ),
                    seen=decisions.seen_map(recorded.seen),
                    busy=frozenset(r.cluster for r in listed if r.phase in _ACTIVE),
                    max_concurrent=max_concurrent(fleet_spec),
                    trusted=trusted,
                )  # fmt: skip
            decision = decisions.decide(
                cluster=cluster, policy=policy, runs=runs, fleet=fleet, now=now,
                readyz=probe, health=verdicts,
            )  # fmt: skip
            if decision.start is not None:
                decision = await self._start(decision, body=body, now=now, previous=previous)
        return decision

    @staticmethod
    def _count(*, previous: Any, decision: decisions.Decision, old: Condition | None) -> None:
        """Metrics of what changed: a run that ended, a gate that newly stopped a start."""
        new = decision.condition
        if (
            new is not None
            and new.reason in decisions.GATES
            and (old is None or old.reason != new.reason)
        ):
            metrics.auto_patch_gate_failed(gate=new.reason)
        before = previous.last_run if previous is not None else None
        after = decision.status.last_run if decision.status is not None else None
        if after is None or after.result not in (RunResult.SUCCEEDED, RunResult.FAILED):
            return
        if before is None or (before.operation, before.result) != (after.operation, after.result):
            metrics.auto_patch_run(result=after.result.value)

    async def _record_seen(
        self,
        installation: Mapping[str, Any],
        fleet_status: FleetAutoPatchStatus,
        fleet: decisions.Fleet,
        now: datetime,
    ) -> tuple[FleetAutoPatchStatus, decisions.Fleet]:
        targets = read_status(installation.get("status")).upgrade_targets
        listed: dict[Component, Sequence[str] | None] = {
            Component.TALOS: targets.talos if targets else None,
            Component.KUBERNETES: targets.kubernetes if targets else None,
        }
        seen = decisions.record_seen(fleet_status.seen, listed=listed, now=now)
        if seen is None:
            return fleet_status, fleet
        async with self._lock:
            fresh = await self._installation_or_none()
            if fresh is None:
                return fleet_status, fleet
            current = _fleet_record(fresh)
            seen = decisions.record_seen(current.seen, listed=listed, now=now)
            if seen is None:
                return current, replace(fleet, seen=decisions.seen_map(current.seen))
            updated = decisions.fleet_record(current, now=now, seen=seen)
            assert updated is not None
            await self._write_fleet(fresh, updated)
        return updated, replace(fleet, seen=decisions.seen_map(seen))

    async def _installation_or_none(self) -> dict[str, Any] | None:
        try:
            return await self._installation()
        except errors.FAILED as error:
            logger.warning("auto-patch: IchorInstallation not read: %s", error)
            return None

    async def _record_halt(self, halt: Halt) -> bool:
        """Record ``halt`` unless a halt names its operation already (idempotent: asked at
        every look until the failed operation is marked, so a write that failed is tried
        again at the next look). True: the record holds it now."""
        async with self._lock:
            for _ in range(3):
                fresh = await self._installation_or_none()
                if fresh is None:
                    return False
                current = _fleet_record(fresh)
                if _names(current, halt):
                    return True
                updated = decisions.fleet_record(current, now=self.clock(), halt=halt)
                if updated is None:
                    return False  # over meanwhile
                if await self._write_fleet(fresh, updated):
                    metrics.auto_patch_halted(component=halt.component)
                    return True
        return False

    async def _mark_halted(self, namespace: str, halt: Halt) -> None:
        """Mark the failed operation: its halt is in the record. From then on its cluster
        stops asking for the halt, and a start elsewhere no longer takes the failure as a
        halt by itself, even once the record dropped the halt (it is over)."""
        try:
            await patching.patch_object(
                self.api,
                kind=kinds.Kind.TALOS_OPERATION,
                name=halt.operation,
                namespace=namespace,
                patch={"metadata": {"annotations": {HALTED_ANNOTATION: _stamp(halt.until)}}},
                resource_version=None,
            )
        except errors.FAILED as error:
            logger.warning(
                "auto-patch: TalosOperation %s/%s not marked as halted: %s",
                namespace, halt.operation, error,
            )  # fmt: skip

    async def _start(
        self,
        decision: decisions.Decision,
        *,
        body: Mapping[str, Any],
        now: datetime,
        previous: Condition | None,
    ) -> decisions.Decision:
        plan = decision.start
        assert plan is not None
        assert decision.status is not None
        request = start_request.StartRequest(
            cluster=start_request.ClusterTarget.from_body(body),
            type=OperationType(plan.component.value),
            version=plan.version,
            started_by=StartedBy.AUTO_PATCH,
            attempt=plan.attempt,
            reason=plan.reason,
        )
        # the create itself owes AutoPatchStarted (the operation carries it until the
        # executor posted it): a restart after the create cannot lose it
        name = start_request.operation_name(request)
        announce = owed.owe(
            "Normal", AutoPatchEventReason.STARTED, f"started TalosOperation {name}: {plan.reason}",
            at=now, about=owed.CLUSTER,
        )  # fmt: skip
        try:
            started = await creating.start_operation(
                self.api, request=request,
                owes={owed.key(name, AutoPatchEventReason.STARTED): announce},
            )  # fmt: skip
        except creating.StartRefused as error:
            metrics.auto_patch_run(result="Refused")
            return decisions.refused(
                decision,
                message=f"the start of {plan.component.value} {plan.version} was refused: "
                f"{error.message}; it is tried again at the next check",
                now=now,
                previous=previous,
            )
        except errors.FAILED as error:
            return decisions.refused(
                decision,
                message=f"the start of {plan.component.value} {plan.version} failed: {error}; "
                "it is tried again at the next check",
                now=now,
                previous=previous,
            )
        run = parse_run(started.body, cluster_uid=_uid(body))
        last = LastRun(
            operation=started.name,
            component=plan.component.value,
            version=plan.version,
            result=RunResult.PENDING if run is None or run.phase is None else RunResult(run.phase),
            time=run.created if run else now,
        )
        status = decision.status.model_copy(
            update={
                "last_run": last,
                "message": f"{decision.status.message}: TalosOperation {started.name}",
            }
        )
        planned = list(decision.events)
        if started.created:
            metrics.auto_patch_run(result="Started")
        return decisions.Decision(
            status=status,
            condition=decision.condition.model_copy(update={"message": status.message})
            if decision.condition
            else None,
            events=tuple(planned),
            start=plan,
            wake_at=decision.wake_at,
        )


#: Attempts at writing the lifted halts when the IchorInstallation keeps moving.
LIFT_ATTEMPTS = 5


async def lift_halts(
    api: ApiClient, *, request: Unhalt, user: str, now: datetime
) -> tuple[Halt, ...]:
    """Lift the halts ``request`` names, for ``user``, in the IchorInstallation's record
    (``decisions.lift``): read, write with the version read, again when it moved. The
    halts lifted by this request; raises the API's errors (the caller tries again), and
    ``errors.Conflict`` when the record kept moving."""
    for _ in range(LIFT_ATTEMPTS):
        fresh = await objects.get_installation(api)
        if fresh is None:
            return ()
        current = _fleet_record(fresh)
        halts, lifted = decisions.lift(current.halts, request=request, user=user, now=now)
        if halts == current.halts:
            return lifted
        version = (fresh.get("metadata") or {}).get("resourceVersion")
        try:
            await patching.patch_status(
                api,
                kind=kinds.Kind.ICHOR_INSTALLATION,
                name=kinds.INSTALLATION_NAME,
                namespace=None,
                status_patch={"autoPatch": current.model_copy(update={"halts": halts}).to_api()},
                resource_version=str(version) if version else None,
            )
        except errors.Conflict:
            continue
        return lifted
    raise errors.Conflict(ApiException(status=409, reason="the IchorInstallation kept moving"))


def _fleet_spec(installation: Mapping[str, Any] | None) -> FleetAutoPatchSpec | None:
    """The fleet's auto-patch settings from the IchorInstallation, read leniently."""
    return read_whole(FleetAutoPatchSpec, ((installation or {}).get("spec") or {}).get("autoPatch"))


def _cluster(
    body: Mapping[str, Any], *, status: TalosClusterStatus, not_ready: tuple[str, ...] | None
) -> decisions.Cluster | None:
    """The cluster as ``decide`` reads it; None when its spec cannot be read."""
    meta: Mapping[str, Any] = body.get("metadata") or {}
    try:
        spec = TalosClusterSpec.model_validate(body.get("spec") or {})
    except ValidationError:
        return None
    resume = (meta.get("annotations") or {}).get(RESUME_ANNOTATION)
    return decisions.Cluster(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        spec=spec,
        status=status,
        resume=str(resume) if resume else None,
        not_ready=not_ready,
    )


def _fleet(
    installation: Mapping[str, Any] | None, fleet_spec: FleetAutoPatchSpec | None, *, now: datetime
) -> tuple[FleetAutoPatchStatus, decisions.Fleet]:
    """The fleet's record and what ``decide`` reads of it: the live halts, the first-seen
    times, the fleet's concurrency and who it trusts."""
    fleet_status = _fleet_record(installation)
    return fleet_status, decisions.Fleet(
        halts=decisions.live_halts(fleet_status.halts, now=now),
        seen=decisions.seen_map(fleet_status.seen),
        max_concurrent=max_concurrent(fleet_spec),
        trusted=_trusted(fleet_spec),
    )


def _window_metric(namespace: str, name: str, decision: decisions.Decision) -> None:
    """The window gauges of the cluster: open or not, and the next start."""
    shown = decision.status
    metrics.auto_patch_window(
        namespace=namespace,
        cluster=name,
        open_=shown.window_open if shown else None,
        next_start=shown.next_window.start if shown and shown.next_window else None,
    )
