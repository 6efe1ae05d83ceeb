"""The Go admission webhook of tests/gotools (controller-runtime), run from the tests.

A minimal TalosCluster webhook as a Go operator would serve it, deciding from the same
table data as Ichor (tests/gotools/compat.json, see ``compat_export``): the benchmark
registers it on the test API server beside Ichor's, and the differential test holds its
verdicts equal to Ichor's decision function. ``running(...)`` starts it on a free
loopback port with the given serving certificate (and, for mutual TLS, the CA and name of
the client certificate it requires), waits until it listens, and stops it on exit;
``configuration(...)`` is the ValidatingWebhookConfiguration that sends it TalosCluster
writes. A missing program is a ``MissingBinaryError`` naming ``make testenv``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ichor.api import kinds
from tests.harness import certs, controlplane
from tests.support import gotools
from tests.support.compat_export import EXPORT

__all__ = ["EXPORT", "PATH", "GoWebhook", "GoWebhookError", "configuration", "running"]

#: Where the program serves the TalosCluster rule.
PATH = "/taloscluster"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0
#: Free ports are picked here and may be taken meanwhile: this many tries.
PORT_TRIES = 5


class GoWebhookError(RuntimeError):
    """The program did not start (its stderr is in the message)."""


@dataclass(frozen=True)
class GoWebhook:
    """A running program: where it listens, and its process."""

    port: int
    files: certs.ServingFiles
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}{PATH}"


def _start(args: list[str], *, port: int, files: certs.ServingFiles, log: Path) -> GoWebhook | str:
    """The started program, or its stderr when it exited before it listened."""
    with log.open("wb") as err:
        process = subprocess.Popen(
            [*args, "-listen", f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            bufsize=0,
            stderr=err,
            env=controlplane.loopback_env(),
        )
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT
    line = b""
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        if process.poll() is not None:
            break
        ready, _, _ = select.select([process.stdout], [], [], 0.1)
        if ready:
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    if line.endswith(b"\n"):
        announced = json.loads(line)
        if announced.get("listening") != f"127.0.0.1:{port}" or announced.get("path") != PATH:
            _stop(process)
            raise GoWebhookError(f"gowebhook announced {announced!r}, not 127.0.0.1:{port}{PATH}")
        return GoWebhook(port=port, files=files, process=process)
    _stop(process)
    return log.read_text(errors="replace").strip() or "no output"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)
    if process.stdout is not None:
        process.stdout.close()


@contextlib.contextmanager
def running(
    *,
    files: certs.ServingFiles,
    workdir: Path,
    table: Path = EXPORT,
    client_ca: Path | None = None,
    client_name: str | None = None,
    http2: bool = False,
) -> Iterator[GoWebhook]:
    """The Go webhook serving ``files`` (its certificate and key) on 127.0.0.1, stopped on
    exit. ``client_ca`` requires a client certificate from that CA, ``client_name`` its
    common name; ``workdir`` receives its stderr (``gowebhook.log``)."""
    args = [
        str(gotools.find("gowebhook")),
        "-cert",
        str(files.cert),
        "-key",
        str(files.key),
        "-table",
        str(table),
    ]
    if client_ca is not None:
        args += ["-client-ca", str(client_ca)]
    if client_name is not None:
        args += ["-client-name", client_name]
    if http2:
        args.append("-http2")
    workdir.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    for _ in range(PORT_TRIES):
        started = _start(
            args, port=controlplane.free_port(), files=files, log=workdir / "gowebhook.log"
        )
        if isinstance(started, GoWebhook):
            break
        failures.append(started)
        if "address already in use" not in started:
            break
    else:
        started = None
    if not isinstance(started, GoWebhook):
        raise GoWebhookError(f"gowebhook did not start: {failures[-1]}")
    try:
        yield started
    finally:
        _stop(started.process)


def configuration(
    webhook: GoWebhook,
    *,
    name: str,
    namespaces: Sequence[str] = (),
    timeout_seconds: int = 10,
) -> dict[str, Any]:
    """A ValidatingWebhookConfiguration sending TalosCluster creates and updates to
    ``webhook``; ``namespaces`` limits it to those namespaces (all when empty)."""
    hook: dict[str, Any] = {
        "name": f"taloscluster.gowebhook.{kinds.GROUP}",
        "clientConfig": {
            "url": webhook.url,
            "caBundle": base64.b64encode(webhook.files.ca.read_bytes()).decode("ascii"),
        },
        "rules": [
            {
                "apiGroups": [kinds.GROUP],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [kinds.Plural.TALOS_CLUSTERS.value],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": timeout_seconds,
        "admissionReviewVersions": ["v1"],
    }
    if namespaces:
        hook["namespaceSelector"] = {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "In",
                    "values": list(namespaces),
                }
            ]
        }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [hook],
    }
