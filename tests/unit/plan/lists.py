"""Release lists shaped like the recorded ones, and the rules run by hand over them.

``TALOS_TAGS`` and ``KUBERNETES_TAGS`` look like ``ghcr.io/siderolabs/installer-base``
and ``ghcr.io/siderolabs/kubelet`` as of this build: every patch of each minor, the
alpha/beta/rc tags of each minor, the first minor this build does not know only as
pre-releases, and the odd non-release tags a registry holds. ``execute`` and
``shortest`` apply the rule functions directly, so the plan is checked against the rules,
not against itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ichor.release.release_set import PINNED
from ichor.release.versions import Version, parse
from ichor.upgrade.choices import finals
from ichor.upgrade.path_plan import PathPlan, PlanStep
from ichor.upgrade.rule import ClusterVersions, Component, check_target
from tests.support import table


def _minor_tags(minor: str, newest_patch: int) -> list[str]:
    pre = [f"v{minor}.0-alpha.0", f"v{minor}.0-alpha.1", f"v{minor}.0-beta.0", f"v{minor}.0-rc.0"]
    return pre + [f"v{minor}.{patch}" for patch in range(newest_patch + 1)]


TALOS_TAGS: tuple[str, ...] = tuple(
    [
        *_minor_tags("1.10", 9),
        *_minor_tags("1.11", 6),
        *_minor_tags("1.12", 7),
        *_minor_tags("1.13", 5),
        *_minor_tags("1.14", 4),
        f"{table.unknown_talos()}-alpha.0",
        f"{table.unknown_talos()}-alpha.1",
        "latest",
        "sha256-4f1c0ea1b2.sig",
    ]
)

KUBERNETES_TAGS: tuple[str, ...] = tuple(
    [
        *_minor_tags("1.30", 14),
        *_minor_tags("1.31", 13),
        *_minor_tags("1.32", 11),
        *_minor_tags("1.33", 8),
        *_minor_tags("1.34", 7),
        *_minor_tags("1.35", 6),
        *_minor_tags("1.36", 7),
        *_minor_tags("1.37", 2),
        f"{table.unknown_kubernetes()}-alpha.2",
        f"{table.unknown_kubernetes()}-rc.0",
        "1.36.7",
    ]
)


def execute(plan: PathPlan) -> ClusterVersions:
    """Run each step through ``check_target`` at the state the steps before it leave;
    fail on the first refusal, and return the state the last step leaves."""
    state = plan.start
    for step in plan.steps:
        assert step.before == state
        refusal = check_target(component=step.component, target=step.target, cluster=state)
        assert refusal is None, f"{step.command} at {state}: {refusal}"
        state = after(step, state)
        assert step.after == state
    return state


def after(step: PlanStep, state: ClusterVersions) -> ClusterVersions:
    if step.component is Component.TALOS:
        return replace(state, talos=step.target)
    if step.component is Component.KUBERNETES:
        return replace(state, kubernetes=step.target)
    return replace(state, cilium=PINNED.cilium_chart)


def shortest(
    *,
    start: ClusterVersions,
    talos_tags: Iterable[str],
    kubernetes_tags: Iterable[str],
    talos: Version | None,
    kubernetes: Version | None,
) -> int | None:
    """Brute force: breadth-first over *every* recorded release the rules accept.

    Talos moves at most one minor at a time (the tested path the plan follows; the
    rule alone would let it skip), Kubernetes wherever ``check_target`` lets it, no
    Kubernetes while the CNI is unobserved (the choices' gate), and the Cilium step.
    """
    talos_finals: Sequence[Version] = finals(talos_tags)
    kubernetes_finals: Sequence[Version] = finals(kubernetes_tags)

    def done(state: ClusterVersions) -> bool:
        return (talos is None or parse(state.talos) == talos) and (
            kubernetes is None or parse(state.kubernetes) == kubernetes
        )

    gate = start.cni is None or (start.cilium_constrains and start.cilium is None)
    seen = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if done(state):
            return seen[state]
        running = parse(state.talos)
        moves: list[ClusterVersions] = []
        for version in talos_finals:
            if version.minor_key > (running.major, running.minor + 1):
                continue
            if check_target(component=Component.TALOS, target=version.tag, cluster=state) is None:
                moves.append(replace(state, talos=version.tag))
        if not gate:
            for version in kubernetes_finals:
                if (
                    check_target(component=Component.KUBERNETES, target=version.tag, cluster=state)
                    is None
                ):
                    moves.append(replace(state, kubernetes=version.tag))
            if (
                state.cilium_constrains
                and check_target(component=Component.CNI, target="", cluster=state) is None
            ):
                moves.append(replace(state, cilium=PINNED.cilium_chart))
        for move in moves:
            # No version moves back, so a state past the goal never reaches it.
            if (talos is not None and parse(move.talos) > talos) or (
                kubernetes is not None and parse(move.kubernetes) > kubernetes
            ):
                continue
            if move not in seen:
                seen[move] = seen[state] + 1
                queue.append(move)
    return None
