"""What auto-patch does for one cluster now. Pure: the clock, the cluster, its operations
and the fleet's record come in; the status, the condition, the Events, at most one start
and a halt for the fleet come out.

The order of the checks is the order of the answer a person reads:

1. off (no component or no window, from the cluster or the fleet): nothing, no condition;
2. a setting that cannot be read: stop, quoting it;
3. the newest operation auto-patch started for this cluster failed, and nobody resumed
   (the annotation ``ichor.dev/auto-patch-resume`` names another operation, or none):
   suspended, with one Warning Event saying what failed and how to resume; and when its
   upgrade ran on the nodes and failed (``status.failure: UpgradeFailed``, never a
   refusal, missing credentials or a Job that never started), a halt of that version
   (``halt_until``: the rest of the window it started in, or when it failed after that
   window closed, through the window open then or the next) for the clusters of its
   namespace, or of the fleet when the namespace is trusted to halt it
   (``fleetHaltNamespaces``), asked for at every look while suspended;
4. ``suspended: true``;
5. any operation of the cluster Pending or Running, whoever started it: wait;
6. no window open now: wait for the next;
7. for each component in order (Talos before Kubernetes), the newest **patch** of the
   running minor that the upgrade choices offer (so the target rule accepts it; never a
   next minor), not halted for the fleet, and listed for at least ``minReleaseAge``;
8. the fleet runs ``maxConcurrentClusters`` auto-patch operations already: wait;
9. the health gates: the cluster Ready, every Node Ready and on the spec's versions (so the
   last operation has finished on every node), VersionsCompatible, the release list of
   the component current, then (the only one that needs a request) the workload's
   ``/readyz`` and the health checks a person declared (CEL over workload objects);
10. start it.

Nothing here remembers: a restart reads the same operations and decides the same start,
and the deterministic name (``talosoperation.start_request``) turns a second create into
the first operation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ichor.api.autopatch import (
    EVERY_NAMESPACE,
    RESUME_ANNOTATION,
    AutoPatchStatus,
    FleetAutoPatchStatus,
    Halt,
    HaltScope,
    LastRun,
    RunResult,
    SeenRelease,
    Suspension,
    Unhalt,
    WindowTimes,
)
from ichor.api.conditions import (
    AutoPatchReason,
    ClusterConditionType,
    Condition,
    ConditionStatus,
)
from ichor.api.events import AutoPatchEventReason
from ichor.api.taloscluster import ChoiceGroup, TalosClusterSpec, TalosClusterStatus
from ichor.api.talosoperation import Failure, Phase
from ichor.controller.autopatch.health import Verdict
from ichor.controller.autopatch.policy import Policy
from ichor.controller.autopatch.windows import Interval
from ichor.kube import conditions
from ichor.kube.bodies import EventType, PlannedEvent
from ichor.upgrade.rule import Component

Reason = AutoPatchReason
READY = ClusterConditionType.AUTO_PATCH_READY
#: The attempt token of a start nobody resumed.
FIRST_ATTEMPT = "1"
_NAMES = {Component.TALOS: "Talos", Component.KUBERNETES: "Kubernetes"}

#: The reasons that name a health gate.
GATES = frozenset(
    {
        Reason.CLUSTER_NOT_READY,
        Reason.NODES_NOT_READY,
        Reason.NODES_DIFFER,
        Reason.VERSIONS_INCOMPATIBLE,
        Reason.RELEASE_LIST_STALE,
        Reason.WORKLOAD_NOT_READY,
        Reason.HEALTH_CHECK_FAILED,
    }
)

#: The reasons for which nothing starts: auto-patch is off or held, or a gate is shut.
_STOPPED = (
    frozenset(
        {
            Reason.DISABLED,
            Reason.INVALID_SETTINGS,
            Reason.SUSPENDED,
            Reason.FAILED,
            Reason.HALTED,
            Reason.START_REFUSED,
        }
    )
    | GATES
)


@dataclass(frozen=True)
class Run:
    """One TalosOperation of the cluster, as auto-patch reads it."""

    name: str
    type: str
    version: str
    phase: Phase | None
    created: datetime
    #: Labelled ``ichor.dev/started-by: auto-patch`` and owned by this cluster.
    auto_patch: bool
    message: str | None = None
    #: ``status.finishedAt``: when it succeeded or failed.
    finished: datetime | None = None
    #: Marked (``ichor.dev/auto-patch-halted``): the fleet's record holds its halt.
    halt_recorded: bool = False
    #: ``status.failure`` of a Failed operation (None: not failed, or an older Ichor's).
    failure: Failure | None = None

    @property
    def active(self) -> bool:
        return self.phase in (None, Phase.PENDING, Phase.RUNNING)

    @property
    def upgrade_failed(self) -> bool:
        """Failed after its upgrade ran on the nodes: the only failure that halts."""
        return self.phase is Phase.FAILED and self.failure is Failure.UPGRADE_FAILED


@dataclass(frozen=True)
class FleetRun:
    """One auto-patch operation of the fleet, as the fleet's listing shows it."""

    #: ``namespace/name`` of its cluster.
    cluster: str
    operation: str
    component: str
    version: str
    phase: Phase | None
    created: datetime
    finished: datetime | None = None
    #: Marked (``ichor.dev/auto-patch-halted``): the fleet's record holds its halt.
    halt_recorded: bool = False
    #: ``status.failure`` of a Failed operation.
    failure: Failure | None = None

    @property
    def upgrade_failed(self) -> bool:
        return self.phase is Phase.FAILED and self.failure is Failure.UPGRADE_FAILED

    @property
    def namespace(self) -> str:
        return self.cluster.partition("/")[0]


