"""Each node's own installer: Talos's naming, and the refusals before any node is touched."""

from __future__ import annotations

import pytest

from ichor.upgrade import node_images
from ichor.upgrade.node_images import (
    PLAIN_SCHEMATIC,
    NodeImage,
    NodeReading,
    SchematicRule,
    installer_image,
    plan_images,
)

ISCSI = "a" * 64
NVIDIA = "b" * 64
OTHER = "c" * 64


@pytest.mark.parametrize(
    ("platform", "secure_boot", "expected"),
    [
        # talosctl's own naming (cmd/talosctl/pkg/talos/helpers/image_factory.go) and the
        # v1.13.9 preset test's (configmaker/preset/preset_test.go)
        ("metal", False, f"factory.talos.dev/metal-installer/{ISCSI}:v1.14.4"),
        ("metal", True, f"factory.talos.dev/metal-installer-secureboot/{ISCSI}:v1.14.4"),
        ("aws", False, f"factory.talos.dev/aws-installer/{ISCSI}:v1.14.4"),
        ("gcp", False, f"factory.talos.dev/gcp-installer/{ISCSI}:v1.14.4"),
        ("azure", True, f"factory.talos.dev/azure-installer-secureboot/{ISCSI}:v1.14.4"),
        ("hcloud", False, f"factory.talos.dev/hcloud-installer/{ISCSI}:v1.14.4"),
        ("nocloud", False, f"factory.talos.dev/nocloud-installer/{ISCSI}:v1.14.4"),
    ],
)
def test_the_installer_name_per_platform_and_secure_boot(
    platform: str, secure_boot: bool, expected: str
) -> None:
    assert (
        installer_image(
            factory="factory.talos.dev",
            platform=platform,
            secure_boot=secure_boot,
            schematic=ISCSI,
            version="v1.14.4",
        )
        == expected
    )


def test_the_installer_keeps_the_factory_host_and_one_leading_v() -> None:
    found = installer_image(
        factory="factory.corp.example:5000",
        platform="metal",
        secure_boot=False,
        schematic=ISCSI,
        version="1.14.4",
    )
    assert found == f"factory.corp.example:5000/metal-installer/{ISCSI}:v1.14.4"


def test_the_preset_test_of_talos_v1_13_9_names_the_same_installer() -> None:
    # cmd/talosctl/cmd/mgmt/cluster/create/clusterops/configmaker/preset/preset_test.go
    assert (
        installer_image(
            factory="factory.talos.dev",
            platform="metal",
            secure_boot=True,
            schematic="123schematic123",
            version="9.9.9",
        )
        == "factory.talos.dev/metal-installer-secureboot/123schematic123:v9.9.9"
    )


@pytest.mark.parametrize(
    ("author", "host"),
    [
        ("Image Factory (https://factory.talos.dev)", "factory.talos.dev"),
        ("Image Factory (https://factory.corp.example:8443)", "factory.corp.example:8443"),
        ("Image Factory (https://factory.talos.dev/)", "factory.talos.dev"),
        ("Image Factory", None),
        ("Image Factory (factory.talos.dev)", None),
        ("Image Factory (https://user@evil.example)", None),
        ("", None),
    ],
)
def test_the_factory_host_comes_from_the_schematic_extensions_author(
    author: str, host: str | None
) -> None:
    assert node_images.factory_host(author) == host


def image(
    schematic: str | None = ISCSI,
    *,
    platform: str = "metal",
    secure_boot: bool = False,
    extensions: tuple[str, ...] = ("iscsi-tools",),
    factory: str | None = "factory.talos.dev",
) -> NodeImage:
    return NodeImage(
        platform=platform,
        secure_boot=secure_boot,
        schematic=schematic,
        factory=factory if schematic else None,
        extensions=extensions,
    )


def reading(name: str, found: NodeImage | None, **kw: object) -> NodeReading:
    return NodeReading(name=name, image=found, **kw)  # type: ignore[arg-type]


