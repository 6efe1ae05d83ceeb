"""The machinery rows are the data of Talos 1.14's compatibility package, with sources."""

from __future__ import annotations

import pytest

from ichor.release import machinery
from ichor.release.machinery_rows import ROWS, SNAPSHOT, MachineryRow

# Upstream's ``talosNNN/talosNNN.go`` at SNAPSHOT, one tuple per target minor: min host,
# max host (excl.), K8s min, max.
FACTS = {
    (1, 2): ("1.0.0", "1.3.0", "1.23.0", "1.25.99"),
    (1, 3): ("1.0.0", "1.5.0", "1.24.0", "1.26.99"),
    (1, 4): ("1.0.0", "1.6.0", "1.25.0", "1.27.99"),
    (1, 5): ("1.2.0", "1.7.0", "1.26.0", "1.28.99"),
    (1, 6): ("1.3.0", "1.8.0", "1.24.0", "1.29.99"),
    (1, 7): ("1.4.0", "1.9.0", "1.25.0", "1.30.99"),
    (1, 8): ("1.5.0", "1.10.0", "1.26.0", "1.31.99"),
    (1, 9): ("1.8.0", "1.11.0", "1.27.0", "1.32.99"),
    (1, 10): ("1.8.0", "1.12.0", "1.28.0", "1.33.99"),
    (1, 11): ("1.9.0", "1.13.0", "1.29.0", "1.34.99"),
    (1, 12): ("1.10.0", "1.14.0", "1.30.0", "1.35.99"),
    (1, 13): ("1.11.0", "1.15.0", "1.31.0", "1.36.99"),
    (1, 14): ("1.12.0", "1.16.0", "1.32.0", "1.37.99"),
}


def test_this_build_knows_talos_1_2_to_1_14_and_not_1_15() -> None:
    assert machinery.known_talos_minors() == tuple((1, m) for m in range(2, 15))
    assert machinery.bounds((1, 15)) is None


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"talos-{row.talos[0]}.{row.talos[1]}")
def test_each_row_holds_the_upstream_values_and_its_source(row: MachineryRow) -> None:
    assert (row.min_host, row.max_host_downgrade, row.min_kubernetes, row.max_kubernetes) == (
        FACTS[row.talos]
    )
    assert row.denied_hosts == ()
    package = f"talos{row.talos[0]}{row.talos[1]}"
    assert row.source == (
        f"https://github.com/siderolabs/talos/blob/{SNAPSHOT}"
        f"/pkg/machinery/compatibility/{package}/{package}.go"
    )


@pytest.mark.parametrize(
    ("talos", "minors"),
    [((1, 14), [(1, m) for m in range(32, 38)]), ((1, 2), [(1, 23), (1, 24), (1, 25)])],
)
def test_a_row_names_the_kubernetes_minors_it_runs(
    talos: tuple[int, int], minors: list[tuple[int, int]]
) -> None:
    row = machinery.bounds(talos)
    assert row is not None
    assert list(row.kubernetes_minors) == minors