#: How long a failed auto-patch operation halts its version while its halt is neither in
#: the fleet's record nor marked on it: the failing cluster records the halt at its next
#: look (the operation moved), and at each look after until it is recorded and marked, so
#: this only bridges that moment (and ends a failure whose cluster never looks again).
UNRECORDED_HALT = timedelta(minutes=30)


@dataclass(frozen=True)
class Fleet:
    halts: tuple[Halt, ...] = ()
    seen: Mapping[tuple[str, str], datetime] | None = None
    #: Clusters (``namespace/name``) with an auto-patch operation Pending or Running.
    busy: frozenset[str] = frozenset()
    max_concurrent: int = 1
    #: The fleet's operations could not be counted: nothing starts on a guess.
    uncounted: bool = False
    #: Namespaces whose failure halts a version for the whole fleet
    #: (``spec.autoPatch.fleetHaltNamespaces``; ``*``: every one).
    trusted: frozenset[str] = frozenset()

    def scope_of(self, namespace: str) -> HaltScope:
        """Whose clusters a failure in ``namespace`` halts."""
        return halt_scope(namespace, trusted=self.trusted)


def halt_scope(namespace: str, *, trusted: frozenset[str]) -> HaltScope:
    """The fleet for a namespace trusted to halt it, else the namespace alone."""
    if EVERY_NAMESPACE in trusted or namespace in trusted:
        return HaltScope.FLEET
    return HaltScope.NAMESPACE


@dataclass(frozen=True)
class Cluster:
    namespace: str
    name: str
    spec: TalosClusterSpec
    status: TalosClusterStatus
    #: The value of ``ichor.dev/auto-patch-resume``, if set.
    resume: str | None = None
    #: Nodes whose Ready condition is not True (None: not observed).
    not_ready: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Probe:
    """What the workload's ``/readyz`` answered: ok, or the sentence saying what."""

    ok: bool
    message: str = ""


@dataclass(frozen=True)
class Start:
    component: Component
    version: str
    attempt: str
    window: Interval
    #: The sentence for the operation's ``ichor.dev/started-for`` and the Event.
    reason: str


@dataclass(frozen=True)
class Decision:
    #: None: auto-patch is not configured; ``status.autoPatch`` and the condition go.
    status: AutoPatchStatus | None
    condition: Condition | None
    events: tuple[PlannedEvent, ...] = ()
    start: Start | None = None
    #: A new halt to record on the IchorInstallation (the first look at the failure).
    halt: Halt | None = None
    #: The halt of the failure that suspends the cluster, asked for at every look until
    #: it is recorded and the failed operation marked so (recorded once, by operation
    #: name), so a halt whose write failed is written at the next look. None once it is
    #: over, marked, or after a resume.
    keep_halt: Halt | None = None
    #: The start waits only for the workload's ``/readyz``: probe, then decide again.
    needs_probe: bool = False
    #: When to look again at the latest (a window opening or closing, a release ageing).
    wake_at: datetime | None = None


