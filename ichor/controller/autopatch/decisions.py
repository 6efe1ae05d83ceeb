"""What auto-patch does for one cluster now. Pure: the clock, the cluster, its operations
and the fleet's record come in; the status, the condition, the Events, at most one start
and a halt for the fleet come out.

``decide`` is an ordered chain of small named steps (``CHAIN``), the order of the answer
a person reads; the first step that stops answers. The static health gates are a chain of
their own (``GATE_CHAIN``). The fleet's record of halts and seen releases is kept here
too. Why this order, and why a failure halts what it halts: docs/autopatch.md and
docs/design/notes.md ("Auto-patch decides in a chain of named steps").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property

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


@dataclass(frozen=True)
class _Skipped:
    """Why one component has no patch to start now: the notes and their reason."""

    notes: tuple[str, ...] = ()
    reason: Reason = Reason.UP_TO_DATE
    wake_at: datetime | None = None


#: The reasons of skipped components, the one that answers last.
_RANK = (
    Reason.UP_TO_DATE,
    Reason.WAITING_FOR_RELEASE_AGE,
    Reason.HALTED,
    Reason.RELEASE_LIST_STALE,
)


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
    skipped: list[_Skipped] = []
    for component in policy.components:
        found = _pick_component(
            component,
            choices.get(component),
            policy=policy,
            fleet=fleet,
            now=now,
            namespace=namespace,
        )
        if isinstance(found, _Pick):
            return found
        skipped.append(found)
    notes = [note for skip in skipped for note in skip.notes]
    if not notes:
        names = " and ".join(_NAMES[c] for c in policy.components) or "no component"
        return _Pick(message=f"{names}: no newer patch of the running minor is offered")
    wakes = [skip.wake_at for skip in skipped if skip.wake_at is not None]
    return _Pick(
        reason=max((skip.reason for skip in skipped), key=_RANK.index),
        message="; ".join(notes),
        wake_at=min(wakes) if wakes else None,
    )


def _pick_component(
    component: Component,
    group: ChoiceGroup | None,
    *,
    policy: Policy,
    fleet: Fleet,
    now: datetime,
    namespace: str,
) -> _Pick | _Skipped:
    """The newest patch of ``component`` offered, not halted and old enough, or why
    there is none."""
    name = _NAMES[component]
    if group is None or not group.available:
        why = group.unavailable_reason if group and group.unavailable_reason else "not read"
        note = f"the {name} release list cannot be used: {why}"
        return _Skipped((note,), Reason.RELEASE_LIST_STALE)
    halted: list[str] = []
    young: list[tuple[str, datetime, datetime]] = []
    for version in group.patch:  # newest first, each accepted by the target rule
        halt = active_halt(
            fleet.halts, component=component, version=version, now=now, namespace=namespace
        )
        if halt is not None:
            halted.append(
                f"{name} {version} is halted for {_whose(halt)} until "
                f"{_stamp(halt.until)}: it failed on {halt.cluster} ({halt.operation})"
            )
            continue
        seen = (fleet.seen or {}).get((component.value, version))
        ripe = (seen or now) + policy.min_release_age
        if seen is not None and ripe <= now:
            return _Pick(component=component, version=version)
        young.append((version, seen or now, ripe))
    return _skipped(name, halted=halted, young=young, age=policy.min_release_age)


def _skipped(
    name: str,
    *,
    halted: Sequence[str],
    young: Sequence[tuple[str, datetime, datetime]],
    age: timedelta,
) -> _Skipped:
    """A component's patches all halted or too young (``young``: each version, when it
    was first listed and when it is due)."""
    if not young:
        return _Skipped(tuple(halted), Reason.HALTED if halted else Reason.UP_TO_DATE)
    listed = ", ".join(
        f"{name} {version} (listed since {_stamp(seen)}, due {_stamp(ripe)})"
        for version, seen, ripe in young
    )
    note = f"younger than minReleaseAge {_age(age)}: {listed}"
    return _Skipped(
        (*halted, note),
        Reason.HALTED if halted else Reason.WAITING_FOR_RELEASE_AGE,
        min(ripe for _, _, ripe in young),
    )


def _age(age: timedelta) -> str:
    minutes = int(age.total_seconds() // 60)
    hours, rest = divmod(minutes, 60)
    return (f"{hours}h" if hours else "") + (f"{rest}m" if rest or not hours else "")


#: One health gate: the reason and the sentence when it is shut, None when it is open.
Gate = Callable[[Cluster, Component], "tuple[Reason, str] | None"]


def gate_cluster_ready(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """The cluster's Ready condition is True."""
    ready = conditions.find(cluster.status.conditions, ClusterConditionType.READY)
    if ready is not None and ready.status == ConditionStatus.TRUE:
        return None
    said = ready.message if ready and ready.message else "not observed yet"
    return Reason.CLUSTER_NOT_READY, f"the cluster is not Ready: {said}"


