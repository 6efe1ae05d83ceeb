"""Versions are read exactly as Talos machinery reads them (blang/semver v4.0.0's parse)."""

from __future__ import annotations

import itertools

import pytest

from ichor.release.versions import Version, VersionError, parse


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("v1.14.0", "1.14.0"),
        ("1.14.0", "1.14.0"),
        ("  v1.14.0\n", "1.14.0"),
        ("\tv1.14.3 ", "1.14.3"),
        ("v01.014.003", "1.14.3"),
        ("00.1.2", "0.1.2"),
        ("1.00.0", "1.0.0"),
        ("1.14", "1.14.0"),
        ("v1.14", "1.14.0"),
        ("1", "1.0.0"),
        ("v1", "1.0.0"),
        ("1.14.0-alpha.0", "1.14.0-alpha.0"),
        ("v1.5.0-alpha.0", "1.5.0-alpha.0"),
        ("1.14.0-beta.1+build.5", "1.14.0-beta.1+build.5"),
        ("1.14.0+sha.abc-1", "1.14.0+sha.abc-1"),
        ("1.14.007-rc.1", "1.14.7-rc.1"),
        ("1.2.0-x-y.z--", "1.2.0-x-y.z--"),
        ("1.37.0-rc.0", "1.37.0-rc.0"),
        ("18446744073709551615.0.0", "18446744073709551615.0.0"),
    ],
)
def test_tolerant_parse_normalises_like_machinery(text: str, printed: str) -> None:
    version = parse(text)
    assert str(version) == printed
    assert version.tag == "v" + printed


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1.14-alpha", "Short version cannot contain PreRelease/Build meta data"),
        ("1.14+build", "Short version cannot contain PreRelease/Build meta data"),
        ("1-rc", "Short version cannot contain PreRelease/Build meta data"),
        ("1-rc.1", 'Invalid character(s) found in major number "1-rc"'),
        ("1.14-alpha.0", 'Invalid character(s) found in minor number "14-alpha"'),
        ("vv1.14.0", 'Invalid character(s) found in major number "0v1"'),
        ("V1.14.0", 'Invalid character(s) found in major number "0V1"'),
        ("", 'strconv.ParseUint: parsing "": invalid syntax'),
        ("   ", 'strconv.ParseUint: parsing "": invalid syntax'),
        ("1.2.3.4", 'Invalid character(s) found in patch number "3.4"'),
        ("1.2.3-01", 'Numeric PreRelease version must not contain leading zeroes "01"'),
        ("1.2.3-", "Prerelease is empty"),
        ("1.2.3-a..b", "Prerelease is empty"),
        ("1.2.3+", "Build meta data is empty"),
        ("1.2.3-é", 'Invalid character(s) found in prerelease "é"'),
        ("1.2.3+a_b", 'Invalid character(s) found in build meta data "a_b"'),
        ("a.b.c", 'Invalid character(s) found in major number "a"'),
        ("1.2.3 4", 'Invalid character(s) found in patch number "3 4"'),
        (
            "18446744073709551616.0.0",
            'strconv.ParseUint: parsing "18446744073709551616": value out of range',
        ),
        (
            "1.2.3-18446744073709551616",
            'strconv.ParseUint: parsing "18446744073709551616": value out of range',
        ),
    ],
)
def test_tolerant_parse_refuses_what_machinery_refuses_with_its_reason(
    text: str, reason: str
) -> None:
    with pytest.raises(VersionError) as caught:
        parse(text)
    assert caught.value.detail == reason
    assert repr(text) in str(caught.value)
    assert "is not a version" in str(caught.value)


def test_version_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a version"):
        parse("banana")


@pytest.mark.parametrize(
    "ascending",
    [
        # SemVer 2.0 §11's own example chain.
        [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
        ],
        ["1.13.9", "1.14.0-alpha.0", "1.14.0-beta.0", "1.14.0", "1.14.1", "1.15.0"],
        ["1.9.0", "1.10.0", "1.11.0", "2.0.0"],
        ["1.0.0-2", "1.0.0-10", "1.0.0-a"],
    ],
)
def test_versions_order_by_semver_precedence(ascending: list[str]) -> None:
    versions = [parse(text) for text in ascending]
    assert sorted(reversed(versions)) == versions
    for lower, higher in itertools.pairwise(versions):
        assert lower < higher
        assert higher > lower
        assert lower <= higher
        assert not higher <= lower
        assert lower != higher


def test_build_metadata_takes_no_part_in_precedence_but_is_printed() -> None:
    a, b = parse("1.14.0+a"), parse("1.14.0+b")
    assert a == b
    assert hash(a) == hash(b)
    assert (str(a), str(b)) == ("1.14.0+a", "1.14.0+b")


@pytest.mark.parametrize(
    ("text", "core", "minor_key", "final"),
    [
        ("v1.14.3", (1, 14, 3), (1, 14), True),
        ("1.14.0-alpha.0", (1, 14, 0), (1, 14), False),
        ("1.14.7+meta", (1, 14, 7), (1, 14), False),
        ("v1.37", (1, 37, 0), (1, 37), True),
    ],
)
def test_a_version_exposes_what_the_rules_compare(
    text: str, core: tuple[int, int, int], minor_key: tuple[int, int], final: bool
) -> None:
    version = parse(text)
    assert version.core == core
    assert version.minor_key == minor_key
    assert version.is_final is final


def test_a_version_is_frozen() -> None:
    version = Version(1, 14, 3)
    with pytest.raises(AttributeError):
        version.major = 2  # type: ignore[misc]


def test_a_version_never_equals_another_type() -> None:
    assert parse("1.14.3") != "1.14.3"