def _times(interval: Interval | None) -> WindowTimes | None:
    return None if interval is None else WindowTimes(start=interval.start, end=interval.end)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _describe(interval: Interval) -> str:
    return f"{_stamp(interval.start)} to {_stamp(interval.end)}"


def latest_run(runs: Sequence[Run]) -> Run | None:
    """The newest operation auto-patch started (by creation time, then name)."""
    ours = [r for r in runs if r.auto_patch]
    return max(ours, key=lambda r: (r.created, r.name)) if ours else None


def _result(run: Run) -> RunResult:
    if run.phase is None:
        return RunResult.PENDING
    return RunResult(run.phase.value)


def active_halt(
    halts: Sequence[Halt], *, component: Component, version: str, now: datetime, namespace: str
) -> Halt | None:
    """The halt that keeps a cluster of ``namespace`` from starting ``version`` now."""
    for halt in halts:
        if halt.holds(component=component.value, version=version, namespace=namespace, now=now):
            return halt
    return None


def _whose(halt: Halt) -> str:
    if halt.scope is HaltScope.FLEET:
        return "the fleet"
    return f"the clusters of namespace {halt.namespace}"


@dataclass(frozen=True)
class _Pick:
    component: Component | None = None
    version: str | None = None
    #: Why nothing is picked (when ``version`` is None).
    reason: Reason = Reason.UP_TO_DATE
    message: str = ""
    wake_at: datetime | None = None


def pick(
    *,
    policy: Policy,
    choices: Mapping[Component, ChoiceGroup | None],
    fleet: Fleet,
    now: datetime,
    namespace: str = "",
) -> _Pick:
    """The patch to start now for a cluster of ``namespace``: the first component in
    order with an eligible patch."""
    notes: list[str] = []
    wake: datetime | None = None
    worst = Reason.UP_TO_DATE
    for component in policy.components:
        name = _NAMES[component]
        group = choices.get(component)
        if group is None or not group.available:
            why = group.unavailable_reason if group and group.unavailable_reason else "not read"
            notes.append(f"the {name} release list cannot be used: {why}")
            worst = Reason.RELEASE_LIST_STALE
            continue
        young: list[str] = []
        for version in group.patch:  # newest first, each accepted by the target rule
            halt = active_halt(
                fleet.halts, component=component, version=version, now=now, namespace=namespace
            )
            if halt is not None:
                notes.append(
                    f"{name} {version} is halted for {_whose(halt)} until "
                    f"{_stamp(halt.until)}: it failed on {halt.cluster} ({halt.operation})"
                )
                if worst is not Reason.RELEASE_LIST_STALE:
                    worst = Reason.HALTED
                continue
            seen = (fleet.seen or {}).get((component.value, version))
            ripe = (seen or now) + policy.min_release_age
            if seen is None or ripe > now:
                young.append(
                    f"{name} {version} (listed since {_stamp(seen or now)}, due {_stamp(ripe)})"
                )
                wake = ripe if wake is None else min(wake, ripe)
                continue
            return _Pick(component=component, version=version)
        if young:
            notes.append(
                f"younger than minReleaseAge {_age(policy.min_release_age)}: " + ", ".join(young)
            )
            if worst is Reason.UP_TO_DATE:
                worst = Reason.WAITING_FOR_RELEASE_AGE
    if not notes:
        names = " and ".join(_NAMES[c] for c in policy.components) or "no component"
        return _Pick(message=f"{names}: no newer patch of the running minor is offered")
    return _Pick(reason=worst, message="; ".join(notes), wake_at=wake)


