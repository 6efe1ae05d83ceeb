"""The Talos API stand-in (``tests/talos_standin``, a Go program on Talos's machinery API
types that ``make testenv`` builds) as the tests run it.

One process plays the Talos API endpoint of a workload cluster: it answers for every node
the test names (as a control plane's apid routes a call to the node its metadata names),
over mutual TLS with a CA of its own, with Talos's own role table. Per node it serves what
the node runs (:class:`TalosNode`: platform, SecureBoot, Image Factory schematic,
extensions) as talosctl reads it, the etcd of the control plane nodes, and the upgrade;
it records each installer a node was asked for (:meth:`TalosApi.records`), and a control
line on its stdin changes a node or an etcd member while it runs (:meth:`TalosApi.set_node`,
:meth:`TalosApi.set_member`, :meth:`TalosApi.state`). It listens on the machine's loopback;
a Pod of the node reaches it at an address on the node's link (``Node.expose``).

The binary is looked up by a stamp of its sources (as ``hack/testenv/talosctl.sh``
computes it), so a stand-in built from other sources counts as missing: ``make testenv``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
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
OPERATOR_ROLE = "os:operator"
READER_ROLE = "os:reader"
#: The Image Factory a node comes from unless told otherwise, and its schematic of no
#: customization (Talos pkg/images/images.go: Factory, DefaultInstallerImageSchematic).
DEFAULT_FACTORY = "https://factory.talos.dev"
DEFAULT_SCHEMATIC = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
#: The resources a node can be told to answer for as missing or unsupported.
RESOURCES = (
    "extensions",
    "platformmetadata",
    "securitystate",
    "imagefactoryschematic",
    "machinestatus",
)
_START_TIMEOUT = 30.0
_CONTROL_TIMEOUT = 30.0


class StandinControlError(RuntimeError):
    """The stand-in refused a control line (its error says why)."""


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
class Extension:
    """A system extension as its manifest names it (Talos extensions.Metadata)."""

    name: str
    version: str
    author: str = "Sidero Labs"
    description: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "version": self.version,
            "author": self.author,
            "description": self.description,
        }


@dataclass(frozen=True)
class TalosNode:
    """A workload Node the stand-in answers for: its Kubernetes name, the address
    ``talosctl --nodes`` names it by (its InternalIP), and what it runs. By default a
    node of the Image Factory's plain schematic on metal without SecureBoot; a control
    plane node when its Node has the control-plane label (``control_plane`` overrides)."""

    name: str
    address: str
    control_plane: bool | None = None
    platform: str = "metal"
    secure_boot: bool = False
    #: The Image Factory schematic it was installed from; None: not from an Image Factory.
    schematic: str | None = DEFAULT_SCHEMATIC
    factory: str = DEFAULT_FACTORY
    extensions: tuple[Extension, ...] = ()
    #: resource (one of RESOURCES) -> "missing" (NotFound) or "unsupported" (its type is
    #: not registered, as on an older Talos)
    resources: Mapping[str, str] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        """The node's entry in the stand-in's -config."""
        found: dict[str, Any] = {
            "platform": self.platform,
            "secureBoot": self.secure_boot,
            "schematic": self.schematic or "",
            "factory": self.factory,
            "extensions": [e.to_json() for e in self.extensions],
            "resources": dict(self.resources),
        }
        if self.control_plane is not None:
            found["controlPlane"] = self.control_plane
        return found


@dataclass(frozen=True)
class NodeRecord:
    """What the stand-in's log says a node was asked and did, in order."""

    #: The installer each LifecycleService.Upgrade that reached the node named.
    images: tuple[str, ...] = ()
    #: Images pulled (ImageService.Pull).
    pulls: tuple[str, ...] = ()
    #: Reboots asked, and the versions it booted.
    reboots: int = 0
    boots: tuple[str, ...] = ()
    #: Methods refused for the node's role (PermissionDenied before the node acted).
    refused: tuple[str, ...] = ()

    @property
    def upgrades(self) -> int:
        """How many upgrade calls reached the node."""
        return len(self.images)


