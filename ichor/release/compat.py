"""The compatibility table: which Kubernetes minors each Talos and Cilium minor runs.

Every path (webhook, plan, executors, CLI, adopt, choices) asks this module whether a pair
can run together, so they cannot disagree. The table is data with a source per entry
(``CILIUM_KUBERNETES``, ``TALOS_KUBERNETES``); a minor it does not know is an
``UNKNOWN_VERSION`` refusal, which no override passes. Adding a minor: docs/development.md,
"Adding a Talos or Cilium minor".

More in docs/design/notes.md, "ichor/release/compat.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from ichor.release import machinery
from ichor.release.refusals import Refusal, Rule, refuse
from ichor.release.versions import Version, as_version, parse

__all__ = [
    "CILIUM_KUBERNETES",
    "TALOS_KUBERNETES",
    "KubernetesRange",
    "cilium_kubernetes_error",
    "known_kubernetes_minors",
    "known_talos_minors",
    "minor_text",
    "talos_kubernetes_error",
    "unknown_kubernetes",
    "unknown_talos",
]

Minor = tuple[int, int]


@dataclass(frozen=True, slots=True)
class KubernetesRange:
    """Kubernetes minors ``low`` to ``high``, both inclusive, with where they come from."""

    low: Minor
    high: Minor
    source: str

    def holds(self, minor: Minor) -> bool:
        return self.low <= minor <= self.high

    def __str__(self) -> str:
        return f"{minor_text(self.low)} to {minor_text(self.high)}"


CILIUM_KUBERNETES: Mapping[Minor, KubernetesRange] = MappingProxyType(
    {
        (1, 18): KubernetesRange(
            low=(1, 30),
            high=(1, 33),
            # Cilium 1.18.16 CI matrix
            source="https://github.com/cilium/cilium/blob/v1.18.16/.github/actions/ginkgo/main-k8s-versions.yaml",
        ),
        (1, 19): KubernetesRange(
            low=(1, 32),
            high=(1, 35),
            # Cilium 1.19.10 CI matrix; its compatibility.rst agrees, the requirements page is stale
            source="https://github.com/cilium/cilium/blob/v1.19.10/.github/actions/ginkgo/main-k8s-versions.yaml",
        ),
        (1, 20): KubernetesRange(
            low=(1, 33),
            high=(1, 36),
            # Cilium 1.20.4 CI matrix
            source="https://github.com/cilium/cilium/blob/v1.20.4/.github/actions/ginkgo/main-k8s-versions.yaml",
        ),
    }
)

TALOS_KUBERNETES: Mapping[Minor, KubernetesRange] = MappingProxyType(
    {
        (1, 14): KubernetesRange(
            low=(1, 33),
            high=(1, 37),
            # Talos support matrix; machinery v1.14 accepts from 1.32.0 and bounds this range
            source="https://docs.siderolabs.com/talos/v1.14/getting-started/support-matrix",
        ),
    }
)

_NO_OVERRIDE = "no override passes an unknown version"


def minor_text(minor: Minor) -> str:
    return f"{minor[0]}.{minor[1]}"


def known_talos_minors() -> tuple[Minor, ...]:
    return tuple(sorted(set(machinery.known_talos_minors()) | set(TALOS_KUBERNETES)))


@lru_cache(maxsize=1)
def known_kubernetes_minors() -> frozenset[Minor]:
    minors: set[Minor] = set()
    for talos in machinery.known_talos_minors():
        row = machinery.bounds(talos)
        if row is not None:
            minors.update(row.kubernetes_minors)
    for table in (TALOS_KUBERNETES, CILIUM_KUBERNETES):
        for entry in table.values():
            if entry.low[0] == entry.high[0]:
                minors.update((entry.low[0], m) for m in range(entry.low[1], entry.high[1] + 1))
    return frozenset(minors)


def _span(minors: frozenset[Minor] | tuple[Minor, ...]) -> str:
    ordered = sorted(minors)
    return f"{minor_text(ordered[0])} to {minor_text(ordered[-1])}"


def unknown_talos(talos: Version, *, machinery_said: str | None = None) -> Refusal | None:
    """An ``UNKNOWN_VERSION`` refusal when neither machinery nor the table has the minor.

    ``machinery_said``: machinery's own sentence for this version (an upgrade target:
    "upgrades to version 1.15.0 are not supported"); it comes first, then the step.
    """
    if machinery.bounds(talos.minor_key) is not None or talos.minor_key in TALOS_KUBERNETES:
        return None
    known = _span(known_talos_minors())
    if machinery_said is not None:
        return refuse(
            Rule.UNKNOWN_VERSION,
            f"Talos {talos.tag} is refused: {machinery_said} (Talos machinery); this Ichor "
            f"knows Talos {known}, so a newer Ichor release is needed; {_NO_OVERRIDE}.",
        )
    return refuse(
        Rule.UNKNOWN_VERSION,
        f"Talos {talos.tag} is refused: this Ichor knows Talos {known} (Talos machinery and "
        f"its compatibility table), so a newer Ichor release is needed; {_NO_OVERRIDE}.",
    )


def unknown_kubernetes(kubernetes: Version) -> Refusal | None:
    """An ``UNKNOWN_VERSION`` refusal for a Kubernetes minor nothing here mentions."""
    if kubernetes.minor_key in known_kubernetes_minors():
        return None
    return refuse(
        Rule.UNKNOWN_VERSION,
        f"Kubernetes {kubernetes.tag} is refused: this Ichor knows Kubernetes "
        f"{_span(known_kubernetes_minors())} (Talos machinery and its compatibility table), "
        f"so a newer Ichor release is needed; {_NO_OVERRIDE}.",
    )


def _machinery_range(talos: Minor) -> str:
    row = machinery.bounds(talos)
    assert row is not None
    lo, hi = row.min_kubernetes, row.max_kubernetes
    return f"{lo[0]}.{lo[1]}.{lo[2]} up to, not including, {hi[0]}.{hi[1]}.{hi[2]}"


@lru_cache(maxsize=4096)
def _talos_kubernetes(talos: Version, kubernetes: Version) -> Refusal | None:
    unknown = unknown_talos(talos) or unknown_kubernetes(kubernetes)
    if unknown is not None:
        return unknown
    pair = f"Kubernetes {kubernetes.tag} is refused with Talos {talos.tag}"
    step = (
        f"so choose a Kubernetes in that range or a Talos that runs "
        f"{minor_text(kubernetes.minor_key)}"
    )
    entry = TALOS_KUBERNETES.get(talos.minor_key)
    if entry is not None and not entry.holds(kubernetes.minor_key):
        return refuse(
            Rule.TALOS_KUBERNETES,
            f"{pair}: Talos {minor_text(talos.minor_key)} runs Kubernetes {entry} "
            f"(Talos support matrix), {step}.",
        )
    said = machinery.kubernetes_supported_with(kubernetes=kubernetes, talos=talos)
    if said is not None:
        return refuse(
            Rule.TALOS_KUBERNETES,
            f"{pair}: Talos {minor_text(talos.minor_key)} runs Kubernetes "
            f"{_machinery_range(talos.minor_key)} (Talos machinery: {said}), {step}.",
        )
    return None


def talos_kubernetes_error(*, talos: str | Version, kubernetes: str | Version) -> Refusal | None:
    """None when this Talos runs this Kubernetes; else the refusal naming the range.

    Raises ``VersionError`` when either does not parse.
    """
    talos_v, kubernetes_v = as_version(talos), as_version(kubernetes)
    if talos_v.build or kubernetes_v.build:  # equal under the cache key, printed apart
        return _talos_kubernetes.__wrapped__(talos_v, kubernetes_v)
    return _talos_kubernetes(talos_v, kubernetes_v)


def cilium_kubernetes_error(*, cilium: str | Version, kubernetes: str | Version) -> Refusal | None:
    """None when this Cilium minor runs this Kubernetes minor; else the refusal.

    A Cilium version that does not parse is an unknown version (it is observed, never
    typed by a person); a Kubernetes that does not parse raises ``VersionError``.
    """
    kubernetes_v = as_version(kubernetes)
    if isinstance(cilium, Version):
        cilium_v = cilium
    else:
        try:
            cilium_v = parse(cilium)
        except ValueError:
            return refuse(
                Rule.UNKNOWN_VERSION,
                f"Cilium {cilium!r} is refused: it is not a version this Ichor can read "
                f"(it knows Cilium {_span(tuple(CILIUM_KUBERNETES))}); {_NO_OVERRIDE}.",
            )
    if cilium_v.build or kubernetes_v.build:
        return _cilium_kubernetes.__wrapped__(cilium_v, kubernetes_v)
    return _cilium_kubernetes(cilium_v, kubernetes_v)


@lru_cache(maxsize=4096)
def _cilium_kubernetes(cilium: Version, kubernetes: Version) -> Refusal | None:
    entry = CILIUM_KUBERNETES.get(cilium.minor_key)
    if entry is None:
        return refuse(
            Rule.UNKNOWN_VERSION,
            f"Cilium {cilium} is refused: this Ichor's compatibility table knows Cilium "
            f"{_span(tuple(CILIUM_KUBERNETES))}, so nothing is known to run with it; "
            f"{_NO_OVERRIDE}.",
        )
    unknown = unknown_kubernetes(kubernetes)
    if unknown is not None:
        return unknown
    if entry.holds(kubernetes.minor_key):
        return None
    return refuse(
        Rule.CILIUM_KUBERNETES,
        f"Kubernetes {kubernetes.tag} is refused with Cilium {cilium}: Cilium "
        f"{minor_text(cilium.minor_key)} runs Kubernetes {entry} (Cilium CI matrix), "
        f"so choose a Kubernetes in that range or move Cilium first.",
    )
