"""Why a recorded release is not offered, and the step that would unblock it.

For every recorded final release newer than what runs and not offered, one line per
minor, newest first: the component or rule that blocks it, and the step that unblocks
it. It adds no rule: the reason is the first refusal of ``target.check_target_version``,
in words. ``blocked_releases`` gives the lines of one component, ``explain`` one line
(the plan uses it), ``summarize`` the status summary. It never raises on a spec that
does not parse: such a cluster has no lines. More in docs/design/notes.md,
"ichor/upgrade/blocked.py".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache

from ichor.release import compat, machinery
from ichor.release.observed import Unreadable
from ichor.release.refusals import Refusal, Rule
from ichor.release.release_set import PINNED
from ichor.release.versions import Version, VersionError, parse
from ichor.upgrade import choices as upgrade_choices
from ichor.upgrade.rule import ClusterVersions, Component, check_target, check_target_version

__all__ = [
    "NEWER_ICHOR",
    "BlockedRelease",
    "BlockedSummary",
    "Blocker",
    "blocked_releases",
    "explain",
    "summarize",
]

Minor = tuple[int, int]

NEWER_ICHOR = "a newer Ichor release is needed"

_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


class Blocker(StrEnum):
    """What keeps a release from being offered. CamelCase, so it serves as a reason."""

    TALOS = "Talos"  # the running Talos does not run this Kubernetes
    KUBERNETES = "Kubernetes"  # this Talos does not run the cluster's Kubernetes
    CILIUM = "Cilium"  # the running Cilium does not run this Kubernetes
    TALOS_PATH = "TalosPath"  # machinery: the running Talos is too old to install it
    KUBERNETES_SKEW = "KubernetesSkew"  # more than one Kubernetes minor up, or another major
    TESTED_PATH = "TestedPath"  # the rule accepts it; the choices offer the adjacent minor
    UNKNOWN = "UnknownVersion"  # this build does not know it, or what the cluster runs
    CNI_NOT_OBSERVED = "CniNotObserved"  # no CNI, or no Cilium release, observed yet
    UNREADABLE = "UnreadableVersion"  # Cilium is seen, its release cannot be read
    #: This site's policy (IchorInstallation ``spec.policy``) refuses it: the line gives
    #: the reason a person wrote and names the entry; only the override verb passes it.
    SITE_POLICY = "SitePolicy"
    #: This site's policy cannot be read, so every release is refused until it is fixed.
    SITE_POLICY_UNREADABLE = "SitePolicyUnreadable"


@dataclass(frozen=True, slots=True)
class BlockedRelease:
    """One line of "Not offered": the newest release of a minor, why, and the step.

    ``refusal`` is the target rule's refusal the line explains (None for
    ``TESTED_PATH`` and ``CNI_NOT_OBSERVED``, which the rule does not refuse);
    ``not_offered`` counts the releases of the minor, newer than what runs, that are not
    offered; ``needs_newer_ichor`` is true when no step with this build unblocks it.
    """

    component: Component
    version: Version
    blocker: Blocker
    reason: str
    step: str
    refusal: Refusal | None = None
    not_offered: int = 1
    needs_newer_ichor: bool = False

    @property
    def overridable(self) -> bool:
        """Whether the override verb passes the refusal (never for a path or unknown)."""
        return self.refusal is not None and self.refusal.overridable

    @property
    def message(self) -> str:
        return f"{_name(self.component)} {self.version.tag}: {self.reason}; {self.step}"

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class BlockedSummary:
    """How many releases are not offered, and the nearest blocker of each component.

    ``count`` is the number of lines (one per minor), ``releases`` the releases they
    stand for; ``nearest`` holds, per component (Talos first), the line of the oldest
    blocked minor: the next thing a person would run into.
    """

    count: int
    releases: int
    nearest: tuple[BlockedRelease, ...]

    @property
    def message(self) -> str:
        if self.count == 0:
            return "Every recorded newer release is offered."
        plural = "s" if self.releases != 1 else ""
        verb = "are" if self.releases != 1 else "is"
        return (
            f"{self.releases} recorded newer release{plural} {verb} not offered; nearest: "
            + " ".join(f"{line.message}." for line in self.nearest)
        )

    def __str__(self) -> str:
        return self.message


def _name(component: Component) -> str:
    return "Talos" if component is Component.TALOS else "Kubernetes"


def _text(minor: Minor) -> str:
    return compat.minor_text(minor)


def _next(minor: Minor) -> Minor:
    return (minor[0], minor[1] + 1)


@lru_cache(maxsize=256)
def kubernetes_minors_of(talos: Version) -> tuple[Minor, ...]:
    """The Kubernetes minors this Talos runs, asking ``compat.talos_kubernetes_error``
    with each known minor's ``.0`` (every bound in the table and the rows is a ``.0``)."""
    return tuple(
        minor
        for minor in sorted(compat.known_kubernetes_minors())
        if compat.talos_kubernetes_error(talos=talos, kubernetes=Version(minor[0], minor[1], 0))
        is None
    )


