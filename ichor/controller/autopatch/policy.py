"""A cluster's auto-patch settings in force: its own over the fleet's, field by field. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

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

_T = TypeVar("_T")

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
    chosen = _own_or_fleet(own.components, base.components)
    windows: tuple[Window, ...] = _own_or_fleet(own.windows, base.windows) or ()
    suspended = _own_or_fleet(own.suspended, base.suspended)
    age, problems = _min_release_age(_own_or_fleet(own.min_release_age, base.min_release_age))
    read = Windows.read(windows)
    problems.extend(read.problems)
    checks = _own_or_fleet(own.health_checks, base.health_checks)
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


def _own_or_fleet(own: _T | None, fleet: _T | None) -> _T | None:
    """A cluster's own setting where it sets one (even empty), else the fleet's."""
    return own if own is not None else fleet


def _min_release_age(text: str | None) -> tuple[timedelta, list[str]]:
    """``minReleaseAge`` read, with the default where it is unset; an unreadable one is a
    problem and the default applies."""
    try:
        return parse_duration(text or DEFAULT_MIN_RELEASE_AGE, field="minReleaseAge"), []
    except WindowError as error:
        return parse_duration(DEFAULT_MIN_RELEASE_AGE, field="minReleaseAge"), [str(error)]


def max_concurrent(fleet: FleetAutoPatchSpec | None) -> int:
    value = fleet.max_concurrent_clusters if fleet else None
    return value if value is not None and value >= 1 else DEFAULT_MAX_CONCURRENT_CLUSTERS
