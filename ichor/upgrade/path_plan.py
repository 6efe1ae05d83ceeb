"""Path plans: the shortest list of upgrades that takes a cluster to a goal, or why none.

``plan_path(...) -> PathPlan`` finds, over the recorded releases, the fewest operations
that reach a Talos and/or Kubernetes goal, each step with its exact command and why it is
there (``ichor upgrade plan``, the status). It adds no rule: every step passes
``target.check_target`` at the state the steps before it leave. A goal no sequence
reaches is ``UNREACHABLE`` with the reason; a list that cannot be used is
``UNAVAILABLE``, a goal that is not a final recorded release ``INVALID``. Nothing is
executed. More in docs/design/notes.md, "ichor/upgrade/path_plan.py".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from ichor.release.compat import talos_kubernetes_error
from ichor.release.refusals import Refusal, Rule
from ichor.release.release_set import PINNED
from ichor.release.versions import Version, VersionError, check_final, parse
from ichor.upgrade import blocked, choices
from ichor.upgrade.choices import Availability
from ichor.upgrade.rule import ClusterVersions, Component, check_target

__all__ = [
    "Goal",
    "PathPlan",
    "PlanOutcome",
    "PlanStep",
    "Releases",
    "command",
    "plan_path",
]

Minor = tuple[int, int]

_AVAILABLE = Availability(available=True)


class PlanOutcome(StrEnum):
    """What the plan found. CamelCase, so it serves as a reason."""

    REACHABLE = "Reachable"  # the steps reach the goal (none when it already runs)
    UNREACHABLE = "Unreachable"  # no sequence of upgrades under the rules reaches it
    UNAVAILABLE = "Unavailable"  # a needed list, or the cluster's CNI, is not known
    INVALID = "Invalid"  # the goal or the cluster's spec is not a version to plan with


@dataclass(frozen=True, slots=True)
class Goal:
    """Where the plan goes: a Talos and/or a Kubernetes version (None: any)."""

    talos: Version | None = None
    kubernetes: Version | None = None
    defaulted: bool = False

    def reached_by(self, state: ClusterVersions) -> bool:
        return (self.talos is None or parse(state.talos) == self.talos) and (
            self.kubernetes is None or parse(state.kubernetes) == self.kubernetes
        )

    def __str__(self) -> str:
        parts = [
            f"{name} {version.tag}"
            for name, version in (("Talos", self.talos), ("Kubernetes", self.kubernetes))
            if version is not None
        ]
        return " and ".join(parts) if parts else "the versions the cluster runs"


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One operation: the command to run, the state before and after, and why."""

    component: Component
    target: str  # a tag for Talos and Kubernetes; the embedded chart for the CNI
    before: ClusterVersions
    after: ClusterVersions
    command: str
    why: str


@dataclass(frozen=True, slots=True)
class PathPlan:
    """The answer of ``plan_path``; ``steps`` is empty unless ``REACHABLE``.

    ``reason`` says why the goal is not reached (or cannot be planned); ``blocked`` is
    the typed line behind an ``UNREACHABLE`` reason when one move stops the path.
    """

    outcome: PlanOutcome
    start: ClusterVersions
    goal: Goal | None = None
    steps: tuple[PlanStep, ...] = ()
    reason: str | None = None
    blocked: blocked.BlockedRelease | None = None
    warnings: tuple[str, ...] = ()
    instead: PathPlan | None = None

    @property
    def reachable(self) -> bool:
        return self.outcome is PlanOutcome.REACHABLE

    @property
    def end(self) -> ClusterVersions:
        return self.steps[-1].after if self.steps else self.start

    @property
    def commands(self) -> tuple[str, ...]:
        return tuple(step.command for step in self.steps)


@dataclass(frozen=True, slots=True)
class Releases:
    """One component's recorded finals, grouped by minor, newest first."""

    by_minor: dict[Minor, tuple[Version, ...]]

    @classmethod
    def of(cls, tags: Iterable[str]) -> Releases:
        grouped: dict[Minor, list[Version]] = {}
        for version in choices.finals(tags):
            grouped.setdefault(version.minor_key, []).append(version)
        return cls({minor: tuple(versions) for minor, versions in grouped.items()})

    def newest(self, minor: Minor) -> Version | None:
        versions = self.by_minor.get(minor)
        return versions[0] if versions else None

    def newest_overall(self) -> Version | None:
        return self.by_minor[max(self.by_minor)][0] if self.by_minor else None

    def holds(self, version: Version) -> bool:
        return version in self.by_minor.get(version.minor_key, ())