def nearest_talos_running(kubernetes: Version, *, above: Minor) -> Minor | None:
    """The oldest Talos minor newer than ``above`` known to this build that runs it."""
    for minor in compat.known_talos_minors():
        if minor > above and (
            compat.talos_kubernetes_error(
                talos=Version(minor[0], minor[1], 0), kubernetes=kubernetes
            )
            is None
        ):
            return minor
    return None


def explain(
    *, component: Component, version: Version, cluster: ClusterVersions
) -> BlockedRelease | None:
    """Why ``version`` is not offered to this cluster, or None when it would be.

    Raises ``VersionError`` when the cluster's spec does not parse, and ``ValueError``
    for the CNI, which has no list of releases (it moves only to the embedded chart).
    """
    if component is Component.CNI:
        raise ValueError("the CNI has no recorded releases: it moves to the embedded chart")
    refusal = check_target_version(component=component, target=version, cluster=cluster)
    site = _site(component, version, cluster=cluster, refusal=refusal) if refusal else None
    if site is not None:
        return site
    if component is Component.TALOS:
        return _talos(version, cluster=cluster, refusal=refusal)
    return _kubernetes(version, cluster=cluster, refusal=refusal)


def _line(
    component: Component,
    version: Version,
    blocker: Blocker,
    *,
    reason: str,
    step: str,
    refusal: Refusal | None,
    newer_ichor: bool = False,
) -> BlockedRelease:
    return BlockedRelease(
        component=component,
        version=version,
        blocker=blocker,
        reason=reason,
        step=step,
        refusal=refusal,
        needs_newer_ichor=newer_ichor,
    )


_BLOCKER_OF_RULE = {
    Rule.UNKNOWN_VERSION: Blocker.UNKNOWN,
    Rule.TALOS_PATH: Blocker.TALOS_PATH,
    Rule.KUBERNETES_SKEW: Blocker.KUBERNETES_SKEW,
    Rule.CILIUM_KUBERNETES: Blocker.CILIUM,
    Rule.UNREADABLE_VERSION: Blocker.UNREADABLE,
    Rule.SITE_POLICY: Blocker.SITE_POLICY,
    Rule.SITE_POLICY_UNREADABLE: Blocker.SITE_POLICY_UNREADABLE,
}


def _site(
    component: Component, version: Version, *, cluster: ClusterVersions, refusal: Refusal
) -> BlockedRelease | None:
    """The line of a release this site's policy refuses, in the site's words; None for
    any other refusal."""
    if refusal.rule is Rule.SITE_POLICY_UNREADABLE:
        return _line(
            component,
            version,
            Blocker.SITE_POLICY_UNREADABLE,
            reason=f"this site's policy cannot be read ({cluster.policy.unreadable})",
            step="correct spec.policy of IchorInstallation ichor; no override passes it",
            refusal=refusal,
        )
    if refusal.rule is not Rule.SITE_POLICY:
        return None
    entry = cluster.policy.entry(refusal.entry or "")
    if entry is None:  # pragma: no cover - a SitePolicy refusal always names its entry
        return _unexplained(component, version, refusal)
    if entry.highest is not None:
        held = compat.minor_text(entry.highest)
        step = f"choose {_name(component)} {held} or older"
    else:
        step = "choose another release"
    return _line(
        component,
        version,
        Blocker.SITE_POLICY,
        reason=f"denied by this site: {entry.reason}",
        step=f"{step} ({entry.where} {entry.describe()}); the override verb passes it (--override)",
        refusal=refusal,
    )


