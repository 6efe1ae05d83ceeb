"""The release set this build installs, and the checks of a first install and an adopt.

A first install is the one place where the build's tested matrix is the right answer:
``ichor init`` takes exactly ``PINNED`` and refuses any other version (a different one
is an upgrade, run after the install). After that the set binds nothing: upgrades go
to any version the rules accept, and adopt takes a cluster as it runs, older or newer
than the set. This module refuses a set that the table does not hold together, so the
set and the embedded chart move in one change.
"""

from __future__ import annotations

from dataclasses import dataclass

from ichor.release import compat
from ichor.release.refusals import Refusal, Rule, judge, refuse
from ichor.release.versions import Version, VersionError, as_version, check_contract, parse

__all__ = [
    "ADOPT_MIN_TALOS",
    "PINNED",
    "AdoptVerdict",
    "ReleaseSet",
    "adopt_contract",
    "check_adopt_compat",
    "check_init_compat",
    "check_pinned_flags",
]


@dataclass(frozen=True, slots=True)
class ReleaseSet:
    """The versions a new install gets (spec forms; the Cilium chart has no ``v``)."""

    talos: str
    kubernetes: str
    contract: str
    cilium_chart: str

    def __str__(self) -> str:
        return (
            f"Talos {self.talos}, Kubernetes {self.kubernetes}, contract {self.contract}, "
            f"Cilium {self.cilium_chart}"
        )


PINNED = ReleaseSet(talos="v1.14.3", kubernetes="v1.36.6", contract="v1.14", cilium_chart="1.20.4")

# The oldest Talos adopt takes over (docs/design/decisions.md, "Adopt").
ADOPT_MIN_TALOS: tuple[int, int] = (1, 12)


def check_pinned_flags(*, talos: str, kubernetes: str, contract: str) -> Refusal | None:
    """``ichor init`` installs the release set and nothing else."""
    for flag, given, pinned in (
        ("--talos-version", talos, PINNED.talos),
        ("--kubernetes-version", kubernetes, PINNED.kubernetes),
        ("--version-contract", contract, PINNED.contract),
    ):
        if given != pinned:
            return refuse(
                Rule.PINNED,
                f"{flag} {given} is refused: a first install runs this build's release set "
                f"({PINNED}), so run ichor init without {flag} and upgrade after the install.",
            )
    return None


def check_init_compat(release_set: ReleaseSet = PINNED) -> Refusal | None:
    """Refuse a set the compatibility table does not hold together (never overridable)."""
    try:
        talos = parse(release_set.talos)
        contract = check_contract(release_set.contract)
    except VersionError as error:
        return refuse(Rule.FORM, f"This build's release set ({release_set}) is refused: {error}.")
    contract_refusal = (
        refuse(
            Rule.PINNED,
            f"contract {release_set.contract} is newer than Talos {release_set.talos}.",
        )
        if contract > talos.minor_key
        else None
    )
    inner = judge(
        (
            compat.talos_kubernetes_error(talos=talos, kubernetes=release_set.kubernetes),
            compat.cilium_kubernetes_error(
                cilium=release_set.cilium_chart, kubernetes=release_set.kubernetes
            ),
            contract_refusal,
        )
    ).refusal
    if inner is None:
        return None
    return Refusal(
        rule=inner.rule,
        message=f"This build's release set ({release_set}) cannot be installed: {inner.message}",
        overridable=False,
    )


@dataclass(frozen=True, slots=True)
class AdoptVerdict:
    """Adopt refuses a cluster it cannot operate and warns about an incompatible one."""

    refusal: Refusal | None
    warnings: tuple[str, ...] = ()


_ADOPTED = (
    " The cluster is adopted as it runs; every upgrade is judged by the same rule "
    "until the pair is compatible."
)


def check_adopt_compat(*, talos: str, kubernetes: str, managed_cni: bool) -> AdoptVerdict:
    """Judge the versions a cluster runs before adopt writes anything.

    Refused: a version that does not parse, a Talos below v1.12, a version neither
    machinery nor the table knows. Warned: an incompatible Talos/Kubernetes pair, and for
    a managed CNI the embedded Cilium chart with the Kubernetes (an unmanaged CNI judges
    only the Talos pair). Older or newer than the set is no reason for either.
    """
    try:
        talos_v = parse(talos)
        kubernetes_v = parse(kubernetes)
    except VersionError as error:
        return AdoptVerdict(
            refusal=refuse(Rule.FORM, f"Adopt is refused: the cluster runs {error}.")
        )
    if talos_v.minor_key < ADOPT_MIN_TALOS:
        return AdoptVerdict(
            refusal=refuse(
                Rule.ADOPT_FLOOR,
                f"Talos {talos_v.tag} is refused: Ichor adopts Talos "
                f"{compat.minor_text(ADOPT_MIN_TALOS)} or newer, so upgrade the cluster to "
                f"Talos {compat.minor_text(ADOPT_MIN_TALOS)} with talosctl, then adopt it.",
            )
        )
    verdict = judge(
        (
            compat.unknown_talos(talos_v),
            compat.unknown_kubernetes(kubernetes_v),
            compat.talos_kubernetes_error(talos=talos_v, kubernetes=kubernetes_v),
            compat.cilium_kubernetes_error(cilium=PINNED.cilium_chart, kubernetes=kubernetes_v)
            if managed_cni
            else None,
        )
    )
    if verdict.blocking is not None:
        return AdoptVerdict(refusal=verdict.blocking)
    return AdoptVerdict(
        refusal=None, warnings=tuple(refusal.message + _ADOPTED for refusal in verdict.overridable)
    )


def adopt_contract(*, contract: str | None, talos: str | Version) -> str | Refusal:
    """The version contract adopt writes, or why the one given is refused.

    Without ``--version-contract`` it is probed from the running Talos (its minor). Any
    contract the running Talos supports is accepted: its own minor or an older one. One
    above the running minor is refused (never overridable), as is one not in the form
    ``vX.Y``. Raises ``VersionError`` when ``talos`` does not parse.
    """
    talos_v = as_version(talos)
    probed = f"v{talos_v.major}.{talos_v.minor}"
    if contract is None:
        return probed
    try:
        wanted = check_contract(contract)
    except VersionError as error:
        return refuse(Rule.FORM, f"--version-contract {contract!r} is refused: {error}.")
    if wanted > talos_v.minor_key:
        return refuse(
            Rule.CONTRACT,
            f"--version-contract {contract!r} is refused: the cluster runs Talos "
            f"{talos_v.tag}, which takes contracts up to {probed} (a contract names the "
            f"machine configuration features of a Talos minor, and a Talos does not know a "
            f"newer minor's), so choose {probed} or older, or leave --version-contract out "
            f"to use {probed}, probed from the running Talos.",
        )
    return contract


def pinned_versions() -> tuple[Version, Version]:
    """The set's Talos and Kubernetes, parsed."""
    return parse(PINNED.talos), parse(PINNED.kubernetes)