def command(component: Component, *, cluster: str, target: str) -> str:
    """The exact ``ichor`` command of one operation."""
    if component is Component.CNI:
        return f"ichor cni upgrade {cluster}"
    return f"ichor upgrade {component.value} {cluster} {target}"


_RANK = {Component.KUBERNETES: 0, Component.CNI: 1, Component.TALOS: 2}
_NAME = {Component.TALOS: "Talos", Component.KUBERNETES: "Kubernetes", Component.CNI: "Cilium"}

_Edge = tuple[Component, str, ClusterVersions]


def _next(minor: Minor) -> Minor:
    return (minor[0], minor[1] + 1)


def _kubernetes_known(cluster: ClusterVersions) -> str | None:
    """Why Kubernetes cannot be moved yet (the choices' gate), or None."""
    hold = choices.kubernetes_hold(cluster)
    return str(hold) if hold is not None else None


class _Search:
    """The moves of one cluster and goal, and the graph they span from the start."""

    def __init__(
        self,
        *,
        start: ClusterVersions,
        talos: Releases,
        kubernetes: Releases,
        goal: Goal,
        move_kubernetes: bool,
    ) -> None:
        self.start = start
        self.talos = talos
        self.kubernetes = kubernetes
        self.goal = goal
        self.move_kubernetes = move_kubernetes
        self.edges: dict[ClusterVersions, list[_Edge]] = {}
        self._explore()

    def _candidates(
        self,
        component: Component,
        releases: Releases,
        state: ClusterVersions,
        goal: Version | None,
    ) -> list[Version]:
        """The moves of one component the rule accepts at ``state``: the newest patch of
        the running and of the next minor (the newest the site's policy leaves), and the
        goal when it is of one of them."""
        running = parse(state.talos if component is Component.TALOS else state.kubernetes)
        here, there = running.minor_key, _next(running.minor_key)
        found: set[Version] = set()
        for minor in (here, there):
            for version in releases.by_minor.get(minor, ()):  # newest first
                if version <= running:
                    break
                refusal = check_target(component=component, target=version.tag, cluster=state)
                if refusal is None:
                    found.add(version)
                    break
                if refusal.rule is not Rule.SITE_POLICY:
                    break  # every other rule judges the minor, not the patch
        if (
            goal is not None
            and goal.minor_key in (here, there)
            and goal > running
            and check_target(component=component, target=goal.tag, cluster=state) is None
        ):
            found.add(goal)
        return sorted(found, reverse=True)

    def moves(self, state: ClusterVersions) -> list[_Edge]:
        out: list[_Edge] = []
        for version in self._candidates(Component.TALOS, self.talos, state, self.goal.talos):
            out.append((Component.TALOS, version.tag, replace(state, talos=version.tag)))
        if not self.move_kubernetes:
            return out
        for version in self._candidates(
            Component.KUBERNETES, self.kubernetes, state, self.goal.kubernetes
        ):
            out.append((Component.KUBERNETES, version.tag, replace(state, kubernetes=version.tag)))
        chart = PINNED.cilium_chart
        if (
            state.cilium_constrains
            and check_target(component=Component.CNI, target=chart, cluster=state) is None
        ):
            out.append((Component.CNI, chart, replace(state, cilium=chart)))
        return out

    def _explore(self) -> None:
        queue = deque([self.start])
        self.edges[self.start] = []
        while queue:
            state = queue.popleft()
            self.edges[state] = self.moves(state)
            for _, _, after in self.edges[state]:
                if after not in self.edges:
                    self.edges[after] = []
                    queue.append(after)

    @property
    def states(self) -> list[ClusterVersions]:
        return list(self.edges)

    def walk(self, goal: Goal) -> list[_Edge] | None:
        """The shortest path to a state that reaches ``goal``, in the fixed order."""
        into: dict[ClusterVersions, list[ClusterVersions]] = {}
        for state, edges in self.edges.items():
            for _, _, after in edges:
                into.setdefault(after, []).append(state)
        left: dict[ClusterVersions, int] = {}
        queue: deque[ClusterVersions] = deque()
        for state in self.edges:
            if goal.reached_by(state):
                left[state] = 0
                queue.append(state)
        while queue:
            state = queue.popleft()
            for before in into.get(state, ()):
                if before not in left:
                    left[before] = left[state] + 1
                    queue.append(before)
        if self.start not in left:
            return None
        path: list[_Edge] = []
        state = self.start
        while left[state] > 0:
            best = min(
                (edge for edge in self.edges[state] if left.get(edge[2]) == left[state] - 1),
                key=lambda edge: (_RANK[edge[0]], _descending(edge)),
            )
            path.append(best)
            state = best[2]
        return path