def _unexplained(component: Component, version: Version, refusal: Refusal) -> BlockedRelease:
    """A refusal no case below words more shortly: its own sentence stands."""
    other = Blocker.TALOS if component is Component.KUBERNETES else Blocker.KUBERNETES
    return _line(
        component,
        version,
        _BLOCKER_OF_RULE.get(refusal.rule, other),
        reason=refusal.message.rstrip("."),
        step="see the refusal",
        refusal=refusal,
    )


def _talos(
    version: Version, *, cluster: ClusterVersions, refusal: Refusal | None
) -> BlockedRelease | None:
    """The line of a Talos release no site's policy refuses (``explain`` asks that first)."""
    running = parse(cluster.talos)
    talos = Component.TALOS
    if refusal is None:
        if version.minor_key <= _next(running.minor_key):
            return None  # the choices offer it (patch or next minor)
        up = version.minor - running.minor
        between = _text(_next(running.minor_key))
        return _line(
            talos,
            version,
            Blocker.TESTED_PATH,
            reason=f"{_WORDS.get(up, str(up))} minors up, and the choices offer the adjacent "
            f"minor only (the path the Talos docs test)",
            step=f"upgrade Talos to the newest v{between} first; a typed {version.tag} "
            f"passes the rule too",
            refusal=None,
        )
    if refusal.rule is Rule.UNKNOWN_VERSION:
        if compat.unknown_talos(version) is not None:
            reason = "unknown to this build"
        else:
            reason = (
                f"the cluster's Kubernetes {parse(cluster.kubernetes).tag} is unknown to this build"
            )
        return _line(
            talos,
            version,
            Blocker.UNKNOWN,
            reason=reason,
            step=NEWER_ICHOR,
            refusal=refusal,
            newer_ichor=True,
        )
    if refusal.rule is Rule.TALOS_PATH:
        row = machinery.bounds(version.minor_key)
        if row is None:
            return _unexplained(talos, version, refusal)
        lo, hi = row.min_host, row.max_host_downgrade
        if running.core < lo:
            return _line(
                talos,
                version,
                Blocker.TALOS_PATH,
                reason=f"Talos {_text(version.minor_key)} installs over Talos "
                f"{_text(lo[:2])} or newer",
                step=f"upgrade Talos to {_text(lo[:2])} or newer first",
                refusal=refusal,
            )
        return _line(
            talos,
            version,
            Blocker.TALOS_PATH,
            reason=f"Talos {_text(version.minor_key)} installs over Talos {lo[0]}.{lo[1]}.{lo[2]} "
            f"up to, not including, {hi[0]}.{hi[1]}.{hi[2]}",
            step="choose a newer Talos",
            refusal=refusal,
        )
    if refusal.rule is Rule.TALOS_KUBERNETES:
        kubernetes = parse(cluster.kubernetes)
        runs = kubernetes_minors_of(version)
        if not runs:
            return _unexplained(talos, version, refusal)
        span = f"{_text(runs[0])} to {_text(runs[-1])}"
        reason = (
            f"Talos {_text(version.minor_key)} runs Kubernetes {span} and the cluster runs "
            f"Kubernetes {kubernetes.tag}"
        )
        if kubernetes.minor_key < runs[0]:
            return _line(
                talos,
                version,
                Blocker.KUBERNETES,
                reason=reason,
                step=f"upgrade Kubernetes to {_text(runs[0])} first",
                refusal=refusal,
            )
        newer = nearest_talos_running(kubernetes, above=version.minor_key)
        step = (
            f"choose Talos {_text(newer)} or newer"
            if newer is not None
            else f"no Talos known to this build runs it: {NEWER_ICHOR}"
        )
        return _line(
            talos,
            version,
            Blocker.KUBERNETES,
            reason=reason,
            step=step,
            refusal=refusal,
            newer_ichor=newer is None,
        )
    return _unexplained(talos, version, refusal)


