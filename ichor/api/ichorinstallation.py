"""Spec and status of the IchorInstallation singleton (crds/ichorinstallations.ichor.dev.yaml).

The spec configures the release check; ``status.upgradeTargets`` is what it found. A list
that was never recorded is ``None``, not empty: "no list yet" and "no release" lead to
different answers in the upgrade choices. ``spec.policy`` is the site's own refusals
(``ichor.release.policy``), read from the raw spec so a policy that does not load is a
policy that cannot be read (it refuses every step), never no policy at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ichor.api._base import ApiModel
from ichor.api.autopatch import FleetAutoPatchSpec, FleetAutoPatchStatus
from ichor.api.conditions import Condition
from ichor.api.owed import OwedEvent
from ichor.api.reading import read_model, read_whole, whole_number
from ichor.api.taloscluster import UpgradePolicy
from ichor.release import policy as site_policy
from ichor.release.policy import NO_POLICY, SitePolicy
from ichor.upgrade import choices
from ichor.upgrade.rule import Component

DEFAULT_TALOS_REPOSITORY = "ghcr.io/siderolabs/installer-base"
DEFAULT_KUBERNETES_REPOSITORY = "ghcr.io/siderolabs/kubelet"
DEFAULT_INTERVAL = "6h"
#: The Ichor chart's OCI repository (on ghcr.io, so the check's egress stays one host).
DEFAULT_CHART_REPOSITORY = "ghcr.io/ichor-dev/charts/ichor"
NO_INSTALLATION = "there is no IchorInstallation named ichor, so no release check runs"


class PullSecretRef(ApiModel):
    """A ``kubernetes.io/dockerconfigjson`` Secret (the installation has no namespace)."""

    namespace: str
    name: str


class ReleaseCheckSpec(ApiModel):
    enabled: bool = True
    interval: str = DEFAULT_INTERVAL
    talos_repository: str = DEFAULT_TALOS_REPOSITORY
    kubernetes_repository: str = DEFAULT_KUBERNETES_REPOSITORY
    #: No CRD default: unset means ``DEFAULT_CHART_REPOSITORY``.
    chart_repository: str = DEFAULT_CHART_REPOSITORY
    #: Credentials for a private mirror; none: every listing is anonymous.
    pull_secret_ref: PullSecretRef | None = None


class IchorInstallationSpec(ApiModel):
    release_check: ReleaseCheckSpec = ReleaseCheckSpec()
    #: The fleet's auto-patch settings: each cluster's default, and the fleet's limit.
    auto_patch: FleetAutoPatchSpec | None = None
    #: The ServiceAccount (a name, in each TalosCluster's own namespace) that reads a
    #: cluster without a kubeconfig Secret when its spec names none (ichor.kube.accounts).
    default_service_account_name: str | None = None
    #: Each TalosCluster's upgrade policy, field by field under its own.
    upgrade_policy: UpgradePolicy | None = None
    #: The site's own refusals, kept as written: ``ichor.release.policy`` reads it (a
    #: policy that does not load must refuse every step, never make the spec unreadable
    #: or vanish).
    policy: Any = None


class UpgradeTargets(ApiModel):
    checked_at: datetime | None = None
    talos: tuple[str, ...] | None = None
    kubernetes: tuple[str, ...] | None = None
    talos_error: str | None = None
    kubernetes_error: str | None = None
    #: The errors of every list joined; an earlier Ichor wrote only this one.
    error: str | None = None
    #: Deprecated, unused: Cilium patches an earlier Ichor listed (cleared by the check).
    cilium: tuple[str, ...] | None = None
    #: Deprecated, unused.
    cilium_error: str | None = None
    #: The last check that listed each list whole (alerts read how long ago that was).
    talos_listed_at: datetime | None = None
    kubernetes_listed_at: datetime | None = None
    #: The first check of each list's current run of failures; gone once it lists again.
    talos_failing_since: datetime | None = None
    kubernetes_failing_since: datetime | None = None


class LatestRelease(ApiModel):
    """The newest final Ichor release the chart listing found (a failure keeps it)."""

    checked_at: datetime | None = None
    version: str | None = None
    #: The Ichor that ran the check, so ``newer`` can be judged by a reader.
    running: str | None = None
    newer: bool | None = None
    error: str | None = None
    #: The last check that listed the chart repository whole.
    listed_at: datetime | None = None
    #: The first check of the chart listing's current run of failures.
    failing_since: datetime | None = None


class PolicyEntryStatus(ApiModel):
    """One entry of ``spec.policy`` and how many clusters it refuses something of."""

    name: str
    #: ``Deny`` or ``HighestMinor``.
    kind: str
    component: str
    #: Clusters it refuses a step of (to a recorded newer release, or the embedded
    #: Cilium chart), or that run what it refuses.
    clusters: int = 0


class SitePolicyStatus(ApiModel):
    """What the operator found of ``spec.policy``, written by the TalosCluster controller
    once every cluster was judged with the policy of ``observedGeneration``."""

    observed_generation: int | None = None
    #: Clusters judged.
    clusters: int = 0
    entries: tuple[PolicyEntryStatus, ...] = ()
    #: Why the policy cannot be read (it then refuses every step; the webhook refuses a
    #: write of such a policy, so only one stored without it gets here).
    unreadable: str | None = None


class IchorInstallationStatus(ApiModel):
    observed_generation: int | None = None
    upgrade_targets: UpgradeTargets | None = None
    latest_release: LatestRelease | None = None
    #: Written by auto-patch: the fleet's halts and when each release was first seen.
    auto_patch: FleetAutoPatchStatus | None = None
    conditions: tuple[Condition, ...] = ()
    #: Events decided with this status and not posted yet (``ichor.api.owed``).
    pending_events: dict[str, OwedEvent] | None = None
    #: Written by the TalosCluster controller: which policy entries matched how many clusters.
    site_policy: SitePolicyStatus | None = None


def read_status(raw: object) -> IchorInstallationStatus:
    """The IchorInstallation's ``status`` (``raw``), read leniently part by part: a part
    that does not load is absent, a bad field of a part costs that field only
    (``read_model``), and a condition that does not load is left out. The one reader of
    this status for the controllers and the CLI."""
    status = raw if isinstance(raw, Mapping) else {}
    listed = status.get("conditions")
    return IchorInstallationStatus(
        observed_generation=whole_number(status.get("observedGeneration")),
        upgrade_targets=read_model(UpgradeTargets, status.get("upgradeTargets")),
        latest_release=read_model(LatestRelease, status.get("latestRelease")),
        auto_patch=read_model(FleetAutoPatchStatus, status.get("autoPatch")),
        site_policy=read_model(SitePolicyStatus, status.get("sitePolicy")),
        conditions=tuple(
            condition
            for item in (listed if isinstance(listed, list) else ())
            for condition in [read_model(Condition, item)]
            if condition is not None
        ),
    )


@dataclass(frozen=True)
class RecordedList:
    """One recorded list (Talos or Kubernetes), ``None`` if never recorded, and whether it
    can be used."""

    releases: tuple[str, ...] | None
    availability: choices.Availability


@dataclass(frozen=True)
class Installation:
    """What the controller and the CLI read of the IchorInstallation singleton, the same way:
    a spec or status that does not load counts as the defaults (no list yet)."""

    present: bool = False
    check_enabled: bool = True
    targets: UpgradeTargets | None = None
    #: The site's policy (``spec.policy``), handed to the rules with every cluster.
    policy: SitePolicy = NO_POLICY

    @classmethod
    def from_body(cls, body: Mapping[str, Any] | None) -> Installation:
        if body is None:
            return cls()
        raw_spec = body.get("spec")
        spec = read_whole(IchorInstallationSpec, raw_spec or {}) or IchorInstallationSpec()
        return cls(
            present=True,
            check_enabled=spec.release_check.enabled,
            targets=read_status(body.get("status")).upgrade_targets,
            policy=site_policy.read(
                raw_spec.get("policy") if isinstance(raw_spec, Mapping) else None
            ),
        )

    def recorded(self, component: Component) -> RecordedList:
        """The recorded releases of ``component`` and whether they can be used.

        A failure of this list only (``talosError`` or ``kubernetesError``) marks it
        stale; a status an earlier Ichor wrote with only ``error`` counts against both.
        """
        if not self.present:
            return RecordedList(
                releases=None,
                availability=choices.Availability(
                    available=False,
                    reason=NO_INSTALLATION,
                    cause=choices.Unavailable.NOT_RECORDED,
                ),
            )
        recorded = self.targets or UpgradeTargets()
        talos = component is Component.TALOS
        releases = recorded.talos if talos else recorded.kubernetes
        own = recorded.talos_error if talos else recorded.kubernetes_error
        error = own if (recorded.talos_error or recorded.kubernetes_error) else recorded.error
        return RecordedList(
            releases=releases,
            availability=choices.availability(
                check_enabled=self.check_enabled, recorded=releases is not None, error=error
            ),
        )
