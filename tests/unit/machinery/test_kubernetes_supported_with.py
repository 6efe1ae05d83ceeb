"""Kubernetes pairs answer as machinery's SupportedWith does (``kubernetes_version.go``)."""

from __future__ import annotations

import pytest

from ichor.release import machinery
from ichor.release.machinery_rows import ROWS, MachineryRow
from ichor.release.versions import VersionError, parse
from tests.support import table

UPSTREAM = [
    ("1.32.1", "1.14.0", None),
    ("1.33.1", "1.14.0", None),
    ("1.36.3", "1.14.0-beta.0", None),
    ("1.37.0-rc.0", "1.14.7", None),
    ("1.32.0-alpha.1", "1.14.0", None),
    (
        "1.38.0-alpha.0",
        "1.14.0",
        "version of Kubernetes 1.38.0-alpha.0 is too new to be used with Talos 1.14.0",
    ),
    ("1.31.1", "1.14.0", "version of Kubernetes 1.31.1 is too old to be used with Talos 1.14.0"),
    ("1.30.0", "1.16.0-alpha.0", "compatibility with version 1.16.0-alpha.0 is not supported"),
    ("1.30.0", "1.1.0", "compatibility with version 1.1.0 is not supported"),
    # this build's: the first Talos minor past its rows
    (
        "1.33.0",
        table.unknown_talos(v=False),
        f"compatibility with version {table.unknown_talos(v=False)} is not supported",
    ),
]


@pytest.mark.parametrize(("kubernetes", "talos", "error"), UPSTREAM)
def test_kubernetes_pairs_answer_as_upstream_machinery(
    kubernetes: str, talos: str, error: str | None
) -> None:
    assert machinery.kubernetes_supported_with(kubernetes=kubernetes, talos=talos) == error
    assert (
        machinery.kubernetes_supported_with(kubernetes="v" + kubernetes, talos=parse("v" + talos))
        == error
    )


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"talos-{row.talos[0]}.{row.talos[1]}")
def test_each_row_stores_an_exclusive_x_99_maximum(row: MachineryRow) -> None:
    talos = f"{row.talos[0]}.{row.talos[1]}.2"
    lo, hi = parse(row.min_kubernetes), parse(row.max_kubernetes)
    assert hi.patch == 99
    ok = [str(lo), f"{lo}-alpha.1", f"{hi.major}.{hi.minor}.98", f"{hi.major}.{hi.minor}.0-rc.0"]
    for kubernetes in ok:
        assert machinery.kubernetes_supported_with(kubernetes=kubernetes, talos=talos) is None
    too_old = f"{lo.major}.{lo.minor - 1}.9"
    assert machinery.kubernetes_supported_with(kubernetes=too_old, talos=talos) == (
        f"version of Kubernetes {too_old} is too old to be used with Talos {talos}"
    )
    for too_new in (str(hi), f"{hi.major}.{hi.minor + 1}.0-alpha.0"):
        assert machinery.kubernetes_supported_with(kubernetes=too_new, talos=talos) == (
            f"version of Kubernetes {too_new} is too new to be used with Talos {talos}"
        )


@pytest.mark.parametrize(("kubernetes", "talos"), [("x", "1.14.0"), ("1.33.0", "1.14-rc.0")])
def test_an_unparsable_version_raises_the_typed_error(kubernetes: str, talos: str) -> None:
    with pytest.raises(VersionError):
        machinery.kubernetes_supported_with(kubernetes=kubernetes, talos=talos)