def _kubernetes(
    version: Version, *, cluster: ClusterVersions, refusal: Refusal | None
) -> BlockedRelease | None:
    """The line of a Kubernetes release no site's policy refuses (``explain`` asks that
    first), by the rule that refuses it: the skew, what the Talos runs, then the Cilium."""
    running = parse(cluster.kubernetes)  # raises for a spec that does not parse
    if refusal is None:
        return _cni_held(version, cluster=cluster)
    if refusal.rule is Rule.KUBERNETES_SKEW:
        return _skew(version, running=running, refusal=refusal)
    talos = parse(cluster.talos)
    return (
        _unknown_talos(version, talos=talos, refusal=refusal)
        or _talos_pair(version, talos=talos, refusal=refusal)
        or _unreadable_cilium(version, cluster=cluster, refusal=refusal)
        or _cilium_pair(version, cluster=cluster, refusal=refusal)
        or _unexplained(Component.KUBERNETES, version, refusal)
    )


def _cni_held(version: Version, *, cluster: ClusterVersions) -> BlockedRelease | None:
    """A release the rule accepts: held back while the choices' gate holds Kubernetes
    (no CNI observed yet), else offered (None)."""
    hold = upgrade_choices.kubernetes_hold(cluster)
    if hold is None:
        return None
    return _line(
        Component.KUBERNETES,
        version,
        Blocker.CNI_NOT_OBSERVED,
        reason=hold.reason,
        step=hold.step,
        refusal=None,
    )


def _skew(version: Version, *, running: Version, refusal: Refusal) -> BlockedRelease:
    """A Kubernetes of another major, or more than one minor up."""
    if version.major != running.major:
        return _line(
            Component.KUBERNETES,
            version,
            Blocker.KUBERNETES_SKEW,
            reason="another major version",
            step="Kubernetes moves one minor at a time within its major, so no upgrade reaches it",
            refusal=refusal,
        )
    up = version.minor - running.minor
    return _line(
        Component.KUBERNETES,
        version,
        Blocker.KUBERNETES_SKEW,
        reason=f"{_WORDS.get(up, str(up))} minors up",
        step=f"move to the newest v{_text(_next(running.minor_key))} first",
        refusal=refusal,
    )


def _unknown_talos(version: Version, *, talos: Version, refusal: Refusal) -> BlockedRelease | None:
    """An unknown version, when it is the Talos the cluster runs that this build does not
    know; None otherwise."""
    if refusal.rule is not Rule.UNKNOWN_VERSION or compat.unknown_talos(talos) is None:
        return None
    return _line(
        Component.KUBERNETES,
        version,
        Blocker.UNKNOWN,
        reason=f"the cluster's Talos {talos.tag} is unknown to this build",
        step=NEWER_ICHOR,
        refusal=refusal,
        newer_ichor=True,
    )


def _talos_pair(version: Version, *, talos: Version, refusal: Refusal) -> BlockedRelease | None:
    """The Talos pair refuses it, or it is a Kubernetes this build does not know (which
    no Talos it knows runs); None otherwise."""
    if refusal.rule is Rule.TALOS_KUBERNETES or (
        refusal.rule is Rule.UNKNOWN_VERSION and compat.unknown_kubernetes(version) is not None
    ):
        return _talos_blocks(version, talos=talos, refusal=refusal)
    return None


