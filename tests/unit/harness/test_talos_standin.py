"""The stand-in driver's pure parts: each node's record read from the stand-in's log
lines, and the -config it writes from the nodes a test describes."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from tests.harness import certs
from tests.harness.talos_standin import (
    DEFAULT_FACTORY,
    DEFAULT_SCHEMATIC,
    Extension,
    NodeRecord,
    StandinControlError,
    TalosApi,
    TalosNode,
    node_records,
)

IMAGE = f"factory.talos.dev/metal-installer/{DEFAULT_SCHEMATIC}:v1.14.4"
OTHER = "ghcr.io/siderolabs/installer:v1.13.9"


def _line(call: str, node: str | None = "cp-1", **fields: Any) -> dict[str, Any]:
    line: dict[str, Any] = {"time": "2026-01-01T00:00:00Z", "call": call, **fields}
    if node is not None:
        line["node"], line["address"] = node, "10.0.0.1"
    return line


def test_records_follow_each_node_in_order() -> None:
    lines = [
        _line("listening", None, address="127.0.0.1:4000", nodes={}),
        _line("node-metadata", labels={}, annotations={}),
        _line("version", version="v1.14.3"),
        _line("pull", image=IMAGE, namespace="SYSTEM"),
        _line("upgrade", image=IMAGE, count=1, staged="v1.14.4"),
        _line("reboot", actor="a1", mode="DEFAULT"),
        _line("down", actor="a1"),
        _line("boot", version="v1.14.4", previous="v1.14.3"),
        _line("pull", "w-1", image=OTHER),
        # an installer that exits 1 was still asked for: it counts
        _line("upgrade", "w-1", image=OTHER, count=1, error="installer exited 1"),
        _line("upgrade", "cp-1", image=OTHER, count=2, staged="v1.13.9"),
        _line("refused", "w-2", method="/machine.ImageService/Pull", roles=["os:reader"]),
        _line("refused", None, method="/machine.MachineService/Version", roles=[]),
        _line("control", None, id=1, ok=True, state={}),
    ]
    records = node_records(lines)
    assert records == {
        "cp-1": NodeRecord(images=(IMAGE, OTHER), pulls=(IMAGE,), reboots=1, boots=("v1.14.4",)),
        "w-1": NodeRecord(images=(OTHER,), pulls=(OTHER,)),
        "w-2": NodeRecord(refused=("/machine.ImageService/Pull",)),
    }
    assert records["cp-1"].upgrades == 2
    assert records["w-1"].upgrades == 1
    assert NodeRecord().upgrades == 0


def test_records_ignore_what_is_not_a_nodes_line() -> None:
    lines: list[dict[str, Any]] = [
        {"call": "upgrade", "image": IMAGE},  # no node
        {"call": "upgrade", "node": 7, "image": IMAGE},  # not a name
        {"node": "cp-1"},  # no call
        _line("something-new", image=IMAGE),
    ]
    assert node_records(lines) == {"cp-1": NodeRecord()}


def test_a_node_by_default_is_the_plain_schematic_on_metal() -> None:
    settings = TalosNode("cp-1", "10.0.0.1").settings()
    assert settings == {
        "platform": "metal",
        "secureBoot": False,
        "schematic": DEFAULT_SCHEMATIC,
        "factory": DEFAULT_FACTORY,
        "extensions": [],
        "resources": {},
    }
    # its role comes from its Node's label unless given
    assert "controlPlane" not in settings


def test_a_node_of_no_image_factory_and_its_extensions() -> None:
    node = TalosNode(
        "w-1", "10.0.0.2", control_plane=False, platform="aws", secure_boot=True, schematic=None,
        extensions=(Extension("iscsi-tools", "v0.2.0"),), resources={"platformmetadata": "missing"},
    )  # fmt: skip
    settings = node.settings()
    assert settings["schematic"] == ""  # the stand-in's "none"
    assert settings["controlPlane"] is False
    assert settings["secureBoot"] is True
    assert settings["extensions"] == [
        {"name": "iscsi-tools", "version": "v0.2.0", "author": "Sidero Labs", "description": ""}
    ]
    assert settings["resources"] == {"platformmetadata": "missing"}


def _api(tmp_path: Path, **options: Any) -> TalosApi:
    return TalosApi(
        workdir=tmp_path, endpoint_host="127.0.0.1",
        nodes=[TalosNode("cp-1", "10.0.0.1"), TalosNode("w-1", "10.0.0.2", platform="gcp")],
        kubeconfig=tmp_path / "kubeconfig", served_kubeconfig="", **options,
    )  # fmt: skip


def test_the_config_names_every_node_and_the_schematics(tmp_path: Path) -> None:
    schematic = "a" * 64
    api = _api(tmp_path, schematics={schematic: [Extension("zfs", "2.3.3")]}, etcd_rejoin=1.5)
    config = json.loads(json.dumps(api.config()))  # what is written is plain JSON
    assert set(config["nodes"]) == {"cp-1", "w-1"}
    assert config["nodes"]["w-1"]["platform"] == "gcp"
    assert config["schematics"] == {
        schematic: [{"name": "zfs", "version": "2.3.3", "author": "Sidero Labs", "description": ""}]
    }
    assert config["etcdRejoin"] == "1.5s"


def test_control_before_start_says_so(tmp_path: Path) -> None:
    with pytest.raises(StandinControlError, match="is not running"):
        _api(tmp_path).state()


def test_a_talosconfig_carries_the_role_asked(tmp_path: Path) -> None:
    api = _api(tmp_path, authority=certs.Authority.create("talos"))
    for role in ("os:reader", "os:operator", "os:admin"):
        config = api.talosconfig(endpoint="127.0.0.1:1", role=role)
        context = yaml.safe_load(config)["contexts"]["workload"]
        cert = x509.load_pem_x509_certificate(base64.b64decode(context["crt"]))
        name = x509.NameOID.ORGANIZATION_NAME
        assert [a.value for a in cert.subject.get_attributes_for_oid(name)] == [role]
