"""Whose account reads the cluster the operator runs in for a TalosCluster (pure).

A TalosCluster without a kubeconfig Secret is read in the operator's own cluster as a
ServiceAccount of the TalosCluster's namespace, never as the operator: the one its spec
names (``spec.serviceAccountName``), else the fleet's default (the IchorInstallation's
``spec.defaultServiceAccountName``), else the namespace's ``default`` account, unless the
operator requires a named one (``ICHOR_REQUIRE_SERVICE_ACCOUNT``): then nothing is read.
The account is always in the TalosCluster's own namespace: no field names another.

This module chooses the account and words why it could not read; ``impersonation``
makes the requests. docs/security.md ("Reads run as the tenant's account") says why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

#: The account of a namespace every Pod without one runs as (Flux's lockdown default).
NAMESPACE_DEFAULT = "default"
#: The ClusterRole the chart ships for what a self-managed cluster's account reads.
READER_ROLE = "ichor-tenant-reader"
#: A ServiceAccount's name: a DNS-1123 subdomain (the CRDs hold the same pattern).
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_NAME = 253
#: The setting that makes a named account mandatory (``ichor.settings.TenantSettings``).
REQUIRE_SETTING = "ICHOR_REQUIRE_SERVICE_ACCOUNT"


class Origin(StrEnum):
    """Where the account's name came from: the field a person changes."""

    SPEC = "named in spec.serviceAccountName"
    FLEET = "named in the IchorInstallation's spec.defaultServiceAccountName"
    NAMESPACE = "the namespace's default, as neither the spec nor the IchorInstallation names one"


@dataclass(frozen=True)
class ServiceAccount:
    namespace: str
    name: str
    origin: Origin

    @property
    def username(self) -> str:
        """The user the API server reads the account's requests as."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    def __str__(self) -> str:
        return f"ServiceAccount {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Unnamed:
    """No account may be used, so nothing is read; ``message`` says which field to set."""

    message: str


def fleet_default(installation: Mapping[str, Any] | None) -> str | None:
    """The IchorInstallation's ``spec.defaultServiceAccountName`` (None: unset, or no
    IchorInstallation)."""
    found = ((installation or {}).get("spec") or {}).get("defaultServiceAccountName")
    return found if isinstance(found, str) else None


def valid_name(name: str) -> bool:
    return len(name) <= MAX_NAME and NAME.match(name) is not None


def choose(
    *, namespace: str, spec: str | None, fleet: str | None, required: bool
) -> ServiceAccount | Unnamed:
    """The account that reads for a TalosCluster of ``namespace``: ``spec`` (its
    ``spec.serviceAccountName``) wins over ``fleet`` (the IchorInstallation's default);
    without either, the namespace's ``default`` unless ``required``. A name that is no
    ServiceAccount's (stored before the schema held one, or written by hand) is never
    used, nor skipped for the next one: the field must be fixed."""
    for given, origin in ((spec, Origin.SPEC), (fleet, Origin.FLEET)):
        if not given:
            continue
        if not valid_name(given):
            return Unnamed(
                f"{given[:80]!r}, {origin.value}, is not a ServiceAccount's name (a DNS-1123 "
                "subdomain), so this cluster is not read; fix that field"
            )
        return ServiceAccount(namespace=namespace, name=given, origin=origin)
    if required:
        return Unnamed(
            "no ServiceAccount is named to read this cluster with, and the operator reads a "
            f"tenant's cluster only as one ({REQUIRE_SETTING} is set), so it is not read; set "
            "spec.serviceAccountName, or the IchorInstallation's spec.defaultServiceAccountName"
        )
    return ServiceAccount(namespace=namespace, name=NAMESPACE_DEFAULT, origin=Origin.NAMESPACE)


@dataclass(frozen=True)
class Read:
    """One kind of read the operator makes for a TalosCluster, as RBAC words it."""

    verb: str
    resource: str
    group: str = ""
    #: None: the whole cluster (a cluster-scoped kind, or every namespace).
    namespace: str | None = None

    @property
    def by_reader_role(self) -> bool:
        """Whether the chart's ``ichor-tenant-reader`` ClusterRole grants it."""
        return self in READER_GRANTS

    def __str__(self) -> str:
        kind = f"{self.resource}.{self.group}" if self.group else self.resource
        where = f"in namespace {self.namespace}" if self.namespace else "in the whole cluster"
        return f"{self.verb} {kind} {where}"


#: The Node list (Talos and kubelet versions).
NODES = Read("list", "nodes")
#: The DaemonSets of every namespace (the CNI).
DAEMONSETS = Read("list", "daemonsets", "apps")
#: What ``ichor-tenant-reader`` grants (charts/ichor/templates/rbac.yaml, and a test).
READER_GRANTS = frozenset({NODES, DAEMONSETS})


def refused(account: ServiceAccount, read: Read, *, exists: bool | None) -> str:
    """Why ``account`` read nothing: it does not exist (``exists`` False), or it may not
    make ``read``, and the step that lets it. The operator's own words only: nothing of
    the API server's answer."""
    who = f"{account} ({account.origin.value})"
    other = "or name another ServiceAccount in spec.serviceAccountName"
    if exists is False:
        return f"{who} does not exist, so this cluster is not read: create it, {other}"
    grant = (
        f"bind the ClusterRole {READER_ROLE} to it" if read.by_reader_role else f"grant it {read}"
    )
    return f"{who} may not {read}, so this cluster is not read: {grant}, {other}"


def not_impersonated(account: ServiceAccount) -> str:
    """The operator itself was refused acting as ``account``."""
    return (
        f"the operator may not act as {account} (its ClusterRole lacks impersonate on "
        "serviceaccounts), so this cluster is not read: install the chart's RBAC again"
    )
