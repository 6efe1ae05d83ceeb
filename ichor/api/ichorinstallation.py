"""Spec and status of the IchorInstallation singleton (crds/ichorinstallations.ichor.dev.yaml).

The spec configures the release check; ``status.upgradeTargets`` is what it found. A list
that was never recorded is ``None``, not empty: "no list yet" and "no release" lead to
different answers in the upgrade choices.
"""

from __future__ import annotations

from datetime import datetime

from ichor.api._base import ApiModel
from ichor.api.conditions import Condition

DEFAULT_TALOS_REPOSITORY = "ghcr.io/siderolabs/installer-base"
DEFAULT_KUBERNETES_REPOSITORY = "ghcr.io/siderolabs/kubelet"
DEFAULT_INTERVAL = "6h"
#: The Ichor chart's OCI repository (on ghcr.io, so the check's egress stays one host).
DEFAULT_CHART_REPOSITORY = "ghcr.io/ichor-dev/charts/ichor"


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
    conditions: tuple[Condition, ...] = ()