def plan(readings: list[NodeReading], **kw: object) -> node_images.ImagePlan:
    return plan_images(
        readings,
        version="v1.14.4",
        default_factory="factory.talos.dev",
        **kw,  # type: ignore[arg-type]
    )


def test_each_node_keeps_its_own_schematic_platform_secure_boot_and_factory() -> None:
    found = plan(
        [
            reading("cp-1", image(ISCSI), annotation=ISCSI),
            reading("gpu-1", image(NVIDIA, extensions=("nvidia",), platform="aws")),
            reading("sb-1", image(ISCSI, secure_boot=True)),
            reading("corp-1", image(OTHER, extensions=(), factory="factory.corp:5000")),
            reading("plain-1", image(None, extensions=())),
        ]
    )
    assert found.refusals == ()
    assert {p.name: p.image for p in found.nodes} == {
        "cp-1": f"factory.talos.dev/metal-installer/{ISCSI}:v1.14.4",
        "gpu-1": f"factory.talos.dev/aws-installer/{NVIDIA}:v1.14.4",
        "sb-1": f"factory.talos.dev/metal-installer-secureboot/{ISCSI}:v1.14.4",
        "corp-1": f"factory.corp:5000/metal-installer/{OTHER}:v1.14.4",
        "plain-1": f"factory.talos.dev/metal-installer/{PLAIN_SCHEMATIC}:v1.14.4",
    }
    assert found.changes == ()


def test_a_node_that_cannot_be_read_is_refused_never_given_a_default() -> None:
    found = plan(
        [
            reading("cp-1", image()),
            reading("w-1", None, problem="no platformmetadata (connection refused)"),
        ]
    )
    assert found.nodes == ()
    (refusal,) = found.refusals
    assert refusal.startswith("Node w-1: cannot be read through the Talos API: no platformmetadata")
    assert "then create the operation again" in refusal


def test_an_annotation_that_disagrees_with_the_talos_api_is_refused() -> None:
    found = plan([reading("w-1", image(ISCSI), annotation=NVIDIA)])
    (refusal,) = found.refusals
    assert "disagree" in refusal
    assert ISCSI[:12] in refusal
    assert NVIDIA[:12] in refusal


def test_extensions_from_no_schematic_are_refused_unless_the_spec_names_one() -> None:
    custom = image(None, extensions=("zfs",))
    (refusal,) = plan([reading("w-1", custom)]).refusals
    assert "come from no Image Factory schematic (zfs)" in refusal
    assert "spec.nodeSchematics" in refusal
    named = plan(
        [reading("w-1", custom, labels={"pool": "zfs"})],
        rules=[SchematicRule(match_labels={"pool": "zfs"}, schematic=OTHER)],
    )
    assert named.refusals == ()
    assert named.nodes[0].schematic == OTHER


def test_a_cluster_wide_schematic_that_drops_a_known_extension_is_refused() -> None:
    """The plain schematic carries no extension: spec.schematic set to it (an old
    default) would wipe iscsi-tools from the workers."""
    found = plan(
        [reading("cp-1", image(PLAIN_SCHEMATIC, extensions=())), reading("w-1", image(ISCSI))],
        spec_schematic=PLAIN_SCHEMATIC,
    )
    (refusal,) = found.refusals
    assert refusal.startswith("Node w-1: would lose iscsi-tools to spec.schematic 376567988ad3")
    assert "unset spec.schematic" in refusal


def test_a_cluster_wide_schematic_of_unknown_content_is_a_change_named_from_what_to_what() -> None:
    found = plan([reading("w-1", image(ISCSI)), reading("w-2", image(ISCSI))], spec_schematic=OTHER)
    assert found.refusals == ()
    assert {p.schematic for p in found.nodes} == {OTHER}
    (change,) = found.changes
    assert change == (
        f"Nodes w-1 and w-2: schematic {ISCSI[:12]} (iscsi-tools) -> {OTHER[:12]} "
        "(named by spec.schematic)"
    )


