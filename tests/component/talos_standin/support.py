"""What the stand-in's component tests share: a workload API server whose Nodes the
stand-in reads and patches, those Nodes as Talos nodes report themselves, and the real
talosctl run against the stand-in."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.harness import binaries, controlplane, talos_standin
from tests.support import nodes

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
KUBELET = "v1.36.6"
TALOSCTL_TIMEOUT = 240


def workload_plane(workdir: Path) -> Iterator[controlplane.ControlPlane]:
    """A workload API server (its Nodes are cluster-scoped: one per test module)."""
    plane = controlplane.ControlPlane(workdir=workdir)
    try:
        plane.start()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


def create_node(
    plane: controlplane.ControlPlane,
    talos_node: talos_standin.TalosNode,
    *,
    cp: bool,
    talos: str,
) -> None:
    """The Node as a booted Talos node reports itself (made afresh)."""
    labels = {CONTROL_PLANE_LABEL: ""} if cp else {}
    plane.kubectl("delete", "node", talos_node.name, "--ignore-not-found")
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": talos_node.name, "labels": labels},
    }
    plane.kubectl("create", "-f", "-", input=json.dumps(body))
    status = {
        "addresses": [{"type": "InternalIP", "address": talos_node.address}],
        "nodeInfo": nodes.talos_node_info(talos=talos, kubelet=KUBELET),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    plane.kubectl(
        "patch", "node", talos_node.name, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def read_node(plane: controlplane.ControlPlane, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(plane.kubectl("get", "node", name, "-o", "json").stdout)
    return found


def binary_or_fail() -> None:
    try:
        talos_standin.binary()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)


def talosctl_env(config: str, tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "talosconfig"
    path.write_text(config)
    return controlplane.loopback_env({"TALOSCONFIG": str(path), "HOME": str(tmp_path)})


def talosctl_path() -> Path:
    try:
        return binaries.find("talosctl")
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)


def talosctl(config: str, args: Sequence[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The real talosctl (v1.13.9, from the cache) with ``config`` as its talosconfig."""
    return subprocess.run(
        [str(talosctl_path()), *args], env=talosctl_env(config, tmp_path), capture_output=True,
        text=True, timeout=TALOSCTL_TIMEOUT, check=False,
    )  # fmt: skip


def json_documents(text: str) -> list[dict[str, Any]]:
    """The JSON objects ``talosctl get -o json`` prints one after another."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return found
        document, position = decoder.raw_decode(text, position)
        assert isinstance(document, dict), document
        found.append(document)
