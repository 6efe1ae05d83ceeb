"""The Talos API stand-in (``tests/talos_standin``, a Go program on Talos's machinery API
types that ``make testenv`` builds) as the tests run it.

One process plays the Talos API endpoint of a workload cluster: it answers for every node
the test names (as a control plane's apid routes a call to the node its metadata names),
over mutual TLS with a CA of its own, and moves each workload Node's ``osImage`` when that
node "reboots" into an upgrade. It listens on the machine's loopback; a Pod of the node
reaches it at an address on the node's link (:meth:`tests.harness.node.Node.expose`).

The binary is looked up by a stamp of its sources (as ``hack/testenv/talosctl.sh``
computes it), so a stand-in built from other sources counts as missing: ``make testenv``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from tests.harness import binaries, certs, controlplane

#: The talos module the stand-in (and talosctl) are built from; part of the stamp.
TALOS_VERSION = "v1.13.9"
SOURCES = Path(__file__).resolve().parents[1] / "talos_standin"
BINARY = "talos-standin"
#: The role a talosconfig's client certificate carries (its Organization).
ADMIN_ROLE = "os:admin"
_START_TIMEOUT = 30.0


def stamp() -> str:
    """What ``hack/testenv/talosctl.sh stamp`` prints: a hash of the Talos version and of
    every source file (path and bytes)."""
    digest = hashlib.sha256()
    digest.update(f"talos {TALOS_VERSION}\n".encode())
    files = {p.relative_to(SOURCES).as_posix(): p for p in SOURCES.rglob("*") if p.is_file()}
    for relative in sorted(files):  # byte order, as `LC_ALL=C sort`
        data = files[relative].read_bytes()
        digest.update(f"{hashlib.sha256(data).hexdigest()}  {relative}\n".encode())
    return digest.hexdigest()[:16]


def binary() -> Path:
    path = binaries.testenv_dir() / BINARY / stamp() / BINARY
    if not path.is_file():
        raise binaries.MissingBinaryError(
            f"{BINARY} of these sources is not built (looked for {path}): run `make testenv`;"
            f" it builds it from {SOURCES} in talosctl's wrapper module"
        )
    return path


@dataclass(frozen=True)
class TalosNode:
    """A workload Node the stand-in answers for: its Kubernetes name and the address
    ``talosctl --nodes`` names it by (its InternalIP)."""

    name: str
    address: str


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class TalosApi:
    """``start()``, then ``talosconfig()`` for a Secret; ``calls()`` is what it served."""

    workdir: Path
    #: The endpoint's address as the clients reach it (its serving certificate names it).
    endpoint_host: str
    nodes: Sequence[TalosNode]
    #: The stand-in's own access to the workload API server (reads and patches Nodes).
    kubeconfig: Path
    #: The kubeconfig ``MachineService.Kubeconfig`` hands out (as the clients reach it).
    served_kubeconfig: str
    down: float = 2.0
    boot_old: Sequence[str] = ()
    fail_upgrade: Sequence[str] = ()
    authority: certs.Authority = field(default_factory=lambda: certs.Authority.create("talos"))
    port: int = 0
    _process: subprocess.Popen[str] | None = None
    _lines: list[dict[str, Any]] = field(default_factory=list)
    _reader: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stderr: IO[str] | None = None

    def start(self) -> TalosApi:
        found = binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "ca.crt").write_bytes(self.authority.cert_pem)
        serving = self.authority.issue_server(hosts=[self.endpoint_host, "127.0.0.1"])
        serving.write(cert_path=self.workdir / "server.crt", key_path=self.workdir / "server.key")
        (self.workdir / "served-kubeconfig").write_text(self.served_kubeconfig)
        args = [
            str(found),
            "-listen", "127.0.0.1:0",
            "-ca", str(self.workdir / "ca.crt"),
            "-cert", str(self.workdir / "server.crt"),
            "-key", str(self.workdir / "server.key"),
            "-kubeconfig", str(self.kubeconfig),
            "-serve-kubeconfig", str(self.workdir / "served-kubeconfig"),
            "-down", f"{self.down}s",
        ]  # fmt: skip
        for talos_node in self.nodes:
            args += ["-node", f"{talos_node.name}={talos_node.address}"]
        for name in self.boot_old:
            args += ["-boot-old", name]
        for name in self.fail_upgrade:
            args += ["-fail-upgrade", name]
        self._stderr = (self.workdir / "stderr.log").open("w")
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=controlplane.loopback_env(),
            start_new_session=True,
        )
        assert self._process.stdout is not None
        self._reader = threading.Thread(
            target=self._read, args=(self._process.stdout,), name="talos-standin", daemon=True
        )
        self._reader.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not self.port:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"{BINARY} exited {self._process.returncode} at start: "
                    f"{(self.workdir / 'stderr.log').read_text()[-2000:]}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{BINARY} did not listen within {_START_TIMEOUT} s")
            time.sleep(0.05)
        return self

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                with self._lock:
                    self._lines.append(entry)
                if entry.get("call") == "listening":
                    self.port = int(str(entry["address"]).rsplit(":", 1)[1])

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if process.stdout is not None:
            process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()

    def __enter__(self) -> TalosApi:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def calls(self, call: str | None = None) -> list[dict[str, Any]]:
        """What it served, in order (each a JSON line of its log), or only ``call``'s."""
        with self._lock:
            lines = list(self._lines)
        return [line for line in lines if call is None or line.get("call") == call]

    def log(self) -> str:
        return "\n".join(json.dumps(line) for line in self.calls())

    def talosconfig(
        self,
        *,
        endpoint: str,
        nodes: Iterable[str] = (),
        client: certs.Pem | None = None,
        authority: certs.Authority | None = None,
    ) -> str:
        """A talosconfig for ``endpoint`` (``host:port``) with an ``os:admin`` client
        certificate of this CA (or ``client``), verifying the server with this CA (or
        ``authority``'s)."""
        client = client or self.authority.issue_client(user=ADMIN_ROLE, groups=(ADMIN_ROLE,))
        ca = (authority or self.authority).cert_pem
        context: Mapping[str, Any] = {
            "endpoints": [endpoint],
            "nodes": list(nodes),
            "ca": _b64(ca),
            "crt": _b64(client.cert),
            "key": _b64(client.key),
        }
        return yaml.safe_dump({"context": "workload", "contexts": {"workload": dict(context)}})
