"""Talos machinery's compatibility rows as of Talos 1.14: numbers only, no logic.

One row per target Talos minor, as upstream keeps one ``talosNNN`` package per minor
(``pkg/machinery/compatibility/talosNNN/talosNNN.go``). The logic that reads them is
``ichor.release.machinery``. This file refuses rows for minors machinery v1.14 does not
know: Talos 1.15 is unknown to this build even though Talos ``main`` has a row for it.

Adding a Talos minor: copy the values of the new ``talosNNN.go`` of the release branch
that first ships it, add one ``MachineryRow`` below with its source, move ``SNAPSHOT`` to
that branch's commit, and add the minor's cases to ``tests/unit/machinery``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ROWS", "SNAPSHOT", "MachineryRow"]

# siderolabs/talos release-1.14 (tag v1.14.0-rc.1); the values are the same on main.
SNAPSHOT = "7a84d742b3d53451cbaa1eb91d9b12403e80161c"


@dataclass(frozen=True, slots=True)
class MachineryRow:
    """What machinery stores for one target Talos minor (versions as written upstream)."""

    talos: tuple[int, int]
    min_host: str  # lowest host that may upgrade to this minor (inclusive)
    max_host_downgrade: str  # a host at or above this may not downgrade to it (exclusive)
    denied_hosts: tuple[str, ...]  # compared by full semver equality; empty for every minor
    min_kubernetes: str  # inclusive
    max_kubernetes: str  # stored as 1.X.99 and compared exclusively
    source: str


def _source(minor: int) -> str:
    return (
        f"https://github.com/siderolabs/talos/blob/{SNAPSHOT}"
        f"/pkg/machinery/compatibility/talos1{minor}/talos1{minor}.go"
    )


ROWS: tuple[MachineryRow, ...] = (
    MachineryRow(
        talos=(1, 2),
        min_host="1.0.0",
        max_host_downgrade="1.3.0",
        denied_hosts=(),
        min_kubernetes="1.23.0",
        max_kubernetes="1.25.99",
        source=_source(2),
    ),
    MachineryRow(
        talos=(1, 3),
        min_host="1.0.0",
        max_host_downgrade="1.5.0",
        denied_hosts=(),
        min_kubernetes="1.24.0",
        max_kubernetes="1.26.99",
        source=_source(3),
    ),
    MachineryRow(
        talos=(1, 4),
        min_host="1.0.0",
        max_host_downgrade="1.6.0",
        denied_hosts=(),
        min_kubernetes="1.25.0",
        max_kubernetes="1.27.99",
        source=_source(4),
    ),
    MachineryRow(
        talos=(1, 5),
        min_host="1.2.0",
        max_host_downgrade="1.7.0",
        denied_hosts=(),
        min_kubernetes="1.26.0",
        max_kubernetes="1.28.99",
        source=_source(5),
    ),
    MachineryRow(
        talos=(1, 6),
        min_host="1.3.0",
        max_host_downgrade="1.8.0",
        denied_hosts=(),
        min_kubernetes="1.24.0",
        max_kubernetes="1.29.99",
        source=_source(6),
    ),
    MachineryRow(
        talos=(1, 7),
        min_host="1.4.0",
        max_host_downgrade="1.9.0",
        denied_hosts=(),
        min_kubernetes="1.25.0",
        max_kubernetes="1.30.99",
        source=_source(7),
    ),
    MachineryRow(
        talos=(1, 8),
        min_host="1.5.0",
        max_host_downgrade="1.10.0",
        denied_hosts=(),
        min_kubernetes="1.26.0",
        max_kubernetes="1.31.99",
        source=_source(8),
    ),
    MachineryRow(
        talos=(1, 9),
        min_host="1.8.0",
        max_host_downgrade="1.11.0",
        denied_hosts=(),
        min_kubernetes="1.27.0",
        max_kubernetes="1.32.99",
        source=_source(9),
    ),
    MachineryRow(
        talos=(1, 10),
        min_host="1.8.0",
        max_host_downgrade="1.12.0",
        denied_hosts=(),
        min_kubernetes="1.28.0",
        max_kubernetes="1.33.99",
        source=_source(10),
    ),
    MachineryRow(
        talos=(1, 11),
        min_host="1.9.0",
        max_host_downgrade="1.13.0",
        denied_hosts=(),
        min_kubernetes="1.29.0",
        max_kubernetes="1.34.99",
        source=_source(11),
    ),
    MachineryRow(
        talos=(1, 12),
        min_host="1.10.0",
        max_host_downgrade="1.14.0",
        denied_hosts=(),
        min_kubernetes="1.30.0",
        max_kubernetes="1.35.99",
        source=_source(12),
    ),
    MachineryRow(
        talos=(1, 13),
        min_host="1.11.0",
        max_host_downgrade="1.15.0",
        denied_hosts=(),
        min_kubernetes="1.31.0",
        max_kubernetes="1.36.99",
        source=_source(13),
    ),
    MachineryRow(
        talos=(1, 14),
        min_host="1.12.0",
        max_host_downgrade="1.16.0",
        denied_hosts=(),
        min_kubernetes="1.32.0",
        max_kubernetes="1.37.99",
        source=_source(14),
    ),
)