def _unreadable_cilium(
    version: Version, *, cluster: ClusterVersions, refusal: Refusal
) -> BlockedRelease | None:
    """A Cilium seen whose release cannot be read; None otherwise."""
    if not isinstance(cluster.cilium, Unreadable) or refusal.rule is not Rule.UNREADABLE_VERSION:
        return None
    return _line(
        Component.KUBERNETES,
        version,
        Blocker.UNREADABLE,
        reason=cluster.cilium.what,
        step=cluster.cilium.step,
        refusal=refusal,
    )


def _cilium_pair(
    version: Version, *, cluster: ClusterVersions, refusal: Refusal
) -> BlockedRelease | None:
    """The Cilium that runs refuses it, or is unknown to this build; None otherwise."""
    if refusal.rule not in (Rule.CILIUM_KUBERNETES, Rule.UNKNOWN_VERSION):
        return None
    if cluster.cilium is None:
        return None
    return _cilium_blocks(version, cluster=cluster, refusal=refusal)


def _talos_blocks(version: Version, *, talos: Version, refusal: Refusal) -> BlockedRelease:
    kube = Component.KUBERNETES
    runs = kubernetes_minors_of(talos)
    if not runs:
        return _unexplained(kube, version, refusal)
    above = version.minor_key > runs[-1]
    reason = (
        f"Talos {talos.tag} supports Kubernetes up to {_text(runs[-1])}"
        if above
        else f"Talos {talos.tag} supports Kubernetes {_text(runs[0])} to {_text(runs[-1])}"
    )
    newer = nearest_talos_running(version, above=talos.minor_key)
    if newer is not None:
        step = f"upgrade Talos to {_text(newer)} first"
    elif above:
        step = "upgrade Talos first (no Talos known to this build supports it)"
    else:
        step = (
            "no newer Talos runs it (the cluster runs an incompatible pair); "
            "the override verb passes it (--override)"
        )
    return _line(
        kube,
        version,
        Blocker.TALOS,
        reason=reason,
        step=step,
        refusal=refusal,
        newer_ichor=newer is None and above,
    )


def _cilium_blocks(
    version: Version, *, cluster: ClusterVersions, refusal: Refusal
) -> BlockedRelease:
    kube = Component.KUBERNETES
    cilium = cluster.cilium
    assert isinstance(cilium, str)  # None and Unreadable are never a Cilium pair's
    chart = PINNED.cilium_chart
    try:
        entry = compat.CILIUM_KUBERNETES.get(parse(cilium).minor_key)
    except VersionError:
        entry = None
    if refusal.rule is Rule.CILIUM_KUBERNETES and entry is not None:
        reason = f"Cilium {cilium} runs Kubernetes {entry}"
    else:
        reason = f"Cilium {cilium} is unknown to this build"
    if compat.cilium_kubernetes_error(cilium=chart, kubernetes=version) is not None:
        ships = (
            "" if cilium == chart else f" (this Ichor ships Cilium {chart}, which does not run it)"
        )
        return _line(
            kube,
            version,
            Blocker.CILIUM,
            reason=reason,
            step=NEWER_ICHOR + ships,
            refusal=refusal,
            newer_ichor=True,
        )
    if check_target(component=Component.CNI, target=chart, cluster=cluster) is None:
        step = f"upgrade Cilium to {chart} first (ichor cni upgrade), the chart this Ichor embeds"
        return _line(kube, version, Blocker.CILIUM, reason=reason, step=step, refusal=refusal)
    # The chart runs the target but not what runs now: no Cilium step gets there.
    step = (
        f"Cilium {chart}, the chart this Ichor embeds, runs it but not Kubernetes "
        f"{parse(cluster.kubernetes).tag}, which the cluster runs, so no Cilium step reaches it"
    )
    if refusal.overridable:
        step += "; the override verb passes it (--override)"
    return _line(
        kube,
        version,
        Blocker.CILIUM,
        reason=reason,
        step=step,
        refusal=refusal,
        newer_ichor=not refusal.overridable,
    )