def _descending(edge: _Edge) -> tuple[int, int, int]:
    if edge[0] is Component.CNI:
        return (0, 0, 0)
    major, minor, patch = parse(edge[1]).core
    return (-major, -minor, -patch)


def _field(component: Component) -> str:
    return {Component.TALOS: "talos", Component.KUBERNETES: "kubernetes"}.get(component, "cilium")


def _goal_of(goal: Goal, component: Component) -> Version | None:
    if component is Component.TALOS:
        return goal.talos
    return goal.kubernetes if component is Component.KUBERNETES else None


def _why(
    path: Sequence[_Edge],
    index: int,
    *,
    start: ClusterVersions,
    goal: Goal,
    recorded: Mapping[Component, Releases],
) -> str:
    """Why a step is in the plan, in the order a person would ask it, and why this patch
    when the site's policy denies the newer ones of its minor (``_passed_over``)."""
    said = _reason_of(path, index, start=start, goal=goal)
    component, target, _ = path[index]
    before = path[index - 1][2] if index else start
    over = _passed_over(component, parse(target) if component is not Component.CNI else None,
                        before=before, recorded=recorded)  # fmt: skip
    return f"{said}; {over}" if over else said


def _passed_over(
    component: Component,
    target: Version | None,
    *,
    before: ClusterVersions,
    recorded: Mapping[Component, Releases],
) -> str | None:
    """The newer patches of the target's minor the site's policy denies, said once."""
    releases = recorded.get(component)
    if target is None or releases is None:
        return None
    denied = [
        version
        for version in releases.by_minor.get(target.minor_key, ())
        if version > target
        and (refusal := check_target(component=component, target=version.tag, cluster=before))
        is not None
        and refusal.rule is Rule.SITE_POLICY
    ]
    if not denied:
        return None
    shown = ", ".join(version.tag for version in denied)
    return f"{shown} of that minor denied by this site's policy"


def _reason_of(path: Sequence[_Edge], index: int, *, start: ClusterVersions, goal: Goal) -> str:
    """The goal's last step says so; a Kubernetes step toward a Kubernetes goal is one
    minor at a time; any other step names the first later step of another component
    that the rule refuses without it (the same ``check_target``, with this step undone).
    """
    component, target, after = path[index]
    before = path[index - 1][2] if index else start
    field = _field(component)
    wanted = _goal_of(goal, component)
    if wanted is not None and parse(getattr(after, field)) == wanted:
        return f"reaches the goal, {_NAME[component]} {target}"
    if component is Component.KUBERNETES and wanted is not None:
        return f"Kubernetes moves one minor at a time, toward {wanted.tag}"
    for later in range(index + 1, len(path)):
        other, other_target, _ = path[later]
        if other is component:
            continue
        at = path[later - 1][2]
        undone = replace(at, **{field: getattr(before, field)})
        refusal = check_target(component=other, target=other_target, cluster=undone)
        if refusal is not None:
            said = _short(other, other_target, undone, refusal)
            return f"{_NAME[other]} {other_target} needs it: {said}"
    if component is Component.TALOS:
        return "the path the Talos docs test goes through the newest patch of each minor"
    if component is Component.KUBERNETES:
        return "Kubernetes moves one minor at a time"
    return "moves Cilium to the chart this Ichor embeds"


def _short(component: Component, target: str, cluster: ClusterVersions, refusal: Refusal) -> str:
    if component is Component.CNI:
        return refusal.message
    line = blocked.explain(component=component, version=parse(target), cluster=cluster)
    return line.reason if line is not None else refusal.message


def _describe(state: ClusterVersions) -> str:
    parts = [f"Talos {parse(state.talos).tag}", f"Kubernetes {parse(state.kubernetes).tag}"]
    if state.cilium_constrains and isinstance(state.cilium, str):
        parts.append(f"Cilium {state.cilium}")
    elif state.cilium_constrains and state.cilium is not None:
        parts.append("Cilium (release not readable)")
    return ", ".join(parts)


