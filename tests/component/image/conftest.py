"""The operator image built from this tree, unpacked to be run by runc, and the chart
installed for it to run against.

The build is ``hack/image.sh`` itself (what ``make image`` runs), with buildah on the base
made from Debian's packages, so the test never asks a registry for the pinned base and
needs no Docker engine; ``make image-base`` installs buildah and runc and caches the base
beforehand. A failed build fails the tests with the script's last lines; nothing skips.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.component.chart import release
from tests.component.image import bundle
from tests.harness import controlplane

ROOT = Path(__file__).resolve().parents[3]
#: The name the test builds under, apart from the one `make image` gives.
TEST_IMAGE = "localhost/ichor-operator:test"
#: A build on a warm base takes one to two minutes on two busy cores.
BUILD_TIMEOUT = 1200

_figures: list[str] = []


def figure(line: str) -> None:
    """A line for the summary at the end of the run (build and start times)."""
    _figures.append(line)


@dataclass(frozen=True)
class Built:
    name: str
    rootfs: Path
    config: bundle.ImageConfig


def host_network() -> dict[str, Any]:
    """What a container network backend would change on the host: ip_forward and the
    iptables chains (none, when iptables is not installed: then nothing can add one)."""
    state: dict[str, Any] = {
        "ip_forward": Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
    }
    save = shutil.which("iptables-save")
    chains: list[str] = []
    if save:
        table = ""
        for line in subprocess.run(
            [save], capture_output=True, text=True, check=True, timeout=30
        ).stdout.splitlines():
            if line.startswith("*"):
                table = line[1:]
            elif line.startswith(":"):
                chains.append(f"{table}/{line[1:].split()[0]}")
    state["iptables chains"] = sorted(chains)
    return state


def _build(workdir: Path) -> Path:
    layout = workdir / "layout"
    log = workdir / "build.log"
    env = dict(
        os.environ,
        IMAGE=TEST_IMAGE,
        IMAGE_ENGINE="buildah",
        IMAGE_BASE="debian",
        IMAGE_OUTPUT=f"oci:{layout}:{TEST_IMAGE}",
    )
    with log.open("w") as sink:
        result = subprocess.run(
            ["bash", str(ROOT / "hack" / "image.sh"), "build"],
            stdout=sink, stderr=subprocess.STDOUT, env=env, timeout=BUILD_TIMEOUT, check=False,
        )  # fmt: skip
    lines = log.read_text(errors="replace").splitlines()
    _figures.extend(line for line in lines if line.startswith("[image "))
    if result.returncode != 0:
        tail = "\n".join(lines[-30:])
        pytest.fail(
            f"hack/image.sh build exited {result.returncode} (log {log}); run `make image-base`"
            f" first if buildah, runc or the base is missing:\n{tail}",
            pytrace=False,
        )
    return layout


@pytest.fixture(scope="package")
def built_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    workdir = tmp_path_factory.mktemp("image")
    before = host_network()
    layout = _build(workdir)
    assert host_network() == before, "the build changed the host's network state"
    started = time.monotonic()
    rootfs = workdir / "rootfs"
    config = bundle.unpack(layout, ref=TEST_IMAGE, rootfs=rootfs)
    figure(f"unpacked into a root filesystem in {time.monotonic() - started:.1f} s")
    shutil.rmtree(layout)
    try:
        yield Built(name=TEST_IMAGE, rootfs=rootfs, config=config)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)


def listen_port(*, avoid: Collection[int] = ()) -> int:
    """A free 127.0.0.1 port below the kernel's ephemeral range.

    The container binds its ports half a minute after they are chosen (the chart is
    installed in between, kopf starts); a port from ``free_port`` (the ephemeral range)
    may meanwhile be handed to another test, or be the source port of a connection, as
    seen once under load. Ports below that range are handed out by neither.
    """
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in random.sample(range(20000, min(low, 32768)), 200):
        if port in avoid:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free 127.0.0.1 port in 20000-32767 after 200 tries")


@pytest.fixture(scope="package")
def webhook_port() -> int:
    return listen_port()


@pytest.fixture(scope="package")
def chart_release(
    control_plane: controlplane.ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
    webhook_port: int,
) -> Iterator[release.Release]:
    """The install page's install with its mutual-TLS flags (as the chart tests install it), its
    webhook at 127.0.0.1:<webhook_port>, where the image's operator listens; one at a time
    runs there."""
    workdir = tmp_path_factory.mktemp("image-release")
    with release.installed(
        control_plane, workdir=workdir, webhook_port=webhook_port, mutual_tls=True
    ) as rel:
        yield rel


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _figures:
        terminalreporter.write_line(f"image: {line}")
