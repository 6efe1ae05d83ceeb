"""Spec and status of the IchorInstallation singleton (crds/ichorinstallations.ichor.dev.yaml).

The spec configures the release check; ``status.upgradeTargets`` is what it found. A list
that was never recorded is ``None``, not empty: "no list yet" and "no release" lead to
different answers in the upgrade choices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from ichor.api._base import ApiModel
from ichor.api.autopatch import FleetAutoPatchSpec, FleetAutoPatchStatus
from ichor.api.conditions import Condition
from ichor.api.taloscluster import UpgradePolicy
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


class LatestRelease(ApiModel):
    """The newest final Ichor release the chart listing found (a failure keeps it)."""

    checked_at: datetime | None = None
    version: str | None = None
    #: The Ichor that ran the check, so ``newer`` can be judged by a reader.
    running: str | None = None
    newer: bool | None = None
    error: str | None = None


class IchorInstallationStatus(ApiModel):
    observed_generation: int | None = None
    upgrade_targets: UpgradeTargets | None = None
    latest_release: LatestRelease | None = None
    #: Written by auto-patch: the fleet's halts and when each release was first seen.
    auto_patch: FleetAutoPatchStatus | None = None
    conditions: tuple[Condition, ...] = ()


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

    @classmethod
    def from_body(cls, body: Mapping[str, Any] | None) -> Installation:
        if body is None:
            return cls()
        try:
            spec = IchorInstallationSpec.model_validate(body.get("spec") or {})
        except ValidationError:
            spec = IchorInstallationSpec()
        try:
            status = IchorInstallationStatus.model_validate(body.get("status") or {})
        except ValidationError:
            status = IchorInstallationStatus()
        return cls(
            present=True,
            check_enabled=spec.release_check.enabled,
            targets=status.upgrade_targets,
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
