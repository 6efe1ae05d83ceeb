"""Talos machinery's two compatibility rules, ported with their exact error wordings.

These functions answer exactly as ``pkg/machinery/compatibility`` v1.14 does
(``UpgradeableFrom``, ``SupportedWith``): same order of checks, same bounds, same
messages, the same parse (``versions.parse``). The rows live apart in
``machinery_rows``. No direction check besides the bounds (a same-minor downgrade
passes, as upstream), and no knowledge of minors outside the rows.

More in docs/design/notes.md, "ichor/release/machinery.py".
"""

from __future__ import annotations

from dataclasses import dataclass

from ichor.release.machinery_rows import ROWS, MachineryRow
from ichor.release.versions import Version, parse

__all__ = [
    "Bounds",
    "bounds",
    "known_talos_minors",
    "kubernetes_supported_with",
    "upgradeable_from",
]


@dataclass(frozen=True, slots=True)
class Bounds:
    """One row with its versions parsed once (the rules read only cores and minors)."""

    row: MachineryRow
    min_host: tuple[int, int, int]
    max_host_downgrade: tuple[int, int, int]
    denied_hosts: tuple[Version, ...]
    min_kubernetes: tuple[int, int, int]
    max_kubernetes: tuple[int, int, int]

    @property
    def kubernetes_minors(self) -> tuple[tuple[int, int], ...]:
        """The Kubernetes minors the row accepts at least one patch of."""
        (lo_major, lo_minor, _), (hi_major, hi_minor, hi_patch) = (
            self.min_kubernetes,
            self.max_kubernetes,
        )
        if lo_major != hi_major:  # never the case upstream; keep the answer honest
            return ()
        last = hi_minor if hi_patch > 0 else hi_minor - 1
        return tuple((lo_major, m) for m in range(lo_minor, last + 1))


def _bounds(row: MachineryRow) -> Bounds:
    return Bounds(
        row=row,
        min_host=parse(row.min_host).core,
        max_host_downgrade=parse(row.max_host_downgrade).core,
        denied_hosts=tuple(parse(v) for v in row.denied_hosts),
        min_kubernetes=parse(row.min_kubernetes).core,
        max_kubernetes=parse(row.max_kubernetes).core,
    )


_BY_MINOR: dict[tuple[int, int], Bounds] = {row.talos: _bounds(row) for row in ROWS}


def bounds(talos_minor: tuple[int, int]) -> Bounds | None:
    """The row of a target Talos minor, or None when machinery v1.14 does not know it."""
    return _BY_MINOR.get(talos_minor)


def known_talos_minors() -> tuple[tuple[int, int], ...]:
    return tuple(sorted(_BY_MINOR))


def upgradeable_from(*, target: str | Version, host: str | Version) -> str | None:
    """``TalosVersion.UpgradeableFrom``: None when ``host`` may install ``target``,
    else machinery's error text. Raises ``VersionError`` when either does not parse."""
    target_v, host_v = _as_version(target), _as_version(host)
    row = _BY_MINOR.get(target_v.minor_key)
    if row is None:
        return f"upgrades to version {target_v} are not supported"
    too = _outside(host_v, low=row.min_host, high=row.max_host_downgrade)
    if too is not None:
        move = "upgrade" if too == "old" else "downgrade"
        return f"host version {host_v} is too {too} to {move} to Talos {target_v}"
    for denied in row.denied_hosts:
        if host_v == denied:
            return f"host version {host_v} is denied for upgrade to Talos {target_v}"
    return None


def kubernetes_supported_with(*, kubernetes: str | Version, talos: str | Version) -> str | None:
    """``KubernetesVersion.SupportedWith``: None when the Talos target supports this
    Kubernetes, else machinery's error text. Raises ``VersionError`` on unparsable input."""
    kubernetes_v, talos_v = _as_version(kubernetes), _as_version(talos)
    row = _BY_MINOR.get(talos_v.minor_key)
    if row is None:
        return f"compatibility with version {talos_v} is not supported"
    too = _outside(kubernetes_v, low=row.min_kubernetes, high=row.max_kubernetes)
    return (
        None
        if too is None
        else f"version of Kubernetes {kubernetes_v} is too {too} to be used with Talos {talos_v}"
    )


def _as_version(value: str | Version) -> Version:
    """``value`` parsed; raises ``VersionError`` when it does not parse."""
    return value if isinstance(value, Version) else parse(value)


def _outside(
    version: Version, *, low: tuple[int, int, int], high: tuple[int, int, int]
) -> str | None:
    """Where ``version`` falls outside machinery's ``[low, high)``: "old", "new", or None."""
    if version.core < low:
        return "old"
    if version.core >= high:
        return "new"
    return None