def _steps(
    path: Sequence[_Edge],
    *,
    start: ClusterVersions,
    goal: Goal,
    name: str,
    recorded: Mapping[Component, Releases],
) -> tuple[PlanStep, ...]:
    steps: list[PlanStep] = []
    before = start
    for index, (component, target, after) in enumerate(path):
        steps.append(
            PlanStep(
                component=component,
                target=target,
                before=before,
                after=after,
                command=command(component, cluster=name, target=target),
                why=_why(path, index, start=start, goal=goal, recorded=recorded),
            )
        )
        before = after
    return tuple(steps)


def _unreachable(search: _Search, goal: Goal) -> tuple[str, blocked.BlockedRelease | None]:
    """Why no path reaches ``goal``: a goal pair the table refuses, else for the first
    component the rules never reach, the furthest state and the move that stops there."""
    verb = "are" if goal.talos is not None and goal.kubernetes is not None else "is"
    head = f"{goal} {verb} not reachable with this build"
    pair = _goal_pair_refusal(goal)
    if pair is not None:
        return f"{head}: {pair.message}", None
    for component, target in (
        (Component.TALOS, goal.talos),
        (Component.KUBERNETES, goal.kubernetes),
    ):
        if target is None or _ever_reached(search, component, target):
            continue
        stopped = _stopped(search, component, target)
        if stopped is None:
            break
        return stopped
    return f"{head}: no order of upgrades under the rules reaches both", None


def _goal_pair_refusal(goal: Goal) -> Refusal | None:
    """The table's refusal of a goal's Talos and Kubernetes together (a version it does
    not know is not this refusal: the moves toward it say why)."""
    if goal.talos is None or goal.kubernetes is None:
        return None
    pair = talos_kubernetes_error(talos=goal.talos, kubernetes=goal.kubernetes)
    if pair is None or pair.rule is Rule.UNKNOWN_VERSION:
        return None
    return pair


def _ever_reached(search: _Search, component: Component, target: Version) -> bool:
    """Whether some state the rules reach runs ``target``."""
    return any(parse(getattr(state, _field(component))) == target for state in search.states)


def _furthest(search: _Search, component: Component, target: Version) -> ClusterVersions:
    """The state the rules take furthest toward ``target``: the newest of the component,
    then of the other, then with the embedded Cilium. A state past the goal (a newer
    patch the rules took) can never come back to it, so it counts only when none is
    short of it."""
    mine = _field(component)
    other = _field(Component.KUBERNETES if component is Component.TALOS else Component.TALOS)
    short = [state for state in search.states if parse(getattr(state, mine)) < target]
    return max(
        short or search.states,
        key=lambda state: (
            parse(getattr(state, mine)),
            parse(getattr(state, other)),
            state.cilium == PINNED.cilium_chart,
        ),
    )


def _stopped(
    search: _Search, component: Component, target: Version
) -> tuple[str, blocked.BlockedRelease | None] | None:
    """Why the move toward ``target`` from the furthest state fails: no release of the
    next minor, or the line of ``blocked.explain`` (None: no line says it)."""
    furthest = _furthest(search, component, target)
    running = parse(getattr(furthest, _field(component)))
    releases = search.talos if component is Component.TALOS else search.kubernetes
    here, there = running.minor_key, _next(running.minor_key)
    step = target if target.minor_key in (here, there) else releases.newest(there)
    at = _describe(furthest)
    name = _NAME[component]
    if step is None:
        return (
            f"{name} {target.tag} is not reachable with this build: no "
            f"{name} {there[0]}.{there[1]} release is recorded, and "
            f"{name} moves one minor at a time (the furthest the rules "
            f"reach is {at})",
            None,
        )
    line = blocked.explain(component=component, version=step, cluster=furthest)
    if line is None:
        return None
    via = "" if step == target else f"it goes through {name} {step.tag}, and "
    return (
        f"{name} {target.tag} is not reachable {_under(line)}: {via}"
        f"{line.reason}; {line.step} (the furthest the rules reach is {at})",
        line,
    )


def _under(line: blocked.BlockedRelease) -> str:
    """What stops a move: this site's policy, or this build's tables."""
    if line.blocker in (blocked.Blocker.SITE_POLICY, blocked.Blocker.SITE_POLICY_UNREADABLE):
        return "under this site's policy"
    return "with this build"


