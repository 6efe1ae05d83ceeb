"""The node tier: a real one-node Kubernetes (tests/harness/node.py) shared by the tests
that need it, the open registry it pulls from, and the images pushed there.

Started lazily by the first test that asks, once per session. A part ``make testenv``
has not built fails the test with what to build; nothing here is ever skipped.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ichor.testing import binaries, controlplane
from tests.harness import images, node

_figures: dict[str, str] = {}


@dataclass(frozen=True)
class NodeImages:
    """Images in the node's registry, as Pods name them."""

    pause: str
    helm: str
    talosctl: str


def _fail_missing(error: binaries.MissingBinaryError) -> None:
    pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def node_registry() -> Iterator[images.NodeRegistry]:
    try:
        registry = images.NodeRegistry()
    except binaries.MissingBinaryError as error:
        _fail_missing(error)
        raise
    try:
        registry.start()
        yield registry
    finally:
        registry.close()


def push_node_images(registry: images.NodeRegistry, *, node_registry_host: str) -> NodeImages:
    """The pause, helm and talosctl images (static binaries, FROM scratch)."""
    try:
        pause = images.push_binary_image(
            registry,
            repository=node.PAUSE_IMAGE_PATH.split(":")[0],
            tag=node.PAUSE_IMAGE_PATH.split(":")[1],
            binary=binaries.find("pause"),
            path="/pause",
        )
        helm = images.push_binary_image(
            registry,
            repository="ichor/helm",
            tag="test",
            binary=binaries.find("helm"),
            path="/usr/local/bin/helm",
        )
        talosctl = images.push_binary_image(
            registry,
            repository="ichor/talosctl",
            tag="test",
            binary=binaries.find("talosctl"),
            path="/usr/local/bin/talosctl",
        )
    except binaries.MissingBinaryError as error:
        _fail_missing(error)
        raise

    def as_node(pushed: images.Pushed) -> str:
        return pushed.reference.replace(registry.host, node_registry_host, 1)

    return NodeImages(pause=as_node(pause), helm=as_node(helm), talosctl=as_node(talosctl))


@pytest.fixture(scope="session")
def node_images(node_registry: images.NodeRegistry) -> NodeImages:
    return push_node_images(
        node_registry, node_registry_host=f"{node.NODE_IP}:{node_registry.port}"
    )


@pytest.fixture(scope="session")
def one_node(
    tmp_path_factory: pytest.TempPathFactory,
    node_registry: images.NodeRegistry,
    node_images: NodeImages,
) -> Iterator[node.Node]:
    """The shared node: control plane, containerd, kubelet, controller-manager, scheduler
    and kube-proxy, Ready, with the default ServiceAccount."""
    cluster = node.Node(workdir=tmp_path_factory.mktemp("node"), registry_port=node_registry.port)
    try:
        cluster.start()
    except binaries.MissingBinaryError as error:
        _fail_missing(error)
    _figures["node ready"] = f"{cluster.timings.node_ready:.1f} s"
    _figures["default ServiceAccount"] = f"{cluster.timings.service_account:.1f} s"
    try:
        yield cluster
    finally:
        cluster.stop()
        _figures["node stop"] = f"{cluster.timings.stop:.1f} s"


def record(name: str, value: str) -> None:
    """A figure for the end of the run (``node: ...`` in pytest's summary)."""
    _figures[name] = value


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _figures:
        terminalreporter.write_line(
            "node: " + ", ".join(f"{name} {value}" for name, value in _figures.items())
        )


ROOT = Path(__file__).resolve().parents[2]
IMAGE_TIMEOUT = 1200.0


@pytest.fixture(scope="session")
def operator_image(node_registry: images.NodeRegistry) -> str:
    """The operator's image, built from the repository's Dockerfile by ``make image``'s
    script and pushed to the node's registry; returns the name a Pod pulls."""
    script = ROOT / "hack" / "image.sh"
    if not script.exists():
        pytest.fail(f"{script} is missing: the node tests need `make image`", pytrace=False)
    reference = f"{node_registry.host}/ichor/operator:test"
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(script), "build"],
        env=controlplane.loopback_env({"IMAGE_PUSH": reference, "IMAGE": "ichor-operator:test"}),
        capture_output=True,
        text=True,
        timeout=IMAGE_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"`make image` (hack/image.sh build) failed ({result.returncode}):\n"
            f"{result.stderr[-4000:]}",
            pytrace=False,
        )
    record("operator image", f"{time.monotonic() - started:.1f} s")
    return reference.replace(node_registry.host, f"{node.NODE_IP}:{node_registry.port}", 1)