def test_a_label_selector_changes_only_the_nodes_it_picks_first_match_wins() -> None:
    rules = [
        SchematicRule(match_labels={"gpu": "true"}, schematic=NVIDIA),
        SchematicRule(match_labels={"gpu": "true", "zone": "a"}, schematic=OTHER),
    ]
    found = plan(
        [
            reading("cp-1", image(ISCSI), labels={}),
            reading("gpu-1", image(ISCSI), labels={"gpu": "true", "zone": "a"}),
        ],
        rules=rules,
    )
    assert found.refusals == ()
    by_name = {p.name: p for p in found.nodes}
    assert by_name["cp-1"].schematic == ISCSI
    assert not by_name["cp-1"].changes
    assert by_name["gpu-1"].schematic == NVIDIA
    (change,) = found.changes
    assert "Node gpu-1" in change
    assert "(named by spec.nodeSchematics[0])" in change


def test_a_selector_may_drop_extensions_deliberately() -> None:
    found = plan(
        [reading("w-1", image(ISCSI), labels={"role": "plain"})],
        rules=[SchematicRule(match_labels={"role": "plain"}, schematic=PLAIN_SCHEMATIC)],
    )
    assert found.refusals == ()
    assert found.nodes[0].image.endswith(f"/metal-installer/{PLAIN_SCHEMATIC}:v1.14.4")


def test_many_refused_nodes_are_counted_past_five() -> None:
    found = plan([reading(f"w-{i}", None, problem="timeout") for i in range(12)])
    (refusal,) = found.refusals
    assert refusal.startswith("Nodes w-0, w-1, w-2, w-3, w-4 and 7 more: cannot be read")


def test_the_plan_names_changes_and_refusals_from_what_the_last_read_recorded() -> None:
    from ichor.webhook import decisions

    groups = [
        {"platform": "metal", "schematic": ISCSI, "factory": "factory.talos.dev",
         "extensions": ["iscsi-tools"], "nodes": ["w-1", "w-2"]},
        {"platform": "metal", "schematic": PLAIN_SCHEMATIC, "factory": "factory.talos.dev",
         "nodes": ["cp-1"]},
    ]  # fmt: skip
    body = {"spec": {"schematic": OTHER}, "status": {"nodeImages": {"groups": groups}}}
    said = decisions.image_plan_warnings(body, version="v1.14.4")
    assert said == (
        f"extensions change: Nodes w-1 and w-2: schematic {ISCSI[:12]} (iscsi-tools) -> "
        f"{OTHER[:12]} (named by spec.schematic)",
        f"extensions change: Node cp-1: schematic {PLAIN_SCHEMATIC[:12]} (no extensions) -> "
        f"{OTHER[:12]} (named by spec.schematic)",
    )
    body["spec"] = {"schematic": PLAIN_SCHEMATIC}
    (refused,) = decisions.image_plan_warnings(body, version="v1.14.4")
    assert refused.startswith("would be refused: Nodes w-1 and w-2: would lose iscsi-tools")
    assert decisions.image_plan_warnings({"spec": {}}, version="v1.14.4") == ()
    garbage: list[dict[str, object]] = [
        {},
        {"spec": "x"},
        {"spec": {"schematic": OTHER}, "status": {"nodeImages": 5}},
    ]
    for one in garbage:
        decisions.image_plan_warnings(one, version="v1.14.4")  # never raises


def test_the_plan_of_a_single_node_cluster_says_what_goes_down_and_for_how_long() -> None:
    from ichor.webhook import decisions

    one = {"spec": {}, "status": {"nodes": {"count": 1}}}
    (said,) = decisions.image_plan_warnings(one, version="v1.14.4")
    assert said.startswith("a single-node cluster: the node reboots into Talos v1.14.4 and")
    assert "the Kubernetes API and this cluster's etcd are down until it is back" in said
    assert said.endswith("it is not drained (no other node could take its Pods)")
    for count in (2, 0, None, "1"):
        body = {"spec": {}, "status": {"nodes": {"count": count}}}
        assert decisions.image_plan_warnings(body, version="v1.14.4") == ()
    decisions.image_plan_warnings({"spec": {}, "status": {"nodes": 5}}, version="v1")
