"""Kubernetes moves one minor at most, never back, and stays paired with its Talos."""

from __future__ import annotations

import pytest

from ichor.release.refusals import Rule
from ichor.release.release_set import PINNED
from ichor.upgrade.paths import kubernetes_pairing, kubernetes_skew
from tests.support import table


@pytest.mark.parametrize(
    ("running", "target", "allowed"),
    [
        ("v1.36.2", "v1.37.1", True),
        ("v1.36.2", "v1.36.9", True),
        ("v1.36.2", "v1.36.2", True),  # not a move; newer is the target rule's question
        ("v1.36.0-rc.1", "v1.36.0", True),
        ("v1.35.0", "v1.37.1", False),  # two minors
        ("v1.36.2", "v1.36.1", False),  # back
        ("v1.36.2", "v1.35.9", False),
        ("v1.36.2", "v2.0.0", False),  # another major
        ("v1.36.2", "v2.37.0", False),
    ],
)
def test_kubernetes_skew_is_one_minor_up_at_most(running: str, target: str, allowed: bool) -> None:
    refusal = kubernetes_skew(running=running, target=target)
    assert (refusal is None) is allowed
    if refusal is not None:
        assert refusal.rule is Rule.KUBERNETES_SKEW
        assert not refusal.overridable
        assert "Kubernetes version skew policy" in refusal.message


def test_a_skipped_minor_names_the_minor_to_reach_first() -> None:
    refusal = kubernetes_skew(running="v1.35.0", target="v1.37.1")
    assert refusal is not None
    assert refusal.message.endswith("so upgrade to the newest Kubernetes 1.36 first.")


@pytest.mark.parametrize(
    ("target", "rule"),
    [
        ("v1.37.1", None),
        ("v1.32.0", None),  # machinery accepts it; the table's refusal is compat's
        ("v1.31.9", Rule.TALOS_KUBERNETES),
        # unknown to this build, so not supported by the pinned Talos either
        (table.unknown_kubernetes(), Rule.UNKNOWN_VERSION),
    ],
)
def test_kubernetes_pairing_is_machinery_on_the_pinned_talos(
    target: str, rule: Rule | None
) -> None:
    refusal = kubernetes_pairing(target=target, talos=PINNED.talos)
    assert (refusal.rule if refusal else None) is rule


def test_a_pairing_with_an_unknown_talos_is_unknown() -> None:
    refusal = kubernetes_pairing(target="v1.36.0", talos=table.unknown_talos())
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION


@pytest.mark.parametrize(
    ("running", "target", "rule"),
    [
        ("v1.36.2", "v1.37.1", None),
        ("v1.35.0", "v1.37.1", Rule.KUBERNETES_SKEW),  # two minors
        # the next minor is unknown to this build, so not supported by the pinned Talos
        (table.newest_kubernetes(1), table.unknown_kubernetes(), Rule.UNKNOWN_VERSION),
    ],
)
def test_kubernetes_skew_and_pairing_on_the_pinned_talos(
    running: str, target: str, rule: Rule | None
) -> None:
    refusal = kubernetes_skew(running=running, target=target) or kubernetes_pairing(
        target=target, talos=PINNED.talos
    )
    assert (refusal.rule if refusal else None) is rule
