"""The one answer every rule gives when it says no: a typed refusal.

The webhook, the plan, the executors, the CLI and adopt each turn a refusal into their
own answer (a denial, an admission warning under override, an exit code), so a rule
returns data rather than raising: which rule refused, one sentence for a person, and
whether the override verb may pass it. Whether a refusal is overridable is decided here,
by its rule, and nowhere else: a caller cannot make an unknown version overridable.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["NEVER_OVERRIDABLE", "Refusal", "Refused", "Rule", "refuse"]


class Rule(StrEnum):
    """Which rule refused. Values are CamelCase so they serve as condition reasons."""

    FORM = "Form"  # not a version in the form the field expects
    FINAL = "Final"  # an upgrade target with a pre-release, build or the vX.Y shorthand
    NOT_NEWER = "NotNewer"  # an upgrade target that is not newer than what runs
    DOWNGRADE = "Downgrade"  # a spec version moved back
    TALOS_PATH = "TalosPath"  # machinery's UpgradeableFrom bounds
    KUBERNETES_SKEW = "KubernetesSkew"  # more than one minor up, another major, or back
    TALOS_KUBERNETES = "TalosKubernetes"  # the Talos/Kubernetes pair (machinery + table)
    CILIUM_KUBERNETES = "CiliumKubernetes"  # the Cilium/Kubernetes pair (table)
    UNKNOWN_VERSION = "UnknownVersion"  # neither machinery nor the table knows it
    PINNED = "Pinned"  # a first install with versions other than the release set
    ADOPT_FLOOR = "AdoptFloor"  # adopt of a Talos below v1.12
    CNI_VERSION = "CniVersion"  # a Cilium version other than the embedded chart


# Only compatibility refusals (the pairs) may be passed with the override verb. The path
# and skew rules are enforced again by Talos and talosctl themselves, so passing them
# here would only start a Job that fails; the others are not questions of compatibility.
NEVER_OVERRIDABLE: frozenset[Rule] = frozenset(Rule) - {
    Rule.TALOS_KUBERNETES,
    Rule.CILIUM_KUBERNETES,
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A rule said no: ``message`` says what, which rule with its range, and the step."""

    rule: Rule
    message: str
    overridable: bool

    def __post_init__(self) -> None:
        if self.overridable and self.rule in NEVER_OVERRIDABLE:
            raise ValueError(f"a {self.rule} refusal is never overridable")

    def __str__(self) -> str:
        return self.message


def refuse(rule: Rule, message: str) -> Refusal:
    """A refusal whose overridability follows from its rule."""
    return Refusal(rule=rule, message=message, overridable=rule not in NEVER_OVERRIDABLE)


class Refused(Exception):
    """For callers that prefer raising: carries the refusal unchanged."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
