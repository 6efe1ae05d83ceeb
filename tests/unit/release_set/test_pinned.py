"""The release set decides a first install only, and the table must hold it together."""

from __future__ import annotations

import dataclasses

import pytest

from ichor.release import compat, machinery
from ichor.release.refusals import Rule
from ichor.release.release_set import (
    ADOPT_MIN_TALOS,
    PINNED,
    ReleaseSet,
    check_init_compat,
    check_pinned_flags,
)
from ichor.release.versions import check_contract, check_spec_version, parse
from tests.support import table


def test_the_pinned_set_is_talos_1_14_3_kubernetes_1_36_6_and_cilium_1_20_4() -> None:
    assert (
        ReleaseSet(talos="v1.14.3", kubernetes="v1.36.6", contract="v1.14", cilium_chart="1.20.4")
        == PINNED
    )


def test_pinned_is_consistent_with_machinery() -> None:
    talos = check_spec_version(PINNED.talos, field="talosVersion")
    kubernetes = check_spec_version(PINNED.kubernetes, field="kubernetesVersion")
    assert talos.is_final
    assert kubernetes.is_final
    assert machinery.kubernetes_supported_with(kubernetes=kubernetes, talos=talos) is None
    assert machinery.upgradeable_from(target=talos, host=talos) is None
    assert check_contract(PINNED.contract) == talos.minor_key
    assert compat.talos_kubernetes_error(talos=talos, kubernetes=kubernetes) is None
    assert compat.cilium_kubernetes_error(cilium=PINNED.cilium_chart, kubernetes=kubernetes) is None
    assert check_init_compat() is None


def test_the_adopt_floor_is_the_oldest_host_the_pinned_talos_installs_over() -> None:
    row = machinery.bounds(parse(PINNED.talos).minor_key)
    assert row is not None
    assert row.min_host[:2] == ADOPT_MIN_TALOS


def test_init_accepts_the_release_set() -> None:
    assert (
        check_pinned_flags(
            talos=PINNED.talos, kubernetes=PINNED.kubernetes, contract=PINNED.contract
        )
        is None
    )


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        ({"talos": "v1.14.4"}, "--talos-version"),
        ({"talos": "1.14.3"}, "--talos-version"),
        ({"kubernetes": "v1.36.5"}, "--kubernetes-version"),
        ({"kubernetes": "v1.37.1"}, "--kubernetes-version"),
        ({"contract": "v1.13"}, "--version-contract"),
    ],
)
def test_init_refuses_any_other_version_naming_the_flag(flags: dict[str, str], flag: str) -> None:
    values = {"talos": PINNED.talos, "kubernetes": PINNED.kubernetes, "contract": PINNED.contract}
    values.update(flags)
    refusal = check_pinned_flags(**values)
    assert refusal is not None
    assert refusal.rule is Rule.PINNED
    assert not refusal.overridable
    assert refusal.message.startswith(f"{flag} ")
    assert "upgrade after the install" in refusal.message


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"kubernetes": "v1.32.0"}, Rule.TALOS_KUBERNETES),  # table range of Talos 1.14
        ({"kubernetes": "v1.37.1"}, Rule.CILIUM_KUBERNETES),  # Cilium 1.20 runs up to 1.36
        ({"cilium_chart": "1.19.10"}, Rule.CILIUM_KUBERNETES),  # 1.19 runs up to 1.35
        (
            {"talos": table.unknown_talos(), "contract": table.unknown_talos_contract()},
            Rule.UNKNOWN_VERSION,
        ),
        ({"cilium_chart": table.unknown_cilium()}, Rule.UNKNOWN_VERSION),
        ({"kubernetes": table.unknown_kubernetes()}, Rule.UNKNOWN_VERSION),
        ({"contract": "v1.15"}, Rule.PINNED),  # a contract newer than the Talos
        ({"contract": "1.14"}, Rule.FORM),
    ],
)
def test_check_init_compat_refuses_an_incompatible_set(change: dict[str, str], rule: Rule) -> None:
    refusal = check_init_compat(dataclasses.replace(PINNED, **change))
    assert refusal is not None
    assert refusal.rule is rule
    assert not refusal.overridable
    assert refusal.message.startswith("This build's release set (Talos ")


def test_init_names_an_unknown_cilium_even_when_the_talos_pair_refuses_too() -> None:
    refusal = check_init_compat(
        ReleaseSet(
            talos="v1.14.3",
            kubernetes="v1.32.0",
            contract="v1.14",
            cilium_chart=table.unknown_cilium(),
        )
    )
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION
    assert not refusal.overridable