def plan_path(
    *,
    cluster: ClusterVersions,
    talos_releases: Iterable[str],
    kubernetes_releases: Iterable[str],
    talos: str | None = None,
    kubernetes: str | None = None,
    name: str = "CLUSTER",
    talos_availability: Availability = _AVAILABLE,
    kubernetes_availability: Availability = _AVAILABLE,
) -> PathPlan:
    """The shortest plan from ``cluster`` to the goal over the recorded releases.

    ``talos``/``kubernetes``: the goal (final ``vX.Y.Z``); with neither, the newest
    recorded of each. ``name`` goes into the commands. The availabilities come from
    ``choices.availability`` for each list (``status.upgradeTargets``).

    The steps, in order: the lists must be usable, the goal valid and plannable, then
    the search; a goal it does not reach is said by ``_not_reached``.
    """
    listed = _usable_lists(cluster, talos=talos_availability, kubernetes=kubernetes_availability)
    if isinstance(listed, PathPlan):
        return listed
    recorded = {
        Component.TALOS: Releases.of(talos_releases),
        Component.KUBERNETES: Releases.of(kubernetes_releases),
    }
    gate = _kubernetes_known(cluster)
    aimed = _goal(cluster, talos=talos, kubernetes=kubernetes, recorded=recorded, gate=gate)
    if isinstance(aimed, PathPlan):
        return aimed
    goal, gated = aimed
    warnings = (*listed, *gated)
    search = _Search(
        start=cluster,
        talos=recorded[Component.TALOS],
        kubernetes=recorded[Component.KUBERNETES],
        goal=goal,
        move_kubernetes=gate is None,
    )
    path = search.walk(goal)
    if path is None:
        return _not_reached(
            search, goal, gate=gate, name=name, recorded=recorded, warnings=warnings
        )
    return _reachable(
        path, start=cluster, goal=goal, name=name, recorded=recorded, warnings=warnings
    )


def _reachable(
    path: Sequence[_Edge],
    *,
    start: ClusterVersions,
    goal: Goal,
    name: str,
    recorded: Mapping[Component, Releases],
    warnings: tuple[str, ...],
) -> PathPlan:
    """The plan of a path the search found."""
    return PathPlan(
        outcome=PlanOutcome.REACHABLE,
        start=start,
        goal=goal,
        steps=_steps(path, start=start, goal=goal, name=name, recorded=recorded),
        warnings=warnings,
    )


def _usable_lists(
    cluster: ClusterVersions, *, talos: Availability, kubernetes: Availability
) -> PathPlan | tuple[str, ...]:
    """The warnings of usable release lists (a stale one), or the answer that a list is
    not usable (the Talos list's first)."""
    warnings: list[str] = []
    for label, usable in (("Talos", talos), ("Kubernetes", kubernetes)):
        if not usable.available:
            return PathPlan(
                outcome=PlanOutcome.UNAVAILABLE,
                start=cluster,
                reason=f"The {label} release list is unavailable: {usable.reason}.",
            )
        if usable.reason:
            warnings.append(f"The {label} release list: {usable.reason}.")
    return tuple(warnings)


def _goal(
    cluster: ClusterVersions,
    *,
    talos: str | None,
    kubernetes: str | None,
    recorded: Mapping[Component, Releases],
    gate: str | None,
) -> PathPlan | tuple[Goal, tuple[str, ...]]:
    """The goal and its warnings, or the answer that it cannot be planned: a cluster's
    spec that does not parse, then each component's goal (Talos first), then a
    Kubernetes goal the gate holds."""
    try:
        running = {
            Component.TALOS: parse(cluster.talos),
            Component.KUBERNETES: parse(cluster.kubernetes),
        }
    except VersionError as error:
        return PathPlan(
            outcome=PlanOutcome.INVALID,
            start=cluster,
            reason=f"The cluster's spec is refused: {error}.",
        )
    defaulted = talos is None and kubernetes is None
    wanted: dict[Component, Version | None] = {}
    for component, given in ((Component.TALOS, talos), (Component.KUBERNETES, kubernetes)):
        version = _wanted(
            component,
            given,
            cluster=cluster,
            running=running[component],
            releases=recorded[component],
            defaulted=defaulted,
        )
        if isinstance(version, PathPlan):
            return version
        wanted[component] = version
    return _gated(
        Goal(
            talos=wanted[Component.TALOS],
            kubernetes=wanted[Component.KUBERNETES],
            defaulted=defaulted,
        ),
        cluster=cluster,
        running=running[Component.KUBERNETES],
        gate=gate,
    )


