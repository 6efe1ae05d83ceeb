"""A version field of a TalosCluster never moves back; an unchanged value always passes."""

from __future__ import annotations

import pytest

from ichor.release.refusals import Rule
from ichor.release.steps import VersionFields, check_update
from tests.support import table

OLD = VersionFields(talos="v1.14.3", kubernetes="v1.36.6", contract="v1.14")


def fields(**changes: str) -> VersionFields:
    values = {"talos": OLD.talos, "kubernetes": OLD.kubernetes, "contract": OLD.contract}
    values.update(changes)
    return VersionFields(**values)


@pytest.mark.parametrize(
    "new",
    [
        OLD,
        fields(talos="v1.14.4"),
        fields(talos=table.unknown_talos()),  # unknown minors are not this rule's business
        fields(kubernetes="v1.37.1"),
        fields(kubernetes="v1.38.0"),  # skipping minors is the plan's rule, not admission's
        fields(contract="v1.15"),
        fields(talos="v1.14.3+build.2"),  # same precedence: not a downgrade
    ],
)
def test_an_unchanged_or_newer_value_is_allowed(new: VersionFields) -> None:
    assert check_update(old=OLD, new=new) is None


@pytest.mark.parametrize(
    ("new", "field"),
    [
        (fields(talos="v1.14.2"), "talosVersion"),
        (fields(talos="v1.13.9"), "talosVersion"),
        (fields(talos="v1.14.3-rc.1"), "talosVersion"),  # a pre-release precedes its release
        (fields(kubernetes="v1.36.5"), "kubernetesVersion"),
        (fields(kubernetes="v1.35.9"), "kubernetesVersion"),
        (fields(contract="v1.13"), "versionContract"),
    ],
)
def test_a_downgrade_of_any_version_field_is_refused(new: VersionFields, field: str) -> None:
    refusal = check_update(old=OLD, new=new)
    assert refusal is not None
    assert refusal.rule is Rule.DOWNGRADE
    assert not refusal.overridable
    assert refusal.message.startswith(f"{field} ")
    assert "no downgrade" in refusal.message


def test_a_downgrade_names_the_step() -> None:
    refusal = check_update(old=OLD, new=fields(talos="v1.13.9"))
    assert refusal is not None
    assert refusal.message == (
        "talosVersion v1.13.9 is refused: it is older than v1.14.3 and a version never moves "
        "back (no downgrade), so keep v1.14.3 or choose a newer version."
    )


def test_a_pre_release_may_move_to_its_release() -> None:
    old = fields(talos="v1.14.0-rc.1")
    assert check_update(old=old, new=fields(talos="v1.14.0")) is None


@pytest.mark.parametrize(
    "new",
    [fields(talos="1.14.4"), fields(kubernetes="v1.37"), fields(contract="v1.15.0")],
)
def test_a_changed_value_in_another_form_is_refused_as_form(new: VersionFields) -> None:
    refusal = check_update(old=OLD, new=new)
    assert refusal is not None
    assert refusal.rule is Rule.FORM


def test_an_unchanged_value_in_an_odd_form_never_blocks_an_edit() -> None:
    old = VersionFields(talos="1.14.3", kubernetes="latest", contract="1.14")
    assert check_update(old=old, new=old) is None
    assert check_update(old=old, new=VersionFields("v1.14.2", "v1.36.6", "v1.13")) is None
