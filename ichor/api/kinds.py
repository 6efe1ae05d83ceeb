"""Names of the API group, its version and its three kinds.

One place for the strings every caller of the API needs (kopf handlers, the webhook's
registration, the CLI's client calls), so a plural is never spelled twice.
"""

from __future__ import annotations

from enum import StrEnum

GROUP = "ichor.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

#: The name the single IchorInstallation must have (the CRD refuses any other).
INSTALLATION_NAME = "ichor"
#: The category of all three kinds: ``kubectl get ichor``.
CATEGORY = "ichor"


class Kind(StrEnum):
    TALOS_CLUSTER = "TalosCluster"
    ICHOR_INSTALLATION = "IchorInstallation"
    TALOS_OPERATION = "TalosOperation"


class Plural(StrEnum):
    TALOS_CLUSTERS = "talosclusters"
    ICHOR_INSTALLATIONS = "ichorinstallations"
    TALOS_OPERATIONS = "talosoperations"


PLURALS: dict[Kind, Plural] = {
    Kind.TALOS_CLUSTER: Plural.TALOS_CLUSTERS,
    Kind.ICHOR_INSTALLATION: Plural.ICHOR_INSTALLATIONS,
    Kind.TALOS_OPERATION: Plural.TALOS_OPERATIONS,
}

#: Whether each kind lives in a namespace (IchorInstallation is cluster-scoped).
NAMESPACED: dict[Kind, bool] = {
    Kind.TALOS_CLUSTER: True,
    Kind.ICHOR_INSTALLATION: False,
    Kind.TALOS_OPERATION: True,
}


def crd_name(kind: Kind) -> str:
    """``talosclusters.ichor.dev`` for TalosCluster: the CRD object's name."""
    return f"{PLURALS[kind]}.{GROUP}"


#: The cause (``status.details.causes[].reason``, field ``spec.override``) of a plan's
#: denial that ``override: true`` would pass for a holder of the override verb: the CLI
#: reads it to suggest ``--override``.
OVERRIDE_WOULD_PASS = "OverrideWouldPass"
#: The words that denial's sentence says it in. The Headlamp plugin, whose request layer
#: keeps only the message, reads them (ui/headlamp/src/mapping/plan.ts; a test keeps the
#: two equal).
OVERRIDE_WOULD_PASS_WORDS = "`override: true` on the TalosOperation would pass"