def gate_nodes_read(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """The workload cluster's Nodes have been read."""
    nodes = cluster.status.nodes
    if cluster.not_ready is not None and nodes and nodes.count:
        return None
    return Reason.NODES_NOT_READY, "no Node of the workload cluster has been read"


def gate_nodes_ready(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """Every Node is Ready."""
    if not cluster.not_ready:
        return None
    return Reason.NODES_NOT_READY, "Nodes not Ready: " + ", ".join(cluster.not_ready)


def gate_nodes_agree(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """The Nodes run one version of each component."""
    nodes = cluster.status.nodes
    if nodes is None or not nodes.differ:
        return None
    return (
        Reason.NODES_DIFFER,
        "the Nodes run more than one version (Talos "
        + ", ".join(nodes.talos_versions or ())
        + "; Kubernetes "
        + ", ".join(nodes.kubernetes_versions or ())
        + ")",
    )


def gate_nodes_on_spec(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """The Nodes run the spec's versions: the last upgrade reached every node."""
    status, spec = cluster.status, cluster.spec
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
    return None


def gate_versions_compatible(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """The cluster's VersionsCompatible condition is True."""
    compatible = conditions.find(
        cluster.status.conditions, ClusterConditionType.VERSIONS_COMPATIBLE
    )
    if compatible is not None and compatible.status == ConditionStatus.TRUE:
        return None
    said = compatible.message if compatible else "not judged yet"
    return Reason.VERSIONS_INCOMPATIBLE, f"VersionsCompatible is not True: {said}"


def gate_release_list_current(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """The component's release list is current.

    A list recorded once stays offered to a person after its listing failed
    (``available``, with the reason); a start waits for a list that is current."""
    group = choice_groups(cluster.status).get(component)
    if group is not None and group.available and not group.unavailable_reason:
        return None
    why = group.unavailable_reason if group and group.unavailable_reason else "not read"
    return (
        Reason.RELEASE_LIST_STALE,
        f"the {_NAMES[component]} release list is not current: {why}",
    )


#: The static health gates, in the order they are read; the first shut one answers.
GATE_CHAIN: tuple[Gate, ...] = (
    gate_cluster_ready,
    gate_nodes_read,
    gate_nodes_ready,
    gate_nodes_agree,
    gate_nodes_on_spec,
    gate_versions_compatible,
    gate_release_list_current,
)


def _gates(cluster: Cluster, component: Component) -> tuple[Reason, str] | None:
    """The first static health gate that is shut, or None."""
    return next(
        (shut for gate in GATE_CHAIN if (shut := gate(cluster, component)) is not None), None
    )


def choice_groups(status: TalosClusterStatus) -> dict[Component, ChoiceGroup | None]:
    choices = status.upgrade_choices
    return {
        Component.TALOS: choices.talos if choices else None,
        Component.KUBERNETES: choices.kubernetes if choices else None,
    }


@dataclass(frozen=True)
class Look:
    """One look at a cluster: everything the steps of ``decide`` read."""

    cluster: Cluster
    policy: Policy
    runs: Sequence[Run]
    fleet: Fleet
    now: datetime
    readyz: Probe | None = None
    health: Sequence[Verdict] | None = None

    @cached_property
    def opened(self) -> Interval | None:
        """The window open now."""
        return self.policy.windows.open_at(self.now) if not self.policy.problems else None

    @cached_property
    def upcoming(self) -> Interval | None:
        """The next window, while none is open."""
        if self.opened or self.policy.problems:
            return None
        return self.policy.windows.next_after(self.now)

    @cached_property
    def base(self) -> AutoPatchStatus:
        """The status before the cluster's operations are read."""
        return AutoPatchStatus(
            enabled=self.policy.enabled,
            window_open=self.opened is not None,
            next_window=_times(self.opened or self.upcoming),
        )

    @cached_property
    def last(self) -> Run | None:
        return latest_run(self.runs)

    @cached_property
    def status(self) -> AutoPatchStatus:
        """``base`` with the last run auto-patch started."""
        last = self.last
        if last is None:
            return self.base
        run = LastRun(
            operation=last.name,
            component=last.type,
            version=last.version,
            result=_result(last),
            time=last.created,
        )
        return self.base.model_copy(update={"last_run": run})

    @property
    def previous(self) -> AutoPatchStatus | None:
        return self.cluster.status.auto_patch

    @cached_property
    def chosen(self) -> _Pick:
        return pick(
            policy=self.policy,
            choices=choice_groups(self.cluster.status),
            fleet=self.fleet,
            now=self.now,
            namespace=self.cluster.namespace,
        )

    @property
    def what(self) -> str:
        """The picked patch, as a person names it."""
        assert self.chosen.component is not None
        return f"{_NAMES[self.chosen.component]} {self.chosen.version}"


@dataclass(frozen=True)
class Stop:
    """The answer of the step that decides. ``reason`` None: nothing is written (not
    configured, or a start that waits only for ``/readyz``: ``needs_probe``)."""

    reason: Reason | None
    message: str = ""
    #: None: the look's status (with its last run).
    status: AutoPatchStatus | None = None
    events: tuple[PlannedEvent, ...] = ()
    start: Start | None = None
    halt: Halt | None = None
    keep_halt: Halt | None = None
    needs_probe: bool = False
    wake_at: datetime | None = None


#: One step of ``decide``: its answer, or None to pass the look to the next step.
Step = Callable[[Look], "Stop | None"]


def step_not_configured(look: Look) -> Stop | None:
    """No auto-patch setting on the cluster or the fleet: no status, no condition."""
    return None if look.policy.configured else Stop(reason=None)


def step_off(look: Look) -> Stop | None:
    """No component or no window, from the cluster or the fleet."""
    if look.policy.enabled:
        return None
    return Stop(
        Reason.DISABLED,
        "auto-patch is off: it needs a component (talos or kubernetes) and a window, "
        "on the TalosCluster or the IchorInstallation",
        status=look.base,
    )


def step_invalid_settings(look: Look) -> Stop | None:
    """A setting that cannot be read: stop, quoting it."""
    if not look.policy.problems:
        return None
    return Stop(Reason.INVALID_SETTINGS, "; ".join(look.policy.problems), status=look.base)


def step_failed(look: Look) -> Stop | None:
    """The newest operation auto-patch started failed and nobody resumed it: suspended,
    one Warning Event, and a halt of its version when its upgrade ran and failed."""
    last, cluster = look.last, look.cluster
    if last is None or last.phase is not Phase.FAILED or cluster.resume == last.name:
        return None
    previous = look.previous.suspension if look.previous else None
    said = last.message or "no message"
    suspension = Suspension(
        operation=last.name,
        component=last.type,
        version=last.version,
        reason=said,
        time=previous.time if previous and previous.operation == last.name else look.now,
    )
    what = f"{_NAMES.get(Component(last.type), last.type)} {last.version}"
    kept = _failure_halt(look, last, suspension, said=said)
    resume = (
        f"resume with: ichor autopatch resume {cluster.name} -n {cluster.namespace} (or "
        f"kubectl annotate taloscluster {cluster.name} -n {cluster.namespace} "
        f"{RESUME_ANNOTATION}={last.name} --overwrite)"
    )
    message = (
        f"auto-patch is suspended: TalosOperation {last.name} ({what}) failed: {said}; "
        + _halt_note(last, kept, what=what)
        + resume
    )
    first = previous is None or previous.operation != last.name
    return Stop(
        Reason.FAILED,
        message,
        status=look.status.model_copy(update={"suspension": suspension}),
        events=(PlannedEvent(EventType.WARNING, AutoPatchEventReason.FAILED, message),)
        if first
        else (),
        halt=kept if first else None,
        keep_halt=None if last.halt_recorded else kept,
    )


def _failure_halt(look: Look, last: Run, suspension: Suspension, *, said: str) -> Halt | None:
    """The halt a failed run asks for: only an upgrade that ran and failed, until the
    window it counts in ends (``halt_until``), and only while that is ahead."""
    until = halt_until(look.policy, last, failed_at=last.finished or suspension.time)
    if not last.upgrade_failed or until is None or until <= look.now:
        return None
    return Halt(
        component=last.type,
        version=last.version,
        cluster=look.cluster.key,
        operation=last.name,
        reason=said[:1024],
        time=suspension.time,
        until=until,
        scope=look.fleet.scope_of(look.cluster.namespace),
    )


def step_suspended(look: Look) -> Stop | None:
    """``spec.autoPatch.suspended: true``."""
    if not look.policy.suspended:
        return None
    cluster = look.cluster
    return Stop(
        Reason.SUSPENDED,
        "auto-patch is suspended (spec.autoPatch.suspended); resume with: ichor "
        f"autopatch resume {cluster.name} -n {cluster.namespace}",
    )


def step_operation_running(look: Look) -> Stop | None:
    """Any operation of the cluster Pending or Running, whoever started it: wait."""
    active = [r for r in look.runs if r.active]
    if not active:
        return None
    names = ", ".join(sorted(f"{r.name} ({r.type} to {r.version or 'chart'})" for r in active))
    return Stop(Reason.OPERATION_RUNNING, f"waits for TalosOperation {names} to finish")


def step_window_closed(look: Look) -> Stop | None:
    """No window open now: wait for the next."""
    if look.opened is not None:
        return None
    upcoming = look.upcoming
    message = (
        f"no window is open; the next is {_describe(upcoming)}"
        if upcoming
        else "no window is open and none of the schedules names a coming date"
    )
    return Stop(Reason.WINDOW_CLOSED, message)


def step_nothing_eligible(look: Look) -> Stop | None:
    """No component has a newer patch of its running minor that is offered, not halted
    and listed for at least ``minReleaseAge`` (``pick``)."""
    chosen = look.chosen
    if chosen.version is not None and chosen.component is not None:
        return None
    return Stop(chosen.reason, chosen.message, wake_at=chosen.wake_at)


def step_fleet_uncounted(look: Look) -> Stop | None:
    """The fleet's operations could not be counted: nothing starts on a guess."""
    if not look.fleet.uncounted:
        return None
    return Stop(
        Reason.FLEET_BUSY,
        f"{look.what} waits: the fleet's auto-patch operations and halts could not be read "
        "afresh, so its running operations could not be counted (maxConcurrentClusters); "
        "it is tried again at the next check",
    )


def step_fleet_busy(look: Look) -> Stop | None:
    """The fleet runs ``maxConcurrentClusters`` auto-patch operations already: wait."""
    fleet = look.fleet
    others = fleet.busy - {look.cluster.key}
    if len(others) < fleet.max_concurrent:
        return None
    named = sorted(others)
    shown = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
    return Stop(
        Reason.FLEET_BUSY,
        f"{look.what} waits: {len(others)} cluster(s) of the fleet run an auto-patch "
        f"operation ({shown}) and maxConcurrentClusters is {fleet.max_concurrent}",
    )


def step_health_gate(look: Look) -> Stop | None:
    """The static health gates (``GATE_CHAIN``), the first one shut."""
    assert look.chosen.component is not None
    gate = _gates(look.cluster, look.chosen.component)
    if gate is None:
        return None
    reason, said = gate
    return Stop(reason, f"{look.what} waits for a health gate: {said}")


def step_readyz_unasked(look: Look) -> Stop | None:
    """Only the workload's ``/readyz`` is left to ask: probe, then decide again."""
    return Stop(reason=None, needs_probe=True) if look.readyz is None else None


def step_readyz_failing(look: Look) -> Stop | None:
    """The workload's ``/readyz`` did not answer ok."""
    if look.readyz is None or look.readyz.ok:
        return None
    return Stop(
        Reason.WORKLOAD_NOT_READY,
        f"{look.what} waits for a health gate: the workload cluster's /readyz "
        f"{look.readyz.message}",
    )


def step_health_check_failing(look: Look) -> Stop | None:
    """A health check a person declared (CEL over workload objects) fails."""
    failing = next((v for v in look.health or () if not v.ok), None)
    if failing is None:
        return None
    return Stop(
        Reason.HEALTH_CHECK_FAILED,
        f"{look.what} waits for a health gate: {failing.message}; it is checked again at "
        "the next check",
    )


def step_start(look: Look) -> Stop | None:
    """Every step passed: start the picked patch in the window open now."""
    chosen, opened = look.chosen, look.opened
    assert chosen.component is not None
    assert chosen.version is not None
    assert opened is not None
    sentence = (
        f"auto-patch: {look.what}, the newest patch of the running minor, in the window "
        f"open {_describe(opened)}"
    )
    start = Start(
        component=chosen.component,
        version=chosen.version,
        attempt=look.cluster.resume or FIRST_ATTEMPT,
        window=opened,
        reason=sentence,
    )
    return Stop(Reason.STARTED, sentence, start=start)


#: The steps of ``decide`` in the order of the answer a person reads; the first step
#: that stops answers. Nothing here remembers: a restart reads the same operations and
#: decides the same start, and its deterministic name turns a second create into the
#: first operation.
CHAIN: tuple[Step, ...] = (
    step_not_configured,
    step_off,
    step_invalid_settings,
    step_failed,
    step_suspended,
    step_operation_running,
    step_window_closed,
    step_nothing_eligible,
    step_fleet_uncounted,
    step_fleet_busy,
    step_health_gate,
    step_readyz_unasked,
    step_readyz_failing,
    step_health_check_failing,
    step_start,
)

#: The reasons given before the failure check passes: no "resumed" Event with them.
_BEFORE_RESUME = frozenset({Reason.DISABLED, Reason.INVALID_SETTINGS, Reason.FAILED})


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
    """The whole decision for ``cluster`` at ``now``: the answer of the first step of
    ``CHAIN`` that stops.

    ``readyz``: the answer of the workload's ``/readyz``, None while it was not asked
    (then a start that waits only for it comes back with ``needs_probe``); ``health``:
    the verdicts of ``policy.health``, asked together with ``readyz``.
    """
    look = Look(
        cluster=cluster,
        policy=policy,
        runs=runs,
        fleet=fleet,
        now=now,
        readyz=readyz,
        health=health,
    )
    stop = next((stop for step in CHAIN if (stop := step(look)) is not None), None)
    if stop is None:
        raise AssertionError("no step of the auto-patch chain answered")
    return _decision(look, stop)


def _decision(look: Look, stop: Stop) -> Decision:
    """The status, condition and Events that say ``stop``."""
    if stop.reason is None:
        return Decision(status=None, condition=None, needs_probe=stop.needs_probe)
    reason, now = stop.reason, look.now
    status = (stop.status or look.status).model_copy(
        update={"reason": reason.value, "message": stop.message}
    )
    condition = Condition(
        type=READY,
        status=ConditionStatus.FALSE if reason in _STOPPED else ConditionStatus.TRUE,
        reason=reason.value,
        message=stop.message,
        observed_generation=None,
        last_transition_time=now,
    )
    events = [*_resumed(look, reason), *stop.events, *_blocked(look, reason, stop.message)]
    opened, upcoming = look.opened, look.upcoming
    wake = opened.end if opened else (upcoming.start if upcoming else None)
    moments = [m for m in (wake, stop.wake_at) if m is not None and m > now]
    return Decision(
        status=status,
        condition=condition,
        events=tuple(events),
        start=stop.start,
        halt=stop.halt,
        keep_halt=stop.keep_halt,
        needs_probe=stop.needs_probe,
        wake_at=min(moments) if moments else None,
    )


def _resumed(look: Look, reason: Reason) -> tuple[PlannedEvent, ...]:
    """The Event of a suspension lifted: the record holds one and the failure check
    passed."""
    suspension = look.previous.suspension if look.previous else None
    if suspension is None or reason in _BEFORE_RESUME:
        return ()
    message = (
        f"auto-patch resumed after TalosOperation {suspension.operation} "
        f"({suspension.component} {suspension.version}) failed"
    )
    return (PlannedEvent(EventType.NORMAL, AutoPatchEventReason.RESUMED, message),)


def _blocked(look: Look, reason: Reason, message: str) -> tuple[PlannedEvent, ...]:
    """One Warning Event when auto-patch stops for a new reason (a failure has its own)."""
    old = conditions.find(look.cluster.status.conditions, READY)
    if reason not in _STOPPED or reason in (Reason.FAILED, Reason.DISABLED):
        return ()
    if old is not None and old.reason == reason.value:
        return ()
    return (PlannedEvent(EventType.WARNING, AutoPatchEventReason.BLOCKED, message),)


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
