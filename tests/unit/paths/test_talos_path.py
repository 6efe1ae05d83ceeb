"""Talos moves on machinery's path: within the target minor's bounds, skipping allowed."""

from __future__ import annotations

import pytest

from ichor.release.refusals import Rule
from ichor.release.versions import VersionError
from ichor.upgrade.paths import talos_path
from tests.support import table

UNKNOWN = table.unknown_talos()  # the first Talos minor past what this build knows


@pytest.mark.parametrize(
    ("running", "target", "rule"),
    [
        ("v1.11.5", "v1.14.3", Rule.TALOS_PATH),  # below the 1.12.0 minimum of Talos 1.14
        ("v1.13.2", "v1.14.3", None),  # adjacent minor
        ("v1.12.4", "v1.14.3", None),  # skips 1.13, within the bounds
        ("v1.14.3", "v1.14.4", None),  # patch
        ("v1.14.3", UNKNOWN, Rule.UNKNOWN_VERSION),  # a minor machinery does not know
        ("v1.16.0-alpha.0", "v1.14.3", Rule.TALOS_PATH),  # too new to downgrade
        ("v1.12.0-alpha.0", "v1.14.0", None),  # pre-release counts as its core
    ],
)
def test_talos_paths_follow_machinery(running: str, target: str, rule: Rule | None) -> None:
    refusal = talos_path(running=running, target=target)
    assert (refusal.rule if refusal else None) is rule
    if refusal is not None:
        assert not refusal.overridable


def test_a_host_below_the_minimum_is_told_which_talos_to_reach_first() -> None:
    refusal = talos_path(running="v1.11.5", target="v1.14.3")
    assert refusal is not None
    assert refusal.message == (
        "Talos v1.14.3 is refused from v1.11.5: Talos 1.14 installs over Talos 1.12.0 up to, "
        "not including, 1.16.0 (Talos machinery: host version 1.11.5 is too old to upgrade to "
        "Talos 1.14.3), so upgrade to Talos 1.12 or newer first."
    )


def test_an_unknown_target_minor_says_a_newer_ichor_is_needed() -> None:
    refusal = talos_path(running="v1.14.3", target=UNKNOWN)
    assert refusal is not None
    assert "a newer Ichor release is needed" in refusal.message


def test_an_unparsable_version_raises_the_typed_error() -> None:
    with pytest.raises(VersionError):
        talos_path(running="v1.14.3", target="v1.15-rc.0")


def test_an_unknown_target_minor_is_refused_in_machinerys_words_then_the_step() -> None:
    refusal = talos_path(running="v1.14.3", target=UNKNOWN)
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION
    assert not refusal.overridable
    assert refusal.message == (
        f"Talos {UNKNOWN} is refused: upgrades to version {UNKNOWN[1:]} are not supported "
        f"(Talos machinery); this Ichor knows Talos {table.KNOWN_TALOS}, so a newer Ichor "
        "release is needed; no override passes an unknown version."
    )
