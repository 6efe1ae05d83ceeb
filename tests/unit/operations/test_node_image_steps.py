"""The named steps of ``plan_images`` (``ichor.upgrade.node_images``), each on its own: a
change to one step fails the test that names it."""

from __future__ import annotations

from ichor.upgrade import node_images
from ichor.upgrade.node_images import PLAIN_SCHEMATIC, NodeImage, NodePlan, NodeReading

ISCSI = "a" * 64
OTHER = "b" * 64
KNOWN = {PLAIN_SCHEMATIC: frozenset[str](), ISCSI: frozenset({"iscsi-tools"})}


def image(
    schematic: str | None = ISCSI, *, extensions: tuple[str, ...] = ("iscsi-tools",)
) -> NodeImage:
    return NodeImage(
        platform="metal",
        secure_boot=False,
        schematic=schematic,
        factory="factory.talos.dev" if schematic else None,
        extensions=extensions,
    )


def planning(spec_schematic: str | None = None) -> node_images._Planning:
    return node_images._Planning(
        version="v1.14.4",
        spec_schematic=spec_schematic,
        rules=(),
        default_factory="default.factory",
        known=KNOWN,
    )


def test__node_plan_refuses_a_node_not_read_first() -> None:
    assert node_images._node_plan(NodeReading(name="w1"), planning()) == (
        "cannot be read through the Talos API: no answer"
    )
    unread = NodeReading(name="w1", problem="timed out", annotation="x")
    assert node_images._node_plan(unread, planning()) == (
        "cannot be read through the Talos API: timed out"
    )
    both = NodeReading(name="w1", image=image(None), annotation=OTHER)  # disagrees, unsourced
    said = node_images._node_plan(both, planning())
    assert isinstance(said, str)
    assert said.startswith("disagree:")
    planned = node_images._node_plan(NodeReading(name="w1", image=image()), planning())
    assert isinstance(planned, NodePlan)
    assert planned.schematic == ISCSI


def test__disagreeing_compares_only_an_annotation_given() -> None:
    assert node_images._disagreeing(None, image()) is None
    assert node_images._disagreeing(ISCSI, image()) is None
    assert node_images._disagreeing("", image(None)) is None
    said = node_images._disagreeing(OTHER, image())
    assert said == (
        "disagree: the Node annotation extensions.talos.dev/schematic names bbbbbbbbbbbb, "
        "the Talos API aaaaaaaaaaaa"
    )


def test__unsourced_refuses_extensions_from_no_schematic_unless_the_spec_names_one() -> None:
    loose = image(None)
    assert node_images._unsourced(loose, target=None) == (
        "run extensions that come from no Image Factory schematic (iscsi-tools)"
    )
    assert node_images._unsourced(loose, target=ISCSI) is None
    assert node_images._unsourced(image(None, extensions=()), target=None) is None
    assert node_images._unsourced(image(), target=None) is None


def test__lost_checks_only_what_spec_schematic_is_known_to_drop() -> None:
    plain = PLAIN_SCHEMATIC
    said = node_images._lost(image(), target=plain, by="spec.schematic", known=KNOWN)
    assert said == (
        "would lose iscsi-tools to spec.schematic 376567988ad3 (it is known to carry no extensions)"
    )
    rule = "spec.nodeSchematics[0]"
    assert node_images._lost(image(), target=plain, by=rule, known=KNOWN) is None
    assert node_images._lost(image(), target=ISCSI, by="spec.schematic", known=KNOWN) is None
    unknown = node_images._lost(image(), target=OTHER, by="spec.schematic", known=KNOWN)
    assert unknown is None  # what the other schematic holds is not known


def test__planned_keeps_the_nodes_own_and_names_a_change() -> None:
    own = node_images._planned("w1", image(), target=None, by=None, plan=planning())
    assert own.image == f"factory.talos.dev/metal-installer/{ISCSI}:v1.14.4"
    assert (own.schematic, own.named_by) == (ISCSI, None)
    changed = node_images._planned(
        "w1", image(), target=OTHER, by="spec.schematic", plan=planning(OTHER)
    )
    assert (changed.schematic, changed.named_by) == (OTHER, "spec.schematic")
    same = node_images._planned("w1", image(), target=ISCSI, by="spec.schematic", plan=planning())
    assert same.named_by is None  # named, but no change
    plain = node_images._planned("w1", image(None, extensions=()), target=None, by=None,
                                 plan=planning())  # fmt: skip
    assert plain.image == f"default.factory/metal-installer/{PLAIN_SCHEMATIC}:v1.14.4"
