"""The named steps of ``versions._strict`` (blang/semver's Parse): the split of the
pre-release and build, and the checks of each."""

from __future__ import annotations

import pytest

from ichor.release import versions


def test_split_meta() -> None:
    assert versions._split_meta("3") == ("3", [], [])
    assert versions._split_meta("3-rc.1") == ("3", ["rc", "1"], [])
    assert versions._split_meta("3+b.5") == ("3", [], ["b", "5"])
    # the build starts at the first +, the pre-release at the first - before it
    assert versions._split_meta("3-a-b+c-d+e") == ("3", ["a-b"], ["c-d+e"])
    assert versions._split_meta("3-") == ("3", [""], [])


@pytest.mark.parametrize(
    ("pre", "why"),
    [
        ([""], "Prerelease is empty"),
        (["01"], 'Numeric PreRelease version must not contain leading zeroes "01"'),
        (["18446744073709551616"], "value out of range"),
        (["a_b"], 'Invalid character(s) found in prerelease "a_b"'),
    ],
)
def test_check_prerelease_refuses(pre: list[str], why: str) -> None:
    with pytest.raises(versions._Reject) as caught:
        versions._check_prerelease(pre)
    assert why in str(caught.value)


def test_check_prerelease_accepts() -> None:
    versions._check_prerelease(["rc", "0", "18446744073709551615", "alpha-1", "x"])


@pytest.mark.parametrize(
    ("build", "why"),
    [([""], "Build meta data is empty"), (["a.b"], "Invalid character(s) found in build meta")],
)
def test_check_build_refuses(build: list[str], why: str) -> None:
    with pytest.raises(versions._Reject) as caught:
        versions._check_build(build)
    assert why in str(caught.value)


def test_check_build_accepts_leading_zeroes() -> None:
    versions._check_build(["001", "sha-1a2b"])


def test_the_patch_is_read_before_the_pre_release() -> None:
    with pytest.raises(versions._Reject) as caught:
        versions._strict("1.2.x-01")
    assert "patch" in str(caught.value)