def blocked_releases(
    *,
    component: Component,
    cluster: ClusterVersions,
    releases: Iterable[str],
    recommended: str | None = None,
) -> list[BlockedRelease]:
    """The "Not offered" lines of one component: one per minor, newest first.

    ``releases`` are the recorded tags (``status.upgradeTargets.talos`` or
    ``.kubernetes``); ``recommended`` defaults to the release set's version, as for the
    choices, so the two agree on what is offered.
    """
    if component is Component.CNI:
        return []
    tags = tuple(releases)
    running = _running(component, cluster)
    if running is None:
        return []
    offered = _offered(component, cluster=cluster, tags=tags, recommended=recommended)
    by_minor = _newer_by_minor(tags, running=running)
    lines = (
        _minor_line(component, by_minor[minor], cluster=cluster, offered=offered, running=running)
        for minor in sorted(by_minor, reverse=True)
    )
    return [line for line in lines if line is not None]


def _running(component: Component, cluster: ClusterVersions) -> Version | None:
    """What the cluster runs of ``component``; None when either version of its spec does
    not parse (the target rule reports that spec as a ``FORM`` refusal elsewhere)."""
    talos = component is Component.TALOS
    try:
        running = parse(cluster.talos if talos else cluster.kubernetes)
        parse(cluster.kubernetes if talos else cluster.talos)
    except VersionError:
        return None
    return running


def _offered(
    component: Component,
    *,
    cluster: ClusterVersions,
    tags: tuple[str, ...],
    recommended: str | None,
) -> set[Version]:
    """What the choices offer, so a line is never written for it."""
    if component is Component.TALOS:
        choices = upgrade_choices.talos_choices(
            cluster=cluster, releases=tags, recommended=recommended or PINNED.talos
        )
    else:
        choices = upgrade_choices.kubernetes_choices(
            cluster=cluster, releases=tags, recommended=recommended or PINNED.kubernetes
        )
    return set(choices.offered)


def _newer_by_minor(tags: Iterable[str], *, running: Version) -> dict[Minor, list[Version]]:
    """The recorded finals newer than what runs, by minor, in the order ``finals`` gives
    (newest first)."""
    by_minor: dict[Minor, list[Version]] = {}
    for version in upgrade_choices.finals(tags):
        if version > running:
            by_minor.setdefault(version.minor_key, []).append(version)
    return by_minor


def _minor_line(
    component: Component,
    versions: list[Version],
    *,
    cluster: ClusterVersions,
    offered: set[Version],
    running: Version,
) -> BlockedRelease | None:
    """The line of one minor: why its newest release is not offered, counting the
    releases of it not offered (None: its newest is offered, or nothing blocks it)."""
    newest = versions[0]
    if newest in offered:
        return None
    line = explain(component=component, version=newest, cluster=cluster)
    if line is None:
        return None
    hidden = sum(1 for version in versions if version not in offered)
    some = [version for version in versions if version in offered]
    return _tested_path_offered(replace(line, not_offered=hidden), some, running=running)


def _tested_path_offered(
    line: BlockedRelease, some: list[Version], *, running: Version
) -> BlockedRelease:
    """A Talos minor up the tested path of which the choices offer the release set's
    release only: the line says so (any other line stays as it is)."""
    if line.blocker is not Blocker.TESTED_PATH or not some:
        return line
    minor = line.version.minor_key
    up = minor[1] - running.minor
    return replace(
        line,
        reason=f"{_WORDS.get(up, str(up))} minors up, and of Talos {_text(minor)} the "
        f"choices offer only the release set's {some[0].tag} (the path the Talos docs "
        f"test goes through each minor)",
    )


def summarize(lines: Iterable[BlockedRelease]) -> BlockedSummary:
    """The short status summary of one or both components' lines."""
    every = list(lines)
    nearest: list[BlockedRelease] = []
    for component in (Component.TALOS, Component.KUBERNETES):
        own = [line for line in every if line.component is component]
        if own:
            nearest.append(min(own, key=lambda line: line.version))
    return BlockedSummary(
        count=len(every),
        releases=sum(line.not_offered for line in every),
        nearest=tuple(nearest),
    )
