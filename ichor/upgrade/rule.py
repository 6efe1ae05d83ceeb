"""The one target rule: may this cluster move this component to this version now?

The plan (the dry run of a TalosOperation), the executors before they start a Job, and
the choices all call ``check_target``, so a version the choices offer is one the plan
accepts, and the executor cannot run what the plan refused. The order is the order a
person fixes things in: form, final, newer, path or skew, then compatibility.

Only the compatibility refusals (the pairs) and the site's own (its policy, read from
the IchorInstallation and handed in with the cluster) are overridable; an unknown
version never is. The rule refuses to raise: a version that does not parse, in the
target or in the cluster's spec, is a ``FORM`` refusal.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from ichor.release import compat, steps
from ichor.release.observed import Unreadable
from ichor.release.policy import NO_POLICY, PolicyComponent, SitePolicy
from ichor.release.refusals import Refusal, Rule, Verdict, judge, refuse
from ichor.release.release_set import PINNED
from ichor.release.versions import Version, VersionError, check_final, parse
from ichor.upgrade import paths

__all__ = [
    "ClusterVersions",
    "Component",
    "check_target",
    "check_target_version",
    "judge_target",
    "judge_target_version",
]


class Component(StrEnum):
    TALOS = "talos"
    KUBERNETES = "kubernetes"
    CNI = "cni"


@dataclass(frozen=True, slots=True)
class ClusterVersions:
    """What a cluster runs, as its spec and status say.

    ``talos``/``kubernetes`` are the spec values; ``cni`` is the detected CNI kind (None
    while none is observed); ``cilium`` is ``steps.cilium_release(...)``: a release only
    when the Cilium half applies, ``Unreadable`` when that Cilium is seen but its release
    cannot be read (every rule that would judge it refuses); ``preset`` is
    ``spec.cni.preset`` (``cilium``: Ichor installs and upgrades the chart it embeds;
    ``unmanaged``: the CNI is the user's). ``policy`` is the site's policy (the
    IchorInstallation's ``spec.policy``) the rules read with the table for this cluster.
    """

    talos: str
    kubernetes: str
    cilium: steps.CiliumRelease = None
    cni: str | None = None
    preset: str = steps.CILIUM
    policy: SitePolicy = NO_POLICY

    @property
    def cilium_constrains(self) -> bool:
        """The Cilium table bounds Kubernetes only for a Cilium Ichor runs."""
        return steps.cilium_constrains(preset=self.preset, detected=self.cni)


def check_target(*, component: Component, target: str, cluster: ClusterVersions) -> Refusal | None:
    """The full target rule for one component; None when the target may run.

    The refusal that matters (``judge_target``): one no override passes, if any.
    """
    return judge_target(component=component, target=target, cluster=cluster).refusal


def judge_target(*, component: Component, target: str, cluster: ClusterVersions) -> Verdict:
    """Every rule of the target rule, composed: a rule no override passes always wins."""
    if component is Component.CNI:
        return _check_cni(target=target, cluster=cluster)
    field = "talos target" if component is Component.TALOS else "kubernetes target"
    try:
        target_v = check_final(target, field=field)
    except VersionError as error:
        rule = Rule.FORM
        try:
            if not parse(target).is_final or target.count(".") < 2:
                rule = Rule.FINAL
        except VersionError:
            pass
        return judge((refuse(rule, f"{error}."),))
    return judge_target_version(component=component, target=target_v, cluster=cluster)


def check_target_version(
    *, component: Component, target: Version, cluster: ClusterVersions
) -> Refusal | None:
    """``check_target`` for a target already known to be final (the choices' path)."""
    return judge_target_version(component=component, target=target, cluster=cluster).refusal


def judge_target_version(
    *, component: Component, target: Version, cluster: ClusterVersions
) -> Verdict:
    """``judge_target`` for a target already known to be final.

    In the order a person fixes things: newer, path or skew, the pairs, then the site's
    policy, which comes on top of the table (so every refusal without it is one with
    it); reading goes on past an overridable refusal, so an unknown version behind it is
    always met.
    """
    try:
        return judge(_target_rules(component=component, target=target, cluster=cluster))
    except VersionError as error:
        return judge((refuse(Rule.FORM, f"The cluster's spec is refused: {error}."),))


def _target_rules(
    *, component: Component, target: Version, cluster: ClusterVersions
) -> Iterator[Refusal | Verdict | None]:
    cilium = cluster.cilium if cluster.cilium_constrains else None
    if component is Component.TALOS:
        running = parse(cluster.talos)
        yield _newer("Talos", target=target, running=running)
        yield paths.talos_path(running=running, target=target)
        yield compat.talos_kubernetes_error(talos=target, kubernetes=cluster.kubernetes)
        yield cluster.policy.step(
            moved=PolicyComponent.TALOS, talos=target, kubernetes=cluster.kubernetes, cilium=cilium
        )
        return
    running = parse(cluster.kubernetes)
    yield _newer("Kubernetes", target=target, running=running)
    yield paths.kubernetes_skew(running=running, target=target)
    yield steps.kubernetes_step(talos=cluster.talos, kubernetes=target, cilium=cilium)
    yield cluster.policy.step(
        moved=PolicyComponent.KUBERNETES, talos=cluster.talos, kubernetes=target, cilium=cilium
    )


def _newer(name: str, *, target: Version, running: Version) -> Refusal | None:
    if target > running:
        return None
    return refuse(
        Rule.NOT_NEWER,
        f"{name} {target.tag} is refused: the cluster runs {running.tag} and an upgrade "
        f"moves only to a newer version, so choose one newer than {running.tag}.",
    )


def cni_version_refusal(*, operation: str, named: str | None) -> Refusal:
    """The refusal of a cni operation that names a version or an image patch (Cilium
    moves only to the embedded chart): the webhook refuses the plan and the executor the run
    in these same words. ``operation`` is ``TalosOperation <namespace>/<name>``."""
    return refuse(
        Rule.CNI_VERSION,
        f"{operation} is refused: a cni operation names no version ({named!r} given), because "
        f"Cilium moves only to the chart this Ichor embeds ({PINNED.cilium_chart}); "
        f"delete it and run `ichor cni upgrade` again.",
    )


def _check_cni(*, target: str, cluster: ClusterVersions) -> Verdict:
    try:
        return judge(_cni_rules(target=target, cluster=cluster))
    except VersionError as error:
        return judge((refuse(Rule.FORM, f"The cluster's spec is refused: {error}."),))


def _cni_rules(*, target: str, cluster: ClusterVersions) -> Iterator[Refusal | Verdict | None]:
    chart = PINNED.cilium_chart
    if target and target.strip().lstrip("v") != chart:
        yield refuse(
            Rule.CNI_VERSION,
            f"Cilium {target} is refused: Cilium moves only to {chart}, the chart this Ichor "
            f"embeds, so remove the version and run ichor cni upgrade.",
        )
    if not steps.is_cilium(cluster.preset):
        yield refuse(
            Rule.NOT_CILIUM,
            f"Cilium {chart} is refused: spec.cni.preset is {cluster.preset}, so the CNI is "
            f"the user's and Ichor installs and upgrades no Cilium on this cluster; "
            f"`ichor cni upgrade` applies to a cluster with spec.cni.preset cilium.",
        )
    if cluster.cni is not None and not steps.is_cilium(cluster.cni):
        yield refuse(
            Rule.NOT_CILIUM,
            f"Cilium {chart} is refused: the cluster runs {cluster.cni.strip()}, not Cilium, "
            f"and `ichor cni upgrade` upgrades only the Cilium Ichor installed; set "
            f"spec.cni.preset to unmanaged for a cluster that keeps its own CNI.",
        )
    running = cluster.cilium if cluster.cilium_constrains else None
    if isinstance(running, Unreadable):
        # Seen, release unknown: the chart could be a step back, and a Cilium nobody
        # deployed with Helm is not the release the chart upgrade moves.
        yield running.refusal(f"Cilium {chart}")
    elif running is not None:
        try:
            behind = steps.cilium_behind_chart(running, chart=chart)
        except VersionError:
            behind = True  # a recorded release that does not parse: the chart repairs it
        if not behind:
            yield refuse(
                Rule.NOT_NEWER,
                f"Cilium {chart} is refused: the cluster runs Cilium {running}, "
                f"which is not older than the chart this Ichor embeds, so there is "
                f"nothing to upgrade.",
            )
    kubernetes = parse(cluster.kubernetes)
    site = cluster.policy.step(
        moved=PolicyComponent.CILIUM,
        talos=cluster.talos,
        kubernetes=cluster.kubernetes,
        cilium=chart,
    )
    refusal = compat.cilium_kubernetes_error(cilium=chart, kubernetes=kubernetes)
    if refusal is None or refusal.rule is Rule.UNKNOWN_VERSION:
        yield refusal
        yield site
        return
    entry = compat.CILIUM_KUBERNETES[parse(chart).minor_key]
    step = (
        f"upgrade Kubernetes to {compat.minor_text(entry.low)} first"
        if kubernetes.minor_key < entry.low
        else "a newer Ichor release is needed"
    )
    yield refuse(
        Rule.CILIUM_KUBERNETES,
        f"Cilium {chart} is refused: it runs Kubernetes {entry} (Cilium CI matrix) and the "
        f"cluster runs Kubernetes {kubernetes.tag}, so {step}.",
    )
    yield site