def _age(age: timedelta) -> str:
    minutes = int(age.total_seconds() // 60)
    hours, rest = divmod(minutes, 60)
    return (f"{hours}h" if hours else "") + (f"{rest}m" if rest or not hours else "")


def _gates(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """The first static health gate that fails, or None."""
    status, spec = cluster.status, cluster.spec
    ready = conditions.find(status.conditions, ClusterConditionType.READY)
    if ready is None or ready.status != ConditionStatus.TRUE:
        said = ready.message if ready and ready.message else "not observed yet"
        return Reason.CLUSTER_NOT_READY, f"the cluster is not Ready: {said}"
    nodes = status.nodes
    if cluster.not_ready is None or not nodes or not nodes.count:
        return Reason.NODES_NOT_READY, "no Node of the workload cluster has been read"
    if cluster.not_ready:
        return Reason.NODES_NOT_READY, "Nodes not Ready: " + ", ".join(cluster.not_ready)
    if nodes.differ:
        return (
            Reason.NODES_DIFFER,
            "the Nodes run more than one version (Talos "
            + ", ".join(nodes.talos_versions or ())
            + "; Kubernetes "
            + ", ".join(nodes.kubernetes_versions or ())
            + ")",
        )
    for name, want, runs in (
        ("Talos", spec.talos_version, status.talos_version),
        ("Kubernetes", spec.kubernetes_version, status.kubernetes_version),
    ):
        if want != runs:
            return (
                Reason.NODES_DIFFER,
                f"the Nodes run {name} {runs}, the spec says {want}: the last upgrade has "
                "not reached every node",
            )
    compatible = conditions.find(status.conditions, ClusterConditionType.VERSIONS_COMPATIBLE)
    if compatible is None or compatible.status != ConditionStatus.TRUE:
        said = compatible.message if compatible else "not judged yet"
        return Reason.VERSIONS_INCOMPATIBLE, f"VersionsCompatible is not True: {said}"
    group = choice_groups(status).get(component)
    if group is None or not group.available or group.unavailable_reason:
        # A list recorded once stays offered to a person after its listing failed
        # (``available``, with the reason); a start waits for a list that is current.
        why = group.unavailable_reason if group and group.unavailable_reason else "not read"
        return (
            Reason.RELEASE_LIST_STALE,
            f"the {_NAMES[component]} release list is not current: {why}",
        )
    return None


def choice_groups(status: TalosClusterStatus) -> dict[Component, ChoiceGroup | None]:
    choices = status.upgrade_choices
    return {
        Component.TALOS: choices.talos if choices else None,
        Component.KUBERNETES: choices.kubernetes if choices else None,
    }


def decide(
    *,
    cluster: Cluster,
    policy: Policy,
    runs: Sequence[Run],
    fleet: Fleet,
    now: datetime,
    readyz: Probe | None = None,
    health: Sequence[Verdict] | None = None,
) -> Decision:
    """The whole decision for ``cluster`` at ``now``.

    ``readyz``: the answer of the workload's ``/readyz``, None while it was not asked
    (then a start that waits only for it comes back with ``needs_probe``); ``health``:
    the verdicts of ``policy.health``, asked together with ``readyz``.
    """
    previous = cluster.status.auto_patch
    old_condition = conditions.find(cluster.status.conditions, READY)
    if not policy.configured:
        return Decision(status=None, condition=None)
    opened = policy.windows.open_at(now) if not policy.problems else None
    upcoming = None if opened or policy.problems else policy.windows.next_after(now)
    window = opened or upcoming
    base = AutoPatchStatus(
        enabled=policy.enabled,
        window_open=opened is not None,
        next_window=_times(window),
    )
    events: list[PlannedEvent] = []
    wake = opened.end if opened else (upcoming.start if upcoming else None)

    def finish(
        reason: Reason,
        message: str,
        *,
        status: AutoPatchStatus | None = None,
        start: Start | None = None,
        halt: Halt | None = None,
        keep_halt: Halt | None = None,
        needs_probe: bool = False,
        wake_at: datetime | None = None,
    ) -> Decision:
        written = (status or base).model_copy(update={"reason": reason.value, "message": message})
        condition = Condition(
            type=READY,
            status=ConditionStatus.FALSE if reason in _STOPPED else ConditionStatus.TRUE,
            reason=reason.value,
            message=message,
            observed_generation=None,
            last_transition_time=now,
        )
        if (
            reason in _STOPPED
            and reason not in (Reason.FAILED, Reason.DISABLED)
            and (old_condition is None or old_condition.reason != reason.value)
        ):
            events.append(PlannedEvent(EventType.WARNING, AutoPatchEventReason.BLOCKED, message))
        moments = [m for m in (wake, wake_at) if m is not None and m > now]
        return Decision(
            status=written,
            condition=condition,
            events=tuple(events),
            start=start,
            halt=halt,
            keep_halt=keep_halt,
            needs_probe=needs_probe,
            wake_at=min(moments) if moments else None,
        )

    if not policy.enabled:
        return finish(
            Reason.DISABLED,
            "auto-patch is off: it needs a component (talos or kubernetes) and a window, "
            "on the TalosCluster or the IchorInstallation",
        )
    if policy.problems:
        return finish(Reason.INVALID_SETTINGS, "; ".join(policy.problems))

    last = latest_run(runs)
    status = base
    if last is not None:
        status = status.model_copy(
            update={
                "last_run": LastRun(
                    operation=last.name,
                    component=last.type,
                    version=last.version,
                    result=_result(last),
                    time=last.created,
                )
            }
        )
    halt: Halt | None = None
    if last is not None and last.phase is Phase.FAILED and cluster.resume != last.name:
        what = f"{_NAMES.get(Component(last.type), last.type)} {last.version}"
        said = last.message or "no message"
        suspension = Suspension(
            operation=last.name,
            component=last.type,
            version=last.version,
            reason=said,
            time=previous.suspension.time
            if previous and previous.suspension and previous.suspension.operation == last.name
            else now,
        )
        status = status.model_copy(update={"suspension": suspension})
        resume = (
            f"resume with: ichor autopatch resume {cluster.name} -n {cluster.namespace} (or "
            f"kubectl annotate taloscluster {cluster.name} -n {cluster.namespace} "
            f"{RESUME_ANNOTATION}={last.name} --overwrite)"
        )
        recorded = previous.suspension if previous else None
        until = halt_until(policy, last, failed_at=last.finished or suspension.time)
        scope = fleet.scope_of(cluster.namespace)
        kept = (
            Halt(
                component=last.type,
                version=last.version,
                cluster=cluster.key,
                operation=last.name,
                reason=said[:1024],
                time=suspension.time,
                until=until,
                scope=scope,
            )
            if last.upgrade_failed and until is not None and until > now
            else None
        )
        message = (
            f"auto-patch is suspended: TalosOperation {last.name} ({what}) failed: {said}; "
            + _halt_note(last, kept, what=what)
            + resume
        )
        if recorded is None or recorded.operation != last.name:
            events.append(PlannedEvent(EventType.WARNING, AutoPatchEventReason.FAILED, message))
            halt = kept
        keep = None if last.halt_recorded else kept
        return finish(Reason.FAILED, message, status=status, halt=halt, keep_halt=keep)
    if previous and previous.suspension:
        events.append(
            PlannedEvent(
                EventType.NORMAL,
                AutoPatchEventReason.RESUMED,
                f"auto-patch resumed after TalosOperation {previous.suspension.operation} "
                f"({previous.suspension.component} {previous.suspension.version}) failed",
            )
        )
    if policy.suspended:
        return finish(
            Reason.SUSPENDED,
            "auto-patch is suspended (spec.autoPatch.suspended); resume with: ichor "
            f"autopatch resume {cluster.name} -n {cluster.namespace}",
            status=status,
        )
    active = [r for r in runs if r.active]
    if active:
        names = ", ".join(sorted(f"{r.name} ({r.type} to {r.version or 'chart'})" for r in active))
        return finish(
            Reason.OPERATION_RUNNING,
            f"waits for TalosOperation {names} to finish",
            status=status,
        )
    if opened is None:
        message = (
            f"no window is open; the next is {_describe(upcoming)}"
            if upcoming
            else "no window is open and none of the schedules names a coming date"
        )
        return finish(Reason.WINDOW_CLOSED, message, status=status)

    chosen = pick(
        policy=policy,
        choices=choice_groups(cluster.status),
        fleet=fleet,
        now=now,
        namespace=cluster.namespace,
    )
    if chosen.version is None or chosen.component is None:
        return finish(chosen.reason, chosen.message, status=status, wake_at=chosen.wake_at)
    component, version = chosen.component, chosen.version
    what = f"{_NAMES[component]} {version}"
    others = fleet.busy - {cluster.key}
    if fleet.uncounted:
        return finish(
            Reason.FLEET_BUSY,
            f"{what} waits: the fleet's auto-patch operations and halts could not be read "
            "afresh, so its running operations could not be counted (maxConcurrentClusters); "
            "it is tried again at the next check",
            status=status,
        )
    if len(others) >= fleet.max_concurrent:
        named = sorted(others)
        shown = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
        return finish(
            Reason.FLEET_BUSY,
            f"{what} waits: {len(others)} cluster(s) of the fleet run an auto-patch "
            f"operation ({shown}) and maxConcurrentClusters is {fleet.max_concurrent}",
            status=status,
        )
    gate = _gates(cluster, component)
    if gate is not None:
        reason, said = gate
        return finish(reason, f"{what} waits for a health gate: {said}", status=status)
    if readyz is None:
        return Decision(status=None, condition=None, needs_probe=True)
    if not readyz.ok:
        return finish(
            Reason.WORKLOAD_NOT_READY,
            f"{what} waits for a health gate: the workload cluster's /readyz {readyz.message}",
            status=status,
        )
    failing = next((v for v in health or () if not v.ok), None)
    if failing is not None:
        return finish(
            Reason.HEALTH_CHECK_FAILED,
            f"{what} waits for a health gate: {failing.message}; it is checked again at the "
            "next check",
            status=status,
        )
    attempt = cluster.resume or FIRST_ATTEMPT
    sentence = (
        f"auto-patch: {what}, the newest patch of the running minor, in the window open "
        f"{_describe(opened)}"
    )
    return finish(
        Reason.STARTED,
        sentence,
        status=status,
        start=Start(
            component=component,
            version=version,
            attempt=attempt,
            window=opened,
            reason=sentence,
        ),
    )


def _halt_note(run: Run, halt: Halt | None, *, what: str) -> str:
    """What the failure halts beyond this cluster, as the part of a sentence."""
    if halt is not None:
        return f"{what} is halted for {_whose(halt)} until {_stamp(halt.until)}; "
    if run.upgrade_failed:
        return ""
    kind = run.failure.value if run.failure else "not known to have run on the nodes"
    return f"it halts {what} for no other cluster: its upgrade did not run and fail ({kind}); "


def halt_until(policy: Policy, run: Run, *, failed_at: datetime) -> datetime | None:
    """Until when a failure of ``run`` halts its version for the fleet: the rest of the
    window it started in; and when it failed after that window closed (a Job is never
    interrupted), through the window open when it failed, or else the next one, so the
    halt still holds the next chance the windows give to start it. None: no window."""
    windows = policy.windows
    started = windows.open_at(run.created)
    around = windows.open_at(failed_at) or windows.next_after(failed_at)
    ends = [i.end for i in (started, around) if i is not None]
    return max(ends) if ends else None


def unrecorded_halts(
    runs: Sequence[FleetRun],
    *,
    recorded: Sequence[Halt],
    now: datetime,
    cluster: str,
    resume: str | None,
    trusted: frozenset[str] = frozenset(),
) -> tuple[Halt, ...]:
    """A halt for each auto-patch operation of the fleet whose upgrade ran and failed and
    whose halt is neither in ``recorded`` nor marked on it (its cluster has not looked
    since it failed), for ``UNRECORDED_HALT`` after it failed, with the scope its
    namespace gets (``trusted``). A recorded halt decides for its operation, live, lifted
    or over, and so does the mark once the record dropped it; ``cluster``'s own failure
    it resumed (``resume``) halts nothing here."""
    named = {h.operation for h in recorded}
    halts: list[Halt] = []
    for run in runs:
        if not run.upgrade_failed or run.operation in named or run.halt_recorded:
            continue
        if run.cluster == cluster and run.operation == resume:
            continue
        failed_at = run.finished or run.created
        until = failed_at + UNRECORDED_HALT
        if until <= now:
            continue
        halts.append(
            Halt(
                component=run.component,
                version=run.version,
                cluster=run.cluster,
                operation=run.operation,
                reason="failed; its cluster has not recorded the halt yet",
                time=failed_at,
                until=until,
                scope=halt_scope(run.namespace, trusted=trusted),
            )
        )
    return tuple(halts)


def fleet_record(
    current: FleetAutoPatchStatus,
    *,
    now: datetime,
    seen: Sequence[SeenRelease] | None = None,
    halt: Halt | None = None,
) -> FleetAutoPatchStatus | None:
    """``current`` with ``seen`` (when given) and ``halt`` added (when no halt names its
    operation yet and it is not over), without the halts that are over, at most 64; None
    when nothing is to be written. Every write of the record goes through here, so it
    drops what is over whenever it is written."""
    halts = list(current.halts)
    added = (
        halt is not None and halt.until > now and all(h.operation != halt.operation for h in halts)
    )
    if seen is None and not added:
        return None
    if added and halt is not None:
        halts.append(halt)
    update: dict[str, object] = {"halts": live_halts(halts, now=now)[-64:]}
    if seen is not None:
        update["seen"] = tuple(seen)
    return current.model_copy(update=update)


def refused(
    decision: Decision, *, message: str, now: datetime, previous: Condition | None
) -> Decision:
    """``decision`` after the start it planned was refused (by the webhook, or a name
    held by another object): the condition says so and one Event is posted."""
    assert decision.status is not None
    status = decision.status.model_copy(
        update={"reason": Reason.START_REFUSED.value, "message": message}
    )
    condition = Condition(
        type=READY,
        status=ConditionStatus.FALSE,
        reason=Reason.START_REFUSED.value,
        message=message,
        last_transition_time=now,
    )
    events = [e for e in decision.events if e.reason != AutoPatchEventReason.STARTED]
    if previous is None or previous.reason != Reason.START_REFUSED.value:
        events.append(PlannedEvent(EventType.WARNING, AutoPatchEventReason.BLOCKED, message))
    return replace(decision, status=status, condition=condition, events=tuple(events), start=None)


def record_seen(
    seen: Sequence[SeenRelease],
    *,
    listed: Mapping[Component, Sequence[str] | None],
    now: datetime,
) -> tuple[SeenRelease, ...] | None:
    """``seen`` with each listed version not in it yet, first seen ``now``, and without the
    versions no list holds any more; None when nothing changes."""
    current = {(s.component, s.version): s for s in seen}
    wanted: dict[tuple[str, str], SeenRelease] = {}
    for component, versions in listed.items():
        if versions is None:  # never listed: keep what was seen
            for key, item in current.items():
                if key[0] == component.value:
                    wanted[key] = item
            continue
        for version in versions:
            key = (component.value, version)
            wanted[key] = current.get(key) or SeenRelease(
                component=component.value, version=version, first_seen=now
            )
    if set(wanted) == set(current):
        return None
    ordered = sorted(wanted.values(), key=lambda s: (s.component, s.first_seen, s.version))
    return tuple(ordered[-1024:])


def seen_map(seen: Sequence[SeenRelease]) -> dict[tuple[str, str], datetime]:
    return {(s.component, s.version): s.first_seen for s in seen}


def live_halts(halts: Sequence[Halt], *, now: datetime) -> tuple[Halt, ...]:
    return tuple(h for h in halts if h.until > now)


def lift(
    halts: Sequence[Halt], *, request: Unhalt, user: str, now: datetime
) -> tuple[tuple[Halt, ...], tuple[Halt, ...]]:
    """``halts`` with those ``request`` names lifted by ``user`` at ``now``, and the
    halts this request lifted. A halt in force is lifted; one already lifted by ``user``
    counts as lifted by this request too (the operator may have lifted it, then stopped
    before it posted the Event: the Event is posted again, never lost). A lifted halt
    stays in the record until its end, so its failure is never recorded again."""
    written: list[Halt] = []
    lifted: list[Halt] = []
    for halt in halts:
        if request.matches(halt) and halt.until > now:
            if halt.lifted_by is None:
                halt = halt.model_copy(update={"lifted_by": user, "lifted_at": now})
                lifted.append(halt)
            elif halt.lifted_by == user:
                lifted.append(halt)
        written.append(halt)
    return tuple(written), tuple(lifted)
