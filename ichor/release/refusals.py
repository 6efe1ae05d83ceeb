"""The one answer every rule gives when it says no: a typed refusal.

The webhook, the plan, the executors, the CLI and adopt each turn a refusal into their
own answer (a denial, an admission warning under override, an exit code), so a rule
returns data rather than raising: which rule refused, one sentence for a person, and
whether the override verb may pass it. Whether a refusal is overridable is decided here,
by its rule, and nowhere else: a caller cannot make an unknown version overridable.

How refusals combine is decided here too. A path asks several rules (form, final, newer,
path or skew, the pairs) and ``judge`` reads their answers in that order into one
``Verdict``: it keeps going past a refusal the override verb may pass, so a rule that no
override passes (an unknown version, above all) is always asked before a path concludes
that only overridable refusals remain, and it wins whenever one exists. Every path (the
webhook, the plan, the executors, adopt, init, the choices, the blocked lines and the
path plans) composes its rules with ``judge``, never with ``or``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["NEVER_OVERRIDABLE", "Refusal", "Refused", "Rule", "Verdict", "judge", "refuse"]


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
    CONTRACT = "VersionContract"  # a version contract the running Talos does not take
    CNI_VERSION = "CniVersion"  # a Cilium version other than the embedded chart
    NOT_CILIUM = "NotCilium"  # a cni operation for a CNI Ichor does not run (unmanaged, other)
    CNI_PRESET = "CniPreset"  # spec.cni.preset releases an observed Cilium from its table
    UNREADABLE_VERSION = "UnreadableVersion"  # seen running, its release cannot be read
    #: A version this site's policy refuses (IchorInstallation ``spec.policy``): an entry
    #: denies it, alone or with another component's version, or holds its component at a
    #: lower minor. The message names the entry and the reason a person wrote; only the
    #: override verb passes it, and the Override Event names the entry.
    SITE_POLICY = "SitePolicy"
    #: This site's policy cannot be read, so what it denies is unknown: every step it would
    #: judge is refused, and no override passes it; correct ``spec.policy``.
    SITE_POLICY_UNREADABLE = "SitePolicyUnreadable"


# Only compatibility refusals may be passed with the override verb: the pairs, and the
# release of an observed Cilium from its pair (spec.cni.preset cilium -> unmanaged, which
# hands every later Kubernetes step's Cilium compatibility to the user, so it is the
# Cilium pair passed once for all steps); and a site's own refusal (its policy), which,
# like every other safety guard, the verb passes. The path and skew rules are enforced
# again by Talos and talosctl themselves, so passing them here would only start a Job
# that fails; the others are not questions of compatibility.
NEVER_OVERRIDABLE: frozenset[Rule] = frozenset(Rule) - {
    Rule.TALOS_KUBERNETES,
    Rule.CILIUM_KUBERNETES,
    Rule.CNI_PRESET,
    Rule.SITE_POLICY,
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A rule said no: ``message`` says what, which rule with its range, and the step."""

    rule: Rule
    message: str
    overridable: bool
    #: ``SITE_POLICY``: the name of the policy entry that refused.
    entry: str | None = None

    def __post_init__(self) -> None:
        if self.overridable and self.rule in NEVER_OVERRIDABLE:
            raise ValueError(f"a {self.rule} refusal is never overridable")

    def __str__(self) -> str:
        return self.message


def refuse(rule: Rule, message: str) -> Refusal:
    """A refusal whose overridability follows from its rule."""
    return Refusal(rule=rule, message=message, overridable=rule not in NEVER_OVERRIDABLE)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the rules of one path say, together.

    ``blocking`` is the first refusal no override passes (None when there is none);
    ``overridable`` the refusals the verb may pass, in the order met, each once. A path
    with a blocking refusal is refused whatever the overridable ones are.
    """

    blocking: Refusal | None = None
    overridable: tuple[Refusal, ...] = ()

    def __post_init__(self) -> None:
        if self.blocking is not None and self.blocking.overridable:
            raise ValueError("a blocking refusal is one no override passes")
        if any(not refusal.overridable for refusal in self.overridable):
            raise ValueError("a refusal no override passes cannot be listed as overridable")

    @property
    def clean(self) -> bool:
        """No rule refused."""
        return self.blocking is None and not self.overridable

    @property
    def refusal(self) -> Refusal | None:
        """The one refusal to show: the blocking one, else the first overridable one."""
        if self.blocking is not None:
            return self.blocking
        return self.overridable[0] if self.overridable else None

    @property
    def refusals(self) -> tuple[Refusal, ...]:
        """Every refusal met, in the order met: the blocking one ended the reading, so it
        comes last."""
        return self.overridable + ((self.blocking,) if self.blocking is not None else ())


def judge(answers: Iterable[Refusal | Verdict | None]) -> Verdict:
    """The verdict of a path from its rules' answers, read in the order given.

    ``answers`` may be lazy (a generator): reading stops at the first refusal no override
    passes, since nothing after it can make the path pass, and never before it. A
    ``Verdict`` among the answers (a composed rule) counts with all its refusals.
    """
    passable: list[Refusal] = []
    for answer in answers:
        found = answer.refusals if isinstance(answer, Verdict) else (answer,)
        for refusal in found:
            if refusal is None:
                continue
            if not refusal.overridable:
                return Verdict(blocking=refusal, overridable=tuple(passable))
            if refusal not in passable:
                passable.append(refusal)
    return Verdict(overridable=tuple(passable))


class Refused(Exception):
    """For callers that prefer raising: carries the refusal unchanged."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
