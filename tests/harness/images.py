"""The node's registry and the images it serves, made here without pulling anything.

- :class:`NodeRegistry`: the same CNCF distribution registry the release-check tests run
  (``tests.harness.registry``), on the machine's loopback, but open (no token auth): a
  Pod reaches the registry at the node's address, and could not reach a token realm
  that names the machine's 127.0.0.1. containerd and the Pods' helm pull from it through
  the node's forwarder.
- :func:`push_binary_image`: a static binary in a ``FROM scratch`` image (one layer,
  ``crane append --oci-empty-base``, then ``crane mutate`` for the platform and the
  entrypoint), pushed to that registry: the pause image, helm's and talosctl's.
- :func:`push_chart`: a chart folder packaged and pushed as an OCI chart (``helm push``).

It refuses to push anywhere but that loopback registry.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.harness import binaries, controlplane
from tests.harness import registry as test_registry


class ImageError(RuntimeError):
    """An image or chart could not be built or pushed; the message has the tool's output."""


class NodeRegistry(test_registry.LocalRegistry):
    """An open registry (anonymous pull and push) on ``127.0.0.1:<port>``."""

    def _config(self) -> str:
        config: dict[str, Any] = json.loads(super()._config())
        config.pop("auth", None)
        return json.dumps(config, indent=2)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise test_registry.RegistryError(
                    f"registry exited with {self._process.returncode}: {self._log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"GET /v2/ HTTP/1.0\r\nHost: x\r\n\r\n")
                    status_line = sock.recv(64).split(b"\r\n", 1)[0].decode(errors="replace")
                if " 200 " in status_line + " ":
                    return
                last = status_line
            except OSError as error:
                last = str(error)
            time.sleep(0.05)
        raise test_registry.RegistryError(
            f"registry on {self.host} not ready after {timeout} s ({last}): {self._log_tail()}"
        )


def _run(command: list[str], *, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=controlplane.loopback_env(env),
        check=False,
    )
    if result.returncode != 0:
        raise ImageError(
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr or result.stdout}"
        )
    return result.stdout.strip()


def _layer(files: dict[str, Path]) -> bytes:
    """A tar layer with each binary at its path (mode 0755, owned by root)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        dirs: set[str] = set()
        for target in files:
            parts = target.strip("/").split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:depth]))
        for directory in sorted(dirs):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        # an empty /tmp: the Jobs mount an emptyDir there, a plain run gets a folder
        tmp = tarfile.TarInfo("tmp")
        tmp.type = tarfile.DIRTYPE
        tmp.mode = 0o1777
        tar.addfile(tmp)
        for target, source in files.items():
            info = tar.gettarinfo(str(source.resolve()), arcname=target.strip("/"))
            info.mode = 0o755
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with source.resolve().open("rb") as handle:
                tar.addfile(info, handle)
    return buffer.getvalue()


@dataclass(frozen=True)
class Pushed:
    """An image in the registry: as the machine names it and its digest."""

    reference: str
    digest: str


def push_binary_image(
    registry: NodeRegistry,
    *,
    repository: str,
    tag: str,
    binary: Path,
    path: str,
    entrypoint: list[str] | None = None,
) -> Pushed:
    """``FROM scratch`` + ``binary`` at ``path``, entrypoint ``[path]`` (or ``entrypoint``)."""
    crane = str(binaries.find("crane"))
    reference = f"{registry.host}/{repository}:{tag}"
    with tempfile.TemporaryDirectory(prefix="ichor-image-") as scratch:
        layer = Path(scratch) / "layer.tar"
        layer.write_bytes(_layer({path: binary}))
        _run([crane, "append", "--insecure", "--oci-empty-base", "-f", str(layer), "-t", reference])
    entry = ",".join(entrypoint or [path])
    _run(
        [
            crane,
            "mutate",
            "--insecure",
            "--set-platform",
            "linux/amd64",
            "--entrypoint",
            entry,
            "--env",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "--user",
            "65534:65534",
            reference,
        ]
    )
    digest = _run([crane, "digest", "--insecure", reference])
    return Pushed(reference=reference, digest=digest)


def push_chart(
    registry: NodeRegistry, *, chart: Path, version: str, repository: str = "charts"
) -> str:
    """Package ``chart`` at ``version`` (its Chart.yaml's version and appVersion rewritten)
    and push it to ``oci://<registry>/<repository>``; returns its OCI reference on the
    machine (``oci://127.0.0.1:PORT/<repository>/<name>``)."""
    helm = str(binaries.find("helm"))
    with tempfile.TemporaryDirectory(prefix="ichor-chart-") as scratch:
        source = Path(scratch) / chart.name
        shutil.copytree(chart, source)
        meta = yaml.safe_load((source / "Chart.yaml").read_text())
        meta["version"] = meta["appVersion"] = version
        (source / "Chart.yaml").write_text(yaml.safe_dump(meta))
        env = {
            "HELM_CACHE_HOME": f"{scratch}/cache",
            "HELM_CONFIG_HOME": f"{scratch}/config",
            "HELM_DATA_HOME": f"{scratch}/data",
        }
        _run([helm, "package", str(source), "--destination", scratch], env=env)
        archive = Path(scratch) / f"{meta['name']}-{version}.tgz"
        _run(
            [helm, "push", str(archive), f"oci://{registry.host}/{repository}", "--plain-http"],
            env=env,
        )
    return f"oci://{registry.host}/{repository}/{meta['name']}"


def pause_binary() -> Path:
    return binaries.find("pause")
