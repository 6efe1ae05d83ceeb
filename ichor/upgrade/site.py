"""Which entries of a site's policy act on one cluster.

An entry acts on a cluster when it refuses the cluster a step to a recorded newer
release (Talos, Kubernetes) or to the Cilium chart this Ichor embeds, or when it refuses
what the cluster runs now (which it does not move back: it stays, and the site should
know). The IchorInstallation's status counts, per entry, the clusters it acts on, so a
site sees whether an entry still does anything and can drop the ones that do not.

Pure: the cluster (its policy with it) and the recorded lists in, entry names out. It
asks the policy alone, not the table: an entry that refuses a release the table refuses
too still acts on the cluster (the override verb would meet both).
"""

from __future__ import annotations

from collections.abc import Iterable

from ichor.release.policy import PolicyComponent
from ichor.release.release_set import PINNED
from ichor.release.versions import VersionError, parse
from ichor.upgrade import choices
from ichor.upgrade.rule import ClusterVersions

__all__ = ["acting_entries"]


def acting_entries(
    *,
    cluster: ClusterVersions,
    talos_releases: Iterable[str] = (),
    kubernetes_releases: Iterable[str] = (),
) -> frozenset[str]:
    """The names of the policy entries that act on ``cluster`` (none for a spec no rule
    reads, nor for a policy that cannot be read: that one refuses everything)."""
    site = cluster.policy
    if not site.entries:
        return frozenset()
    try:
        talos, kubernetes = parse(cluster.talos), parse(cluster.kubernetes)
    except VersionError:
        return frozenset()
    cilium = cluster.cilium if cluster.cilium_constrains else None
    names = {e.name for e in site.running(talos=talos, kubernetes=kubernetes, cilium=cilium)}
    verdicts = [
        site.step(moved=PolicyComponent.TALOS, talos=v, kubernetes=kubernetes, cilium=cilium)
        for v in choices.finals(talos_releases)
        if v > talos
    ] + [
        site.step(moved=PolicyComponent.KUBERNETES, talos=talos, kubernetes=v, cilium=cilium)
        for v in choices.finals(kubernetes_releases)
        if v > kubernetes
    ]
    if cluster.cilium_constrains:
        verdicts.append(
            site.step(
                moved=PolicyComponent.CILIUM,
                talos=talos,
                kubernetes=kubernetes,
                cilium=PINNED.cilium_chart,
            )
        )
    for verdict in verdicts:
        names.update(r.entry for r in verdict.refusals if r.entry is not None)
    return frozenset(names)
