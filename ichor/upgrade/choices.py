"""The upgrade choices of one cluster: the published releases the target rule accepts.

The recorded Talos and Kubernetes tags become what a person picks from, newest first:
*Recommended* (the release set's version), *Patch* (newer patches of the running minor)
and *Next minor* (the adjacent minor only). Each passes ``target.check_target_version``,
so the choices never offer what the plan refuses. No Kubernetes is offered while the
Cilium is unknown. Tags are parsed once per list and indexed by minor.

More in docs/design/notes.md, "ichor/upgrade/choices.py".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

from ichor.release.observed import Unreadable
from ichor.release.release_set import PINNED
from ichor.release.versions import Version, VersionError, parse
from ichor.upgrade.rule import ClusterVersions, Component, check_target_version

__all__ = [
    "Availability",
    "Choices",
    "KubernetesHold",
    "Unavailable",
    "availability",
    "choose",
    "finals",
    "kubernetes_choices",
    "kubernetes_hold",
    "talos_choices",
]

# Numbers of at most 19 digits fit machinery's uint64; longer ones are not releases.
_FINAL_TAG = re.compile(r"v(0|[1-9][0-9]{0,18})\.(0|[1-9][0-9]{0,18})\.(0|[1-9][0-9]{0,18})")

Minor = tuple[int, int]


class _Index:
    """The final tags of one list grouped by minor; Versions are built per minor on demand.

    Building a ``Version`` costs more than matching a tag, and a cluster looks at two
    minors only, so the list is matched once and each minor is built when first asked.
    """

    __slots__ = ("_built", "_raw")

    def __init__(self, tags: tuple[str, ...]) -> None:
        raw: dict[tuple[str, str], list[str]] = {}
        for match in map(_FINAL_TAG.fullmatch, tags):
            if match is not None:
                raw.setdefault((match[1], match[2]), []).append(match[3])
        self._raw = raw
        self._built: dict[Minor, tuple[Version, ...]] = {}

    def minor(self, key: Minor) -> tuple[Version, ...]:
        """The finals of one minor, newest first."""
        built = self._built.get(key)
        if built is None:
            major, minor = key
            patches = {int(p) for p in self._raw.get((str(major), str(minor)), ())}
            built = tuple(Version(major, minor, p) for p in sorted(patches, reverse=True))
            self._built[key] = built
        return built

    def newest_first(self) -> list[Version]:
        keys = sorted(((int(a), int(b)) for a, b in self._raw), reverse=True)
        return [v for key in keys for v in self.minor(key)]


@lru_cache(maxsize=8)
def _index(tags: tuple[str, ...]) -> _Index:
    return _Index(tags)


def finals(tags: Iterable[str]) -> list[Version]:
    """The final releases among registry tags: ``vX.Y.Z`` only, no duplicates, newest first.

    Tags without the leading ``v`` (the chart's style), pre-releases, builds and odd
    forms (leading zeros, ``vX.Y``) are not releases a cluster is moved to.
    """
    return _index(tuple(tags)).newest_first()


@dataclass(frozen=True)
class Choices:
    """The groups a person picks from, newest first, and the default pick."""

    recommended: Version | None = None
    patch: list[Version] = field(default_factory=list)
    next_minor: list[Version] = field(default_factory=list)
    default: Version | None = None

    @property
    def offered(self) -> list[Version]:
        """Every version offered, once, newest first."""
        every = {*self.patch, *self.next_minor}
        if self.recommended is not None:
            every.add(self.recommended)
        return sorted(every, reverse=True)


def choose(
    *,
    component: Component,
    cluster: ClusterVersions,
    releases: Iterable[str],
    recommended: str,
) -> Choices:
    """Build the groups for one component from the recorded releases."""
    index = _index(tuple(releases))
    try:
        running = parse(cluster.talos if component is Component.TALOS else cluster.kubernetes)
    except VersionError:
        return Choices()

    def valid(version: Version) -> bool:
        if version <= running:
            return False
        return check_target_version(component=component, target=version, cluster=cluster) is None

    patch = [v for v in index.minor(running.minor_key) if valid(v)]
    next_minor = [v for v in index.minor((running.major, running.minor + 1)) if valid(v)]
    pick: Version | None = None
    try:
        wanted = parse(recommended)
    except VersionError:
        wanted = None
    if (
        wanted is not None
        and wanted.is_final
        and wanted in index.minor(wanted.minor_key)
        and valid(wanted)
    ):
        pick = wanted
    default = pick if pick is not None else (patch[0] if patch else None)
    return Choices(recommended=pick, patch=patch, next_minor=next_minor, default=default)


def talos_choices(
    *, cluster: ClusterVersions, releases: Iterable[str], recommended: str = PINNED.talos
) -> Choices:
    """Talos: newer, on machinery's path, and paired with the cluster's Kubernetes."""
    return choose(
        component=Component.TALOS, cluster=cluster, releases=releases, recommended=recommended
    )


@dataclass(frozen=True, slots=True)
class KubernetesHold:
    """Why no Kubernetes is offered or planned yet, and the step: the CNI decides which
    Kubernetes can run, so nothing is guessed before it is observed."""

    reason: str
    step: str

    def __str__(self) -> str:
        return f"{self.reason}; {self.step}"


def kubernetes_hold(cluster: ClusterVersions) -> KubernetesHold | None:
    """The one gate: no Kubernetes until the CNI is observed and, for a Cilium Ichor runs,
    its release too (a Cilium seen whose release cannot be read holds for good, until a
    person makes it readable). The choices, the status, the CLI, the blocked lines and
    the path plan all ask this."""
    if cluster.cni is None:
        return KubernetesHold(
            reason="no CNI is observed on the cluster yet, and the CNI decides which "
            "Kubernetes can run",
            step="wait until the controller observes it (status.cni.detected)",
        )
    if not cluster.cilium_constrains:
        return None
    if isinstance(cluster.cilium, Unreadable):
        # Seen, release not: every Kubernetes step is refused (UnreadableVersion).
        return KubernetesHold(reason=cluster.cilium.what, step=cluster.cilium.step)
    if cluster.cilium is None:
        return KubernetesHold(
            reason="the cluster runs Cilium and its release is not observed yet",
            step="wait until the controller observes it (status.cni.detectedVersion)",
        )
    return None


def kubernetes_choices(
    *, cluster: ClusterVersions, releases: Iterable[str], recommended: str = PINNED.kubernetes
) -> Choices:
    """Kubernetes: newer, one minor at most, paired with the cluster's Talos, and run by
    the observed Cilium when the CNI is Cilium. An unobserved CNI, or a Cilium CNI whose
    release is not seen, offers nothing."""
    if kubernetes_hold(cluster) is not None:
        return Choices()
    return choose(
        component=Component.KUBERNETES,
        cluster=cluster,
        releases=releases,
        recommended=recommended,
    )


class Unavailable(StrEnum):
    """Why a recorded list cannot be used, or may be stale."""

    CHECK_OFF = "CheckOff"
    NOT_RECORDED = "NotRecorded"
    LISTING_FAILED = "ListingFailed"


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether the choices can be used, and why not (or why they may be stale)."""

    available: bool
    reason: str | None = None
    cause: Unavailable | None = None


def availability(*, check_enabled: bool, recorded: bool, error: str | None) -> Availability:
    """``recorded``: a list of this kind was ever recorded; ``error``: its last listing's
    failure (only this kind's: one repository failing does not mark the other stale)."""
    if not check_enabled:
        return Availability(
            available=False,
            reason="the release check is off, so no published releases are listed; "
            "turn it on in the IchorInstallation or type a version",
            cause=Unavailable.CHECK_OFF,
        )
    if not recorded:
        if error:
            return Availability(
                available=False,
                reason=f"the release listing failed ({error}) and no list was recorded yet",
                cause=Unavailable.LISTING_FAILED,
            )
        return Availability(
            available=False,
            reason="no release list has been recorded yet; the release check has not run",
            cause=Unavailable.NOT_RECORDED,
        )
    if error:
        return Availability(
            available=True,
            reason=f"the last release listing failed ({error}), so the list may be stale",
            cause=Unavailable.LISTING_FAILED,
        )
    return Availability(available=True)
