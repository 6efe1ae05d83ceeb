"""Cilium runs the Kubernetes minors its release's CI matrix tests, and nothing else."""

from __future__ import annotations

import pytest

from ichor.release import compat
from ichor.release.refusals import Rule
from ichor.release.versions import parse
from tests.support import table

CASES = [
    # Cilium 1.18.16: 1.30 to 1.33
    ("1.18.16", "v1.30.0", True),
    ("1.18.16", "v1.33.9", True),
    ("1.18.16", "v1.29.9", False),
    ("1.18.16", "v1.34.0", False),
    # Cilium 1.19.10: 1.32 to 1.35 (the CI matrix, not the stale requirements page)
    ("1.19.10", "v1.32.0", True),
    ("1.19.10", "v1.35.4", True),
    ("1.19.10", "v1.31.9", False),
    ("1.19.10", "v1.36.0", False),
    # Cilium 1.20.4: 1.33 to 1.36
    ("1.20.4", "v1.33.0", True),
    ("1.20.4", "v1.36.6", True),
    ("1.20.4", "v1.32.9", False),
    ("1.20.4", "v1.37.1", False),
    # the minor decides, whatever the patch or pre-release
    ("1.20.0-rc.1", "v1.36.0-alpha.0", True),
    ("v1.19.0", "1.35.99", True),
]


@pytest.mark.parametrize(("cilium", "kubernetes", "runs"), CASES)
def test_cilium_kubernetes_table_lookups(cilium: str, kubernetes: str, runs: bool) -> None:
    refusal = compat.cilium_kubernetes_error(cilium=cilium, kubernetes=kubernetes)
    if runs:
        assert refusal is None
        return
    assert refusal is not None
    assert refusal.rule is Rule.CILIUM_KUBERNETES
    assert refusal.overridable
    entry = compat.CILIUM_KUBERNETES[parse(cilium).minor_key]
    assert f"runs Kubernetes {entry.low[0]}.{entry.low[1]} to" in refusal.message
    assert "Cilium CI matrix" in refusal.message


@pytest.mark.parametrize(
    "cilium", ["1.17.9", table.unknown_cilium(), "0.28.9", "2.0.0", "banana", "", "1.20-rc"]
)
def test_a_cilium_minor_not_in_the_table_is_unknown_and_never_overridable(cilium: str) -> None:
    refusal = compat.cilium_kubernetes_error(cilium=cilium, kubernetes="v1.34.0")
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION
    assert not refusal.overridable
    assert "no override passes an unknown version" in refusal.message


@pytest.mark.parametrize("kubernetes", [table.unknown_kubernetes(), "v1.22.5", "v2.0.0"])
def test_a_kubernetes_minor_no_table_mentions_is_unknown_for_cilium(kubernetes: str) -> None:
    refusal = compat.cilium_kubernetes_error(cilium="1.20.4", kubernetes=kubernetes)
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION


def test_each_cilium_entry_names_the_ci_matrix_of_a_release_tag() -> None:
    assert set(compat.CILIUM_KUBERNETES) == {(1, 18), (1, 19), (1, 20)}
    for (major, minor), entry in compat.CILIUM_KUBERNETES.items():
        assert entry.source.startswith(f"https://github.com/cilium/cilium/blob/v{major}.{minor}.")
        assert entry.source.endswith("/.github/actions/ginkgo/main-k8s-versions.yaml")


def test_the_table_cannot_be_changed_at_run_time() -> None:
    with pytest.raises(TypeError):
        compat.CILIUM_KUBERNETES[(1, 21)] = compat.CILIUM_KUBERNETES[(1, 20)]  # type: ignore[index]
