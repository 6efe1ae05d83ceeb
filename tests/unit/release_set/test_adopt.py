"""Adopt takes a cluster as it runs: it refuses one it cannot operate, warns about an
incompatible one, and never judges it against the release set."""

from __future__ import annotations

import pytest

from ichor.release.refusals import Refusal, Rule
from ichor.release.release_set import adopt_contract, check_adopt_compat
from tests.support import table


@pytest.mark.parametrize(
    ("talos", "kubernetes", "managed_cni"),
    [
        ("v1.14.3", "v1.36.6", True),  # the set
        ("v1.12.4", "v1.33.2", True),  # older than the set
        ("v1.13.2", "v1.34.1", True),
        ("v1.14.5", "v1.36.9", False),  # newer than the set
        ("v1.14.3", "v1.37.1", False),  # unmanaged CNI: only the Talos pair is judged
    ],
)
def test_a_compatible_cluster_is_adopted_without_a_word(
    talos: str, kubernetes: str, managed_cni: bool
) -> None:
    verdict = check_adopt_compat(talos=talos, kubernetes=kubernetes, managed_cni=managed_cni)
    assert verdict.refusal is None
    assert verdict.warnings == ()


@pytest.mark.parametrize(
    ("talos", "kubernetes", "managed_cni", "warned"),
    [
        ("v1.14.3", "v1.32.1", False, ["Talos 1.14 runs Kubernetes 1.33 to 1.37"]),
        (
            "v1.14.3",
            "v1.32.1",
            True,
            ["Talos 1.14 runs Kubernetes 1.33 to 1.37", "Cilium 1.20 runs Kubernetes 1.33 to 1.36"],
        ),
        ("v1.14.3", "v1.37.1", True, ["Cilium 1.20 runs Kubernetes 1.33 to 1.36"]),
        ("v1.12.4", "v1.36.1", False, ["Talos 1.12 runs Kubernetes 1.30.0 up to"]),
    ],
)
def test_check_adopt_compat_warns_for_a_known_incompatible_pair(
    talos: str, kubernetes: str, managed_cni: bool, warned: list[str]
) -> None:
    verdict = check_adopt_compat(talos=talos, kubernetes=kubernetes, managed_cni=managed_cni)
    assert verdict.refusal is None
    assert len(verdict.warnings) == len(warned)
    for warning, names in zip(verdict.warnings, warned, strict=True):
        assert names in warning
        assert "adopted as it runs" in warning


def test_check_adopt_compat_judges_no_cilium_of_an_unmanaged_adopt() -> None:
    managed = check_adopt_compat(talos="v1.14.3", kubernetes="v1.37.1", managed_cni=True)
    unmanaged = check_adopt_compat(talos="v1.14.3", kubernetes="v1.37.1", managed_cni=False)
    assert managed.warnings
    assert unmanaged.warnings == ()


@pytest.mark.parametrize(
    ("talos", "kubernetes", "rule"),
    [
        (table.unknown_talos(), "v1.36.0", Rule.UNKNOWN_VERSION),
        ("v2.0.0", "v1.36.0", Rule.UNKNOWN_VERSION),
        ("v1.14.3", table.unknown_kubernetes(1), Rule.UNKNOWN_VERSION),
        ("v1.11.5", "v1.33.0", Rule.ADOPT_FLOOR),
        ("v1.12.0-alpha.0", "v1.33.0", None),  # the 1.12 line is at the floor
        ("v1.0.0", "v1.23.0", Rule.ADOPT_FLOOR),
        ("v0.14.3", "v1.23.0", Rule.ADOPT_FLOOR),
        ("banana", "v1.33.0", Rule.FORM),
        ("v1.14.3", "", Rule.FORM),
    ],
)
def test_check_adopt_compat_refuses_a_cluster_it_cannot_operate(
    talos: str, kubernetes: str, rule: Rule | None
) -> None:
    verdict = check_adopt_compat(talos=talos, kubernetes=kubernetes, managed_cni=True)
    assert (verdict.refusal.rule if verdict.refusal else None) is rule
    if verdict.refusal is not None:
        assert not verdict.refusal.overridable


def test_the_adopt_floor_names_the_step() -> None:
    verdict = check_adopt_compat(talos="v1.11.5", kubernetes="v1.33.0", managed_cni=False)
    assert verdict.refusal is not None
    assert verdict.refusal.message == (
        "Talos v1.11.5 is refused: Ichor adopts Talos 1.12 or newer, so upgrade the cluster "
        "to Talos 1.12 with talosctl, then adopt it."
    )


@pytest.mark.parametrize(
    ("contract", "talos", "accepted"),
    [
        (None, "v1.14.3", "v1.14"),  # the default: probed from the running Talos
        (None, "v1.12.4", "v1.12"),
        ("v1.14", "v1.14.3", "v1.14"),
        ("v1.13", "v1.14.3", "v1.13"),
        ("v1.2", "v1.14.3", "v1.2"),
        ("v1.14", "v1.14.0-beta.1", "v1.14"),
    ],
)
def test_adopt_takes_any_contract_the_running_talos_supports(
    contract: str | None, talos: str, accepted: str
) -> None:
    assert adopt_contract(contract=contract, talos=talos) == accepted


@pytest.mark.parametrize(
    ("contract", "talos", "rule", "words"),
    [
        ("v1.15", "v1.14.3", Rule.CONTRACT, "which takes contracts up to v1.14"),
        ("v2.0", "v1.14.3", Rule.CONTRACT, "choose v1.14 or older"),
        ("v1.14", "v1.13.9", Rule.CONTRACT, "leave --version-contract out to use v1.13"),
        ("1.14", "v1.14.3", Rule.FORM, "is not a version contract vX.Y"),
        ("v1.14.0", "v1.14.3", Rule.FORM, "is not a version contract vX.Y"),
        ("", "v1.14.3", Rule.FORM, "is not a version contract vX.Y"),
    ],
)
def test_adopt_refuses_a_contract_above_the_running_talos_minor(
    contract: str, talos: str, rule: Rule, words: str
) -> None:
    refusal = adopt_contract(contract=contract, talos=talos)
    assert isinstance(refusal, Refusal)
    assert refusal.rule is rule
    assert not refusal.overridable
    assert words in refusal.message
    assert refusal.message.startswith(f"--version-contract {contract!r} is refused")