def node_records(lines: Iterable[Mapping[str, Any]]) -> dict[str, NodeRecord]:
    """Each node's record (by node name) from the stand-in's log lines."""
    found: dict[str, dict[str, list[Any]]] = {}
    for line in lines:
        name = line.get("node")
        if not isinstance(name, str):
            continue
        entry = found.setdefault(
            name, {"images": [], "pulls": [], "reboots": [], "boots": [], "refused": []}
        )
        call = line.get("call")
        if call == "upgrade":
            entry["images"].append(str(line.get("image", "")))
        elif call == "pull":
            entry["pulls"].append(str(line.get("image", "")))
        elif call == "reboot":
            entry["reboots"].append(line.get("actor"))
        elif call == "boot":
            entry["boots"].append(str(line.get("version", "")))
        elif call == "refused":
            entry["refused"].append(str(line.get("method", "")))
    return {
        name: NodeRecord(
            images=tuple(entry["images"]),
            pulls=tuple(entry["pulls"]),
            reboots=len(entry["reboots"]),
            boots=tuple(entry["boots"]),
            refused=tuple(entry["refused"]),
        )
        for name, entry in found.items()
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class TalosApi:
    """``start()``, then ``talosconfig()`` for a Secret; ``calls()`` is what it served,
    ``records()`` each node's upgrades, ``state()`` / ``set_node()`` / ``set_member()``
    its control channel."""

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
    #: schematic ID -> the extensions a node boots with after installing it (the plain
    #: schematic has none; an unknown one boots with none and says so in its boot line).
    schematics: Mapping[str, Sequence[Extension]] = field(default_factory=dict)
    #: Seconds after a control plane node's boot until its etcd member is healthy again.
    etcd_rejoin: float = 0.0
    authority: certs.Authority = field(default_factory=lambda: certs.Authority.create("talos"))
    port: int = 0
    _process: subprocess.Popen[str] | None = None
    _lines: list[dict[str, Any]] = field(default_factory=list)
    _reader: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _arrived: threading.Condition | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _stderr: IO[str] | None = None

    def config(self) -> dict[str, Any]:
        """What the stand-in's -config file holds."""
        return {
            "nodes": {n.name: n.settings() for n in self.nodes},
            "schematics": {
                schematic: [e.to_json() for e in extensions]
                for schematic, extensions in self.schematics.items()
            },
            "etcdRejoin": f"{self.etcd_rejoin}s",
        }

    def start(self) -> TalosApi:
        found = binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "ca.crt").write_bytes(self.authority.cert_pem)
        serving = self.authority.issue_server(hosts=[self.endpoint_host, "127.0.0.1"])
        serving.write(cert_path=self.workdir / "server.crt", key_path=self.workdir / "server.key")
        (self.workdir / "served-kubeconfig").write_text(self.served_kubeconfig)
        (self.workdir / "config.json").write_text(json.dumps(self.config(), indent=2))
        args = [
            str(found),
            "-listen", "127.0.0.1:0",
            "-ca", str(self.workdir / "ca.crt"),
            "-cert", str(self.workdir / "server.crt"),
            "-key", str(self.workdir / "server.key"),
            "-kubeconfig", str(self.kubeconfig),
            "-serve-kubeconfig", str(self.workdir / "served-kubeconfig"),
            "-config", str(self.workdir / "config.json"),
            "-down", f"{self.down}s",
        ]  # fmt: skip
        for talos_node in self.nodes:
            args += ["-node", f"{talos_node.name}={talos_node.address}"]
        for name in self.boot_old:
            args += ["-boot-old", name]
        for name in self.fail_upgrade:
            args += ["-fail-upgrade", name]
        self._arrived = threading.Condition(self._lock)
        self._stderr = (self.workdir / "stderr.log").open("w")
        # stdin is the control channel; the stand-in stops when it closes
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
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
                if not isinstance(entry, dict):
                    continue
                with self._lock:
                    self._lines.append(entry)
                    if self._arrived is not None:
                        self._arrived.notify_all()
                if entry.get("call") == "listening":
                    self.port = int(str(entry["address"]).rsplit(":", 1)[1])

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
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

    def records(self) -> dict[str, NodeRecord]:
        """Each node's record so far (by node name), from the log."""
        return node_records(self.calls())

    def record(self, name: str) -> NodeRecord:
        """Node ``name``'s record (empty when the stand-in served it nothing)."""
        return self.records().get(name, NodeRecord())

    def control(self, op: str, node: str = "", **settings: Any) -> dict[str, Any]:
        """Send one control line and return the stand-in's state after it; a refused
        line raises :class:`StandinControlError` with the stand-in's reason."""
        ident = next(self._ids)
        line: dict[str, Any] = {"id": ident, "op": op}
        if node:
            line["node"] = node
        if settings:
            line["set"] = settings
        answer = self._exchange(json.dumps(line), ident)
        if not answer.get("ok"):
            raise StandinControlError(str(answer.get("error")))
        state: dict[str, Any] = answer["state"]
        return state

    def send_raw(self, text: str) -> dict[str, Any]:
        """Write ``text`` as one control line, as it is, and return the stand-in's answer
        line (for tests of the channel itself: garbage, huge lines)."""
        return self._exchange(text, None)

    def _exchange(self, text: str, ident: int | None) -> dict[str, Any]:
        process, arrived = self._process, self._arrived
        if process is None or process.stdin is None or arrived is None:
            raise StandinControlError(f"{BINARY} is not running")
        with self._lock:
            seen = len(self._lines)
        process.stdin.write(text + "\n")
        process.stdin.flush()
        deadline = time.monotonic() + _CONTROL_TIMEOUT
        with arrived:
            while True:
                for entry in self._lines[seen:]:
                    if entry.get("call") == "control" and (
                        ident is None or entry.get("id") == ident
                    ):
                        return entry
                seen = len(self._lines)
                left = deadline - time.monotonic()
                if left <= 0 or process.poll() is not None:
                    raise StandinControlError(f"{BINARY} did not answer control line {text[:200]}")
                arrived.wait(timeout=min(left, 1.0))

    def state(self) -> dict[str, Any]:
        """Every node as the stand-in holds it (by name) and its etcd cluster."""
        return self.control("state")

    def node_state(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.state()["nodes"][name]
        return found

    def set_node(self, name: str, **settings: Any) -> dict[str, Any]:
        """Change what node ``name`` runs, with the stand-in's setting names: platform,
        secureBoot, schematic ("" none), factory, extensions (list of
        :meth:`Extension.to_json`), resources, reachable, ready, controlPlane."""
        return self.control("node", name, **settings)

    def set_member(self, name: str, **settings: Any) -> dict[str, Any]:
        """Change the etcd member of control plane node ``name``: state (healthy, down,
        removed), learner, errors, alarms (NOSPACE, CORRUPT)."""
        return self.control("member", name, **settings)

    def talosconfig(
        self,
        *,
        endpoint: str,
        nodes: Iterable[str] = (),
        client: certs.Pem | None = None,
        authority: certs.Authority | None = None,
        role: str = ADMIN_ROLE,
    ) -> str:
        """A talosconfig for ``endpoint`` (``host:port``) with a client certificate of
        this CA for ``role`` (or ``client``), verifying the server with this CA (or
        ``authority``'s)."""
        client = client or self.authority.issue_client(user=role, groups=(role,))
        ca = (authority or self.authority).cert_pem
        context: Mapping[str, Any] = {
            "endpoints": [endpoint],
            "nodes": list(nodes),
            "ca": _b64(ca),
            "crt": _b64(client.cert),
            "key": _b64(client.key),
        }
        return yaml.safe_dump({"context": "workload", "contexts": {"workload": dict(context)}})
