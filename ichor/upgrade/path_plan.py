"""Path plans: the shortest list of upgrades that takes a cluster to a goal, or why none.

A Talos several minors behind, or a Kubernetes the running Talos or Cilium cannot run,
needs more than one operation, in an order the rules accept. ``plan_path`` finds the
shortest such list over the recorded releases and says, for each step, the exact command
and why it is there:

    ichor upgrade kubernetes prod v1.34.7
    ichor upgrade kubernetes prod v1.35.6
    ichor cni upgrade prod                     (Kubernetes v1.36.7 needs it)
    ichor upgrade talos prod v1.13.5           (Kubernetes v1.36.7 needs it)
    ichor upgrade kubernetes prod v1.36.7
    ichor upgrade talos prod v1.14.4

It adds no rule. Every step passes ``target.check_target`` at the state the steps before
it leave (the rule the webhook's dry run and the executors apply), and the moves tried
are the ones the choices would offer at that state, narrowed to the tested path:

- Talos: the newest recorded patch of the running or the next minor, or the goal (the
  path the Talos docs test goes through the newest patch of each intermediate minor,
  though machinery lets a typed version skip one);
- Kubernetes: the newest recorded patch of the running or the next minor, or the goal
  (one minor at a time); none while the cluster's CNI is not observed, as the choices;
- Cilium (a Cilium CNI only): the chart this Ichor embeds (``PINNED.cilium_chart``).

A patch this site's policy denies is routed around: the move is then the newest patch of
that minor the policy leaves (no other rule tells two patches of one minor apart).

The search is breadth-first over these moves, so the plan has the fewest operations.
Among plans of that length the order is fixed: a Kubernetes move as soon as one keeps
the plan shortest, then the Cilium step, then Talos; so the plan reads as Kubernetes one
minor at a time, with a Cilium or Talos step inserted right where the next Kubernetes
minor needs it, and the Talos moves the goal still asks for at the end.

The goal is a Talos and/or Kubernetes version; with neither, the newest recorded of each
(``Goal.defaulted``). A goal no sequence reaches is ``UNREACHABLE`` with the reason: the
furthest state the rules reach and the line of ``blocked.explain`` that stops the next
move there ("not reachable with this build: ... a newer Ichor release is needed"). For a
defaulted goal, ``instead`` then holds the plan to the newest Talos, and the newest
Kubernetes with it, that the rules do reach.

It refuses to plan what it cannot check: a list that ``choices.availability`` calls
unusable (check off, never recorded) is ``UNAVAILABLE`` with that reason (a stale list is
used, with a warning); a goal that is not a final recorded release is ``INVALID``; and
Kubernetes is not moved while no CNI (or no Cilium release) is observed, nor while the
Cilium release cannot be read. Nothing is executed: the plan lists commands, and
upgrades stay one component per operation.

For the callers (``ichor upgrade plan CLUSTER [--talos V] [--kubernetes V]``, status):
``plan_path(...) -> PathPlan`` (``outcome``, ``goal``, ``steps`` each a ``PlanStep`` with
``command`` and ``why``, ``reason``, ``blocked``, ``warnings``, ``instead``).
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
    """Why no path reaches ``goal``: the furthest state and the move that stops there."""
    verb = "are" if goal.talos is not None and goal.kubernetes is not None else "is"
    head = f"{goal} {verb} not reachable with this build"
    if goal.talos is not None and goal.kubernetes is not None:
        pair = talos_kubernetes_error(talos=goal.talos, kubernetes=goal.kubernetes)
        if pair is not None and pair.rule is not Rule.UNKNOWN_VERSION:
            return f"{head}: {pair.message}", None
    chart = PINNED.cilium_chart
    for component, target in (
        (Component.TALOS, goal.talos),
        (Component.KUBERNETES, goal.kubernetes),
    ):
        if target is None:
            continue
        mine, other = (
            ("talos", "kubernetes") if component is Component.TALOS else ("kubernetes", "talos")
        )
        if any(parse(getattr(state, mine)) == target for state in search.states):
            continue
        # a state past the goal (a newer patch the rules took) can never come back to it
        short = [state for state in search.states if parse(getattr(state, mine)) < target]
        furthest = max(
            short or search.states,
            key=lambda state: (
                parse(getattr(state, mine)),
                parse(getattr(state, other)),
                state.cilium == chart,
            ),
        )
        running = parse(getattr(furthest, mine))
        releases = search.talos if component is Component.TALOS else search.kubernetes
        here, there = running.minor_key, _next(running.minor_key)
        step = target if target.minor_key in (here, there) else releases.newest(there)
        at = _describe(furthest)
        if step is None:
            return (
                f"{_NAME[component]} {target.tag} is not reachable with this build: no "
                f"{_NAME[component]} {there[0]}.{there[1]} release is recorded, and "
                f"{_NAME[component]} moves one minor at a time (the furthest the rules "
                f"reach is {at})",
                None,
            )
        line = blocked.explain(component=component, version=step, cluster=furthest)
        if line is None:
            break
        via = "" if step == target else f"it goes through {_NAME[component]} {step.tag}, and "
        under = (
            "under this site's policy"
            if line.blocker in (blocked.Blocker.SITE_POLICY, blocked.Blocker.SITE_POLICY_UNREADABLE)
            else "with this build"
        )
        return (
            f"{_NAME[component]} {target.tag} is not reachable {under}: {via}"
            f"{line.reason}; {line.step} (the furthest the rules reach is {at})",
            line,
        )
    return f"{head}: no order of upgrades under the rules reaches both", None


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
    """
    warnings: list[str] = []
    for label, usable in (("Talos", talos_availability), ("Kubernetes", kubernetes_availability)):
        if not usable.available:
            return PathPlan(
                outcome=PlanOutcome.UNAVAILABLE,
                start=cluster,
                reason=f"The {label} release list is unavailable: {usable.reason}.",
            )
        if usable.reason:
            warnings.append(f"The {label} release list: {usable.reason}.")
    try:
        running_talos, running_kubernetes = parse(cluster.talos), parse(cluster.kubernetes)
    except VersionError as error:
        return PathPlan(
            outcome=PlanOutcome.INVALID,
            start=cluster,
            reason=f"The cluster's spec is refused: {error}.",
        )
    recorded = {
        Component.TALOS: Releases.of(talos_releases),
        Component.KUBERNETES: Releases.of(kubernetes_releases),
    }
    gate = _kubernetes_known(cluster)
    wanted: dict[Component, Version | None] = {}
    defaulted = talos is None and kubernetes is None
    for component, given, running in (
        (Component.TALOS, talos, running_talos),
        (Component.KUBERNETES, kubernetes, running_kubernetes),
    ):
        label = _NAME[component]
        if given is None:
            newest = recorded[component].newest_overall() if defaulted else None
            wanted[component] = newest if newest is not None and newest > running else None
            continue
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
        if version > running and not recorded[component].holds(version):
            return PathPlan(
                outcome=PlanOutcome.INVALID,
                start=cluster,
                reason=f"{label} {version.tag} is not among the recorded releases, and the "
                f"plan moves only to recorded releases.",
            )
        wanted[component] = version
    if gate is not None and wanted[Component.KUBERNETES] not in (None, running_kubernetes):
        if not defaulted:
            return PathPlan(
                outcome=PlanOutcome.UNAVAILABLE,
                start=cluster,
                reason=f"No Kubernetes step can be planned: {gate}.",
            )
        wanted[Component.KUBERNETES] = None
        warnings.append(f"No Kubernetes step is planned: {gate}.")
    goal = Goal(
        talos=wanted[Component.TALOS],
        kubernetes=wanted[Component.KUBERNETES],
        defaulted=defaulted,
    )
    search = _Search(
        start=cluster,
        talos=recorded[Component.TALOS],
        kubernetes=recorded[Component.KUBERNETES],
        goal=goal,
        move_kubernetes=gate is None,
    )
    path = search.walk(goal)
    if path is not None:
        return PathPlan(
            outcome=PlanOutcome.REACHABLE,
            start=cluster,
            goal=goal,
            steps=_steps(path, start=cluster, goal=goal, name=name, recorded=recorded),
            warnings=tuple(warnings),
        )
    reason, line = _unreachable(search, goal)
    if gate is not None:
        ungated = _Search(
            start=cluster,
            talos=recorded[Component.TALOS],
            kubernetes=recorded[Component.KUBERNETES],
            goal=goal,
            move_kubernetes=True,
        )
        if ungated.walk(goal) is not None:
            return PathPlan(
                outcome=PlanOutcome.UNAVAILABLE,
                start=cluster,
                goal=goal,
                reason=f"{goal} needs a Kubernetes step, and none can be planned yet: {gate}.",
                warnings=tuple(warnings),
            )
    instead: PathPlan | None = None
    if defaulted:
        best = max(search.states, key=lambda state: (parse(state.talos), parse(state.kubernetes)))
        if best != cluster:
            closer = Goal(talos=parse(best.talos), kubernetes=parse(best.kubernetes))
            route = search.walk(closer)
            if route is not None:
                instead = PathPlan(
                    outcome=PlanOutcome.REACHABLE,
                    start=cluster,
                    goal=closer,
                    steps=_steps(route, start=cluster, goal=closer, name=name, recorded=recorded),
                    warnings=tuple(warnings),
                )
    return PathPlan(
        outcome=PlanOutcome.UNREACHABLE,
        start=cluster,
        goal=goal,
        reason=reason.rstrip(".") + ".",
        blocked=line,
        warnings=tuple(warnings),
        instead=instead,
    )
