"""The one answer every rule gives when it says no: a typed refusal.

A rule returns data rather than raising: which rule refused, one sentence for a person,
and whether the override verb may pass it (decided here, by its rule, and nowhere else).
``judge`` reads the answers of a path's rules in order into one ``Verdict``, past the
overridable ones, so a refusal no override passes always wins. Every path composes its
rules with ``judge``, never with ``or``.

More in docs/design/notes.md, "ichor/release/refusals.py".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["NEVER_OVERRIDABLE", "Refusal", "Refused", "Rule", "Verdict", "judge", "refuse"]


class Rule(StrEnum):
    """Which rule refused. Values are CamelCase so they serve as condition reasons."""

    #: A version is not in the form its field expects (``vX.Y.Z``, a contract ``vX.Y``). Step: write
    #: it in that form.
    FORM = "Form"
    #: An upgrade target with a pre-release, build metadata or the ``vX.Y`` shorthand. Step: name a
    #: final ``vX.Y.Z``.
    FINAL = "Final"
    #: An upgrade target that is not newer than what runs. Step: none, it runs already; or name a
    #: newer version.
    NOT_NEWER = "NotNewer"
    #: A spec version moved back; Ichor never downgrades. Step: keep the version, or move it
    #: forward.
    DOWNGRADE = "Downgrade"
    #: Talos machinery's bounds: the running Talos cannot install the target directly. Step: upgrade
    #: through the minor the message names (``ichor upgrade plan CLUSTER``).
    TALOS_PATH = "TalosPath"
    #: Kubernetes more than one minor up, another major, or back. Step: upgrade one minor at a time.
    KUBERNETES_SKEW = "KubernetesSkew"
    #: The Talos/Kubernetes pair is refused (machinery and the table); overridable. Step: the order
    #: the message names, or an override by a holder of the verb.
    TALOS_KUBERNETES = "TalosKubernetes"
    #: The Cilium/Kubernetes pair is refused (the table); overridable. Step: ``ichor cni upgrade
    #: CLUSTER`` first, or a newer Ichor when the message says so.
    CILIUM_KUBERNETES = "CiliumKubernetes"
    #: Neither machinery nor the table knows the version; never overridable. Step: upgrade Ichor
    #: (docs/upgrading.md).
    UNKNOWN_VERSION = "UnknownVersion"
    #: A first install with versions other than the release set. Step: install with the set (``ichor
    #: version``), then upgrade.
    PINNED = "Pinned"
    #: Adopt of a Talos below v1.12. Step: upgrade the cluster to v1.12 or newer with talosctl
    #: first.
    ADOPT_FLOOR = "AdoptFloor"
    #: A version contract the running Talos does not take. Step: set ``versionContract`` to the
    #: running Talos minor or an older one.
    CONTRACT = "VersionContract"
    #: A Cilium version other than the embedded chart was asked for. Step: delete the operation and
    #: run ``ichor cni upgrade CLUSTER`` again.
    CNI_VERSION = "CniVersion"
    #: A cni operation for a CNI Ichor does not run (``unmanaged``, or another CNI observed). Step:
    #: none; upgrade that CNI yourself.
    NOT_CILIUM = "NotCilium"
    #: ``spec.cni.preset`` would release an observed Cilium from its table; overridable. Step: keep
    #: ``cilium``, or an override by a holder of the verb.
    CNI_PRESET = "CniPreset"
    #: A version seen running whose release cannot be read (a Node's osImage, a Cilium image
    #: without a version): unknown, so every step it would judge is refused; never
    #: overridable. Step: fix what the cluster's ``Ready`` or ``CiliumUpgradeAvailable``
    #: reason names, so the version can be read.
    UNREADABLE_VERSION = "UnreadableVersion"
    #: A version this site's policy refuses (IchorInstallation ``spec.policy``): an entry
    #: denies it, alone or with another component's version, or holds its component at a
    #: lower minor. The message names the entry and the reason a person wrote; only the
    #: override verb passes it, and the Override Event names the entry. Step: another
    #: version, or an override by a holder of the verb.
    SITE_POLICY = "SitePolicy"
    #: This site's policy cannot be read, so what it denies is unknown: every step it would
    #: judge is refused, and no override passes it. Step: correct the IchorInstallation's
    #: ``spec.policy``.
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
