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


def _push(
    registry: images.NodeRegistry, *, binary: str, repository: str, tag: str, path: str
) -> str:
    """A static binary of ``make testenv`` as a FROM-scratch image; the name a Pod pulls."""
    try:
        found = binaries.find(binary)
    except binaries.MissingBinaryError as error:
        _fail_missing(error)
        raise
    started = time.monotonic()
    pushed = images.push_binary_image(
        registry, repository=repository, tag=tag, binary=found, path=path
    )
    record(f"{binary} image", f"{time.monotonic() - started:.1f} s")
    return pushed.reference.replace(registry.host, f"{node.NODE_IP}:{registry.port}", 1)


@pytest.fixture(scope="session")
def pause_image(node_registry: images.NodeRegistry) -> str:
    """The node's sandbox image (containerd's pinned ``sandbox`` names it)."""
    repository, _, tag = node.PAUSE_IMAGE_PATH.partition(":")
    return _push(node_registry, binary="pause", repository=repository, tag=tag, path="/pause")


@pytest.fixture(scope="session")
def helm_image(node_registry: images.NodeRegistry) -> str:
    return _push(
        node_registry, binary="helm", repository="ichor/helm", tag="test",
        path="/usr/local/bin/helm",
    )  # fmt: skip


@pytest.fixture(scope="session")
def talosctl_image(node_registry: images.NodeRegistry) -> str:
    return _push(
        node_registry, binary="talosctl", repository="ichor/talosctl", tag="test",
        path="/usr/local/bin/talosctl",
    )  # fmt: skip


@pytest.fixture(scope="session")
def node_images(pause_image: str, helm_image: str, talosctl_image: str) -> NodeImages:
    return NodeImages(pause=pause_image, helm=helm_image, talosctl=talosctl_image)


@pytest.fixture(scope="session")
def one_node(
    tmp_path_factory: pytest.TempPathFactory,
    node_registry: images.NodeRegistry,
    pause_image: str,
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
