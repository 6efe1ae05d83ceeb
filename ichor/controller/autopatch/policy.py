"""A cluster's auto-patch settings in force: its own over the fleet's, field by field. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from ichor.api.autopatch import (
    DEFAULT_HEALTH_CHECK_RESOURCES,
    DEFAULT_MAX_CONCURRENT_CLUSTERS,
    DEFAULT_MIN_RELEASE_AGE,
    AutoPatchComponent,
    AutoPatchSpec,
    FleetAutoPatchSpec,
    Window,
)
from ichor.controller.autopatch.health import Compiled, compile_checks
from ichor.controller.autopatch.windows import WindowError, Windows, parse_duration
from ichor.upgrade.rule import Component

#: The order components are patched in: Talos before Kubernetes. Cilium selects nothing.
ORDER: tuple[tuple[AutoPatchComponent, Component], ...] = (
    (AutoPatchComponent.TALOS, Component.TALOS),
    (AutoPatchComponent.KUBERNETES, Component.KUBERNETES),
)


@dataclass(frozen=True)
class Policy:
    components: tuple[Component, ...]
    windows: Windows
    min_release_age: timedelta
    suspended: bool
    #: Set when a field cannot be read (the CRD refuses these; a stored object may hold one).
    problems: tuple[str, ...]
    #: Whether any component or window is set at all, by the cluster or the fleet.
    configured: bool
    #: The health checks in force, compiled (one that does not compile is a problem).
    health: tuple[Compiled, ...] = ()

    @property
    def enabled(self) -> bool:
        """On: some component that selects something, and some window."""
        return bool(self.components) and bool(self.windows.schedules or self.windows.problems)


def effective(
    *,
    cluster: AutoPatchSpec | None,
    fleet: FleetAutoPatchSpec | None,
    health_resources: Sequence[str] = DEFAULT_HEALTH_CHECK_RESOURCES,
) -> Policy:
    """The settings in force for one cluster; ``health_resources``: what a health check
    may read (the operator's settings)."""
    own = cluster or AutoPatchSpec()
    base = fleet or FleetAutoPatchSpec()
    chosen = own.components if own.components is not None else base.components
    windows: tuple[Window, ...] = own.windows if own.windows is not None else (base.windows or ())
    age_text = own.min_release_age if own.min_release_age is not None else base.min_release_age
    suspended = own.suspended if own.suspended is not None else base.suspended
    problems: list[str] = []
    try:
        age = parse_duration(age_text or DEFAULT_MIN_RELEASE_AGE, field="minReleaseAge")
    except WindowError as error:
        problems.append(str(error))
        age = parse_duration(DEFAULT_MIN_RELEASE_AGE, field="minReleaseAge")
    read = Windows.read(windows)
    problems.extend(read.problems)
    checks = own.health_checks if own.health_checks is not None else base.health_checks
    health, unreadable = compile_checks(checks or (), allowed=health_resources)
    problems.extend(unreadable)
    selected = set(chosen or ())
    return Policy(
        components=tuple(c for a, c in ORDER if a in selected),
        windows=read,
        min_release_age=age,
        suspended=bool(suspended),
        problems=tuple(problems),
        configured=bool(chosen) or bool(windows),
        health=health,
    )


def max_concurrent(fleet: FleetAutoPatchSpec | None) -> int:
    value = fleet.max_concurrent_clusters if fleet else None
    return value if value is not None and value >= 1 else DEFAULT_MAX_CONCURRENT_CLUSTERS