def _wanted(
    component: Component,
    given: str | None,
    *,
    cluster: ClusterVersions,
    running: Version,
    releases: Releases,
    defaulted: bool,
) -> PathPlan | Version | None:
    """One component's goal: the version given, which must be a final recorded release
    not behind the running one; without one, the newest recorded when the whole goal is
    defaulted and it is newer than the running one (None: the component does not move)."""
    label = _NAME[component]
    if given is None:
        newest = releases.newest_overall() if defaulted else None
        return newest if newest is not None and newest > running else None
    try:
        version = check_final(given, field=f"the {label} goal")
    except VersionError as error:
        return PathPlan(outcome=PlanOutcome.INVALID, start=cluster, reason=f"{error}.")
    if version < running:
        return PathPlan(
            outcome=PlanOutcome.UNREACHABLE,
            start=cluster,
            reason=f"{label} {version.tag} is not reachable: the cluster runs "
            f"{running.tag}, and a version never moves back.",
        )
    if version > running and not releases.holds(version):
        return PathPlan(
            outcome=PlanOutcome.INVALID,
            start=cluster,
            reason=f"{label} {version.tag} is not among the recorded releases, and the "
            f"plan moves only to recorded releases.",
        )
    return version


def _gated(
    goal: Goal, *, cluster: ClusterVersions, running: Version, gate: str | None
) -> PathPlan | tuple[Goal, tuple[str, ...]]:
    """The goal under the choices' gate on Kubernetes: a Kubernetes move it holds is
    refused when asked for, and dropped with a warning from a defaulted goal."""
    if gate is None or goal.kubernetes in (None, running):
        return goal, ()
    if not goal.defaulted:
        return PathPlan(
            outcome=PlanOutcome.UNAVAILABLE,
            start=cluster,
            reason=f"No Kubernetes step can be planned: {gate}.",
        )
    return replace(goal, kubernetes=None), (f"No Kubernetes step is planned: {gate}.",)


def _not_reached(
    search: _Search,
    goal: Goal,
    *,
    gate: str | None,
    name: str,
    recorded: Mapping[Component, Releases],
    warnings: tuple[str, ...],
) -> PathPlan:
    """The answer for a goal the search does not reach: unavailable when only the gate
    on Kubernetes stops it, else unreachable with the reason (and, for a defaulted goal,
    the plan to the newest the rules do reach)."""
    reason, line = _unreachable(search, goal)
    if gate is not None and _reached_ungated(search, goal):
        return PathPlan(
            outcome=PlanOutcome.UNAVAILABLE,
            start=search.start,
            goal=goal,
            reason=f"{goal} needs a Kubernetes step, and none can be planned yet: {gate}.",
            warnings=warnings,
        )
    return PathPlan(
        outcome=PlanOutcome.UNREACHABLE,
        start=search.start,
        goal=goal,
        reason=reason.rstrip(".") + ".",
        blocked=line,
        warnings=warnings,
        instead=_instead(search, goal, name=name, recorded=recorded, warnings=warnings),
    )


def _reached_ungated(search: _Search, goal: Goal) -> bool:
    """Whether the goal is reached once Kubernetes may move."""
    ungated = _Search(
        start=search.start,
        talos=search.talos,
        kubernetes=search.kubernetes,
        goal=goal,
        move_kubernetes=True,
    )
    return ungated.walk(goal) is not None


def _instead(
    search: _Search,
    goal: Goal,
    *,
    name: str,
    recorded: Mapping[Component, Releases],
    warnings: tuple[str, ...],
) -> PathPlan | None:
    """For a defaulted goal not reached, the plan to the newest Talos, and the newest
    Kubernetes with it, that the rules do reach (None: no move, or not defaulted)."""
    if not goal.defaulted:
        return None
    start = search.start
    best = max(search.states, key=lambda state: (parse(state.talos), parse(state.kubernetes)))
    if best == start:
        return None
    closer = Goal(talos=parse(best.talos), kubernetes=parse(best.kubernetes))
    route = search.walk(closer)
    if route is None:
        return None
    return _reachable(
        route, start=start, goal=closer, name=name, recorded=recorded, warnings=warnings
    )
