"""Talos install paths answer as machinery's UpgradeableFrom does (``talos_version.go``)."""

from __future__ import annotations

import pytest

from ichor.release import machinery
from ichor.release.machinery_rows import ROWS, MachineryRow
from ichor.release.versions import VersionError, parse
from tests.support import table

# Every case of upstream's ``talos_version_test.go``, with the answer of this build (Talos 1.14's
# machinery, where 1.15 is not a known target).
UPSTREAM = [
    ("1.0.0-alpha.0", "1.3.0", None),
    ("1.2.0-alpha.0", "1.5.0", None),
    ("0.14.3", "1.3.0", "host version 0.14.3 is too old to upgrade to Talos 1.3.0"),
    ("1.5.0-alpha.0", "1.3.0", "host version 1.5.0-alpha.0 is too new to downgrade to Talos 1.3.0"),
    ("1.12.0", "1.14.0", None),
    ("1.13.0-alpha.0", "1.14.0", None),
    ("1.12.0", "1.14.0-alpha.0", None),
    ("1.13.3", "1.14.1", None),
    ("1.14.0-beta.0", "1.14.0", None),
    ("1.14.5", "1.14.3", None),
    ("1.11.0", "1.14.0", "host version 1.11.0 is too old to upgrade to Talos 1.14.0"),
    (
        "1.16.0-alpha.0",
        "1.14.0",
        "host version 1.16.0-alpha.0 is too new to downgrade to Talos 1.14.0",
    ),
    ("1.4.0", "1.16.0-alpha.0", "upgrades to version 1.16.0-alpha.0 are not supported"),
    ("1.4.0", "1.17.0-alpha.0", "upgrades to version 1.17.0-alpha.0 are not supported"),
    # Talos main knows 1.15; the 1.14 machinery this build mirrors does not.
    ("1.13.0", "1.15.0", "upgrades to version 1.15.0 are not supported"),
    ("1.12.0", "1.15.0", "upgrades to version 1.15.0 are not supported"),
    ("1.17.0-alpha.0", "1.15.0", "upgrades to version 1.15.0 are not supported"),
]


@pytest.mark.parametrize(("host", "target", "error"), UPSTREAM)
def test_install_paths_answer_as_upstream_machinery(
    host: str, target: str, error: str | None
) -> None:
    assert machinery.upgradeable_from(target=target, host=host) == error


@pytest.mark.parametrize(("host", "target", "error"), UPSTREAM)
def test_install_paths_read_a_leading_v_and_versions_alike(
    host: str, target: str, error: str | None
) -> None:
    assert machinery.upgradeable_from(target="v" + target, host=parse("v" + host)) == error


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"talos-{row.talos[0]}.{row.talos[1]}")
def test_each_row_bounds_its_hosts_on_the_core_triple(row: MachineryRow) -> None:
    target = f"{row.talos[0]}.{row.talos[1]}.7-beta.1"
    lo, hi = parse(row.min_host), parse(row.max_host_downgrade)
    below = f"{lo.major}.{lo.minor - 1}.99" if lo.minor else f"{lo.major - 1}.99.0"
    last = f"{hi.major}.{hi.minor - 1}.99"
    assert machinery.upgradeable_from(target=target, host=str(lo)) is None
    assert machinery.upgradeable_from(target=target, host=f"{lo}-alpha.0") is None
    assert machinery.upgradeable_from(target=target, host=last) is None
    assert machinery.upgradeable_from(target=target, host=below) == (
        f"host version {below} is too old to upgrade to Talos {target}"
    )
    assert machinery.upgradeable_from(target=target, host=f"{hi}-alpha.0") == (
        f"host version {hi}-alpha.0 is too new to downgrade to Talos {target}"
    )


@pytest.mark.parametrize(
    "target",
    [
        "1.0.0",
        "1.1.9",
        "0.14.0",
        table.unknown_talos(v=False),  # the first minor past the rows
        table.release(table.after(table.UNKNOWN_TALOS_MINOR), 2, v=False),
        "2.0.0",
        "2.14.0",
    ],
)
def test_a_target_minor_without_a_row_is_not_supported(target: str) -> None:
    assert machinery.upgradeable_from(target=target, host="1.13.0") == (
        f"upgrades to version {target} are not supported"
    )


def test_a_denied_host_is_refused_by_full_semver_equality(monkeypatch: pytest.MonkeyPatch) -> None:
    row = machinery.bounds((1, 14))
    assert row is not None
    denied = machinery.Bounds(
        row=row.row,
        min_host=row.min_host,
        max_host_downgrade=row.max_host_downgrade,
        denied_hosts=(parse("1.13.2-beta.0"),),
        min_kubernetes=row.min_kubernetes,
        max_kubernetes=row.max_kubernetes,
    )
    monkeypatch.setitem(machinery._BY_MINOR, (1, 14), denied)
    assert machinery.upgradeable_from(target="1.14.3", host="1.13.2-beta.0+b.7") == (
        "host version 1.13.2-beta.0+b.7 is denied for upgrade to Talos 1.14.3"
    )
    assert machinery.upgradeable_from(target="1.14.3", host="1.13.2") is None
    assert machinery.upgradeable_from(target="1.14.3", host="1.13.2-beta.1") is None


@pytest.mark.parametrize(("target", "host"), [("1.14", "banana"), ("1.14-rc", "1.13.0"), ("", "")])
def test_an_unparsable_version_raises_the_typed_error(target: str, host: str) -> None:
    with pytest.raises(VersionError):
        machinery.upgradeable_from(target=target, host=host)
