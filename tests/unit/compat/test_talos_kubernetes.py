"""The Talos/Kubernetes pair: the table decides the minors it holds, machinery bounds it
and decides the others, and what neither knows is refused with no override."""

from __future__ import annotations

import pytest

from ichor.release import compat
from ichor.release.refusals import Refusal, Rule
from tests.support import table

CASES = [
    # Talos 1.14 is in the table: the support matrix's 1.33 to 1.37, narrower than machinery
    ("v1.14.3", "v1.32.0", Rule.TALOS_KUBERNETES),  # machinery accepts it, the table refuses
    ("v1.14.3", "v1.31.9", Rule.TALOS_KUBERNETES),  # the webhook's refusal case
    ("v1.14.3", "v1.33.0", None),
    ("v1.14.3", "v1.36.6", None),
    ("v1.14.0-beta.0", "v1.37.0-rc.0", None),
    ("v1.14.3", "v1.37.98", None),
    ("v1.14.3", "v1.37.99", Rule.TALOS_KUBERNETES),  # machinery bounds the table
    # Talos 1.13 is not in the table: machinery decides (1.31.0 to 1.36.99 excl.)
    ("v1.13.2", "v1.31.0", None),
    ("v1.13.2", "v1.32.3", None),
    ("v1.13.2", "v1.30.9", Rule.TALOS_KUBERNETES),
    ("v1.13.2", "v1.37.0", Rule.TALOS_KUBERNETES),
    ("v1.12.4", "v1.30.0", None),
    # unknown to machinery and table: the first minor past what this build knows
    (table.unknown_talos(), "v1.36.0", Rule.UNKNOWN_VERSION),
    ("v1.1.0", "v1.24.0", Rule.UNKNOWN_VERSION),
    ("v2.0.0", "v1.36.0", Rule.UNKNOWN_VERSION),
    ("v1.14.3", table.unknown_kubernetes(), Rule.UNKNOWN_VERSION),
    ("v1.14.3", "v1.22.9", Rule.UNKNOWN_VERSION),
]


@pytest.mark.parametrize(("talos", "kubernetes", "rule"), CASES)
def test_talos_kubernetes_uses_machinery_and_refuses_unknown_minors(
    talos: str, kubernetes: str, rule: Rule | None
) -> None:
    refusal = compat.talos_kubernetes_error(talos=talos, kubernetes=kubernetes)
    assert (refusal.rule if refusal else None) is rule
    if refusal is not None:
        assert refusal.overridable is (rule is not Rule.UNKNOWN_VERSION)


def test_a_table_refusal_names_the_rule_the_range_and_the_step() -> None:
    assert compat.talos_kubernetes_error(talos="v1.14.3", kubernetes="v1.32.0") == Refusal(
        rule=Rule.TALOS_KUBERNETES,
        message=(
            "Kubernetes v1.32.0 is refused with Talos v1.14.3: Talos 1.14 runs Kubernetes "
            "1.33 to 1.37 (Talos support matrix), so choose a Kubernetes in that range or a "
            "Talos that runs 1.32."
        ),
        overridable=True,
    )


def test_a_machinery_refusal_quotes_machinery_and_its_bounds() -> None:
    refusal = compat.talos_kubernetes_error(talos="v1.13.2", kubernetes="v1.37.0")
    assert refusal is not None
    assert refusal.message == (
        "Kubernetes v1.37.0 is refused with Talos v1.13.2: Talos 1.13 runs Kubernetes 1.31.0 "
        "up to, not including, 1.36.99 (Talos machinery: version of Kubernetes 1.37.0 is too "
        "new to be used with Talos 1.13.2), so choose a Kubernetes in that range or a Talos "
        "that runs 1.37."
    )


@pytest.mark.parametrize(
    ("talos", "kubernetes", "names"),
    [
        (
            table.unknown_talos(),
            "v1.36.0",
            f"Talos {table.unknown_talos()} is refused: this Ichor knows Talos {table.KNOWN_TALOS}",
        ),
        (
            "v1.14.3",
            table.unknown_kubernetes(),
            f"Kubernetes {table.unknown_kubernetes()} is refused: this Ichor knows Kubernetes 1.23",
        ),
    ],
)
def test_an_unknown_version_says_a_newer_ichor_is_needed(
    talos: str, kubernetes: str, names: str
) -> None:
    refusal = compat.talos_kubernetes_error(talos=talos, kubernetes=kubernetes)
    assert refusal is not None
    assert refusal.message.startswith(names)
    assert "a newer Ichor release is needed; no override passes an unknown version." in (
        refusal.message
    )


def test_build_metadata_is_printed_as_given() -> None:
    for build in ("a", "b"):
        refusal = compat.talos_kubernetes_error(talos="v1.14.3", kubernetes=f"v1.32.0+{build}")
        assert refusal is not None
        assert f"v1.32.0+{build}" in refusal.message


def test_the_talos_table_holds_1_14_from_the_support_matrix() -> None:
    entry = compat.TALOS_KUBERNETES[(1, 14)]
    assert (entry.low, entry.high) == ((1, 33), (1, 37))
    assert entry.source == "https://docs.siderolabs.com/talos/v1.14/getting-started/support-matrix"


def test_known_versions_span_machinery_and_the_tables() -> None:
    assert compat.known_talos_minors() == tuple((1, m) for m in range(2, 15))
    assert compat.known_kubernetes_minors() == frozenset((1, m) for m in range(23, 38))


@pytest.mark.parametrize("kubernetes", ["v1.31.9", "v1.32.0"])
def test_the_webhook_refusals_of_kubernetes_below_1_33_with_talos_1_14_are_overridable(
    kubernetes: str,
) -> None:
    refusal = compat.talos_kubernetes_error(talos="v1.14.3", kubernetes=kubernetes)
    assert refusal is not None
    assert refusal.rule is Rule.TALOS_KUBERNETES
    assert refusal.overridable
    assert "Talos 1.14 runs Kubernetes 1.33 to 1.37" in refusal.message
