"""Spec fields are written in full, and an upgrade target is a final release."""

from __future__ import annotations

import pytest

from ichor.release.versions import VersionError, check_contract, check_final, check_spec_version


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        ("v1.14.3", "1.14.3"),
        ("v1.14.0-rc.1", "1.14.0-rc.1"),
        ("v1.36.6+meta.1", "1.36.6+meta.1"),
        ("v0.0.0", "0.0.0"),
    ],
)
def test_a_spec_version_is_a_full_vxyz_with_any_pre_release(value: str, printed: str) -> None:
    assert str(check_spec_version(value, field="talosVersion")) == printed


@pytest.mark.parametrize(
    "value",
    [
        "1.14.3",
        "v1.14",
        "v1",
        "v01.14.3",
        "v1.014.3",
        " v1.14.3",
        "v1.14.3 ",
        "v1.14.3-01",
        "v1.14.3-",
        "V1.14.3",
        "vv1.14.3",
        "",
        "latest",
        "v1.14.3.1",
        "v99999999999999999999.0.0",
    ],
)
def test_a_spec_version_in_another_form_is_refused_naming_the_field_and_the_form(
    value: str,
) -> None:
    with pytest.raises(VersionError) as caught:
        check_spec_version(value, field="kubernetesVersion")
    message = str(caught.value)
    assert message.startswith(f"kubernetesVersion {value!r} is not")
    assert "vX.Y.Z" in message
    assert caught.value.field == "kubernetesVersion"


@pytest.mark.parametrize(
    ("value", "pair"), [("v1.14", (1, 14)), ("v1.9", (1, 9)), ("v0.0", (0, 0))]
)
def test_a_contract_is_vxy(value: str, pair: tuple[int, int]) -> None:
    assert check_contract(value) == pair


@pytest.mark.parametrize(
    "value", ["v1.14.0", "1.14", "v1", "v01.14", "v1.014", "v1.14-rc.1", "", " v1.14", "v1.x"]
)
def test_a_contract_in_another_form_is_refused(value: str) -> None:
    with pytest.raises(VersionError, match=r"versionContract .* is not a version contract vX\.Y"):
        check_contract(value)


@pytest.mark.parametrize("value", ["v1.14.3", "v1.37.1", "v0.1.0"])
def test_a_final_target_is_accepted(value: str) -> None:
    assert check_final(value, field="version").tag == value


@pytest.mark.parametrize(
    "value",
    [
        "v1.14.3-rc.1",  # pre-release
        "v1.14.3+build.1",  # build metadata
        "v1.14",  # shorthand
        "1.14.3",  # no leading v
        "v01.14.3",
        " v1.14.3",
        "v1.14.3-",
        "",
        "v18446744073709551616.0.0",
    ],
)
def test_a_target_that_is_not_a_final_vxyz_is_refused(value: str) -> None:
    with pytest.raises(VersionError) as caught:
        check_final(value, field="version")
    assert "a final release vX.Y.Z" in str(caught.value)
    assert repr(value) in str(caught.value)
