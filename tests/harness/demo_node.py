"""The node ``make demo`` runs its upgrade Jobs on, held by a process of its own.

The demo leaves everything running when its script ends, but a node
(:class:`tests.harness.node.Node`) lives only as long as the process that started it:
its parts die with that process, its forwarders are that process's threads, and it holds
the machine-wide node lock. So ``make demo`` starts this module as a process
(``python -m tests.harness.demo_node serve``, recorded in the stack's ``state.json`` as
``node``), and ``make demo-down`` stops it with SIGTERM; it then stops everything it
started and leaves nothing behind (:meth:`Node.stop`; ``stack down`` sweeps what a
killed holder left).

What it holds, all of it from the existing harness (no second node starter):

- the node: the management cluster of the demo, where the CRDs, the TalosClusters and the
  operations live and where the executor's Jobs run in Pods (kubelet, containerd, runc);
- the node's open registry with the pause, helm and talosctl images (static binaries of
  ``make testenv`` in ``FROM scratch`` images) and the stand-in Cilium chart the node
  tests own (tests/node/charts/cilium) at the two versions the story needs;
- the Talos API stand-in (tests/talos_standin) that plays the Talos nodes of ``prod``:
  the real talosctl of a Job's container upgrades, reboots and waits on it, and it moves
  the workload Nodes' ``osImage``;
- the forwarders that let the node reach the machine's loopback servers: the workload
  API servers at ``NODE_IP:<port>`` (for Pods) and at ``127.0.0.1:<port>`` inside the
  node's network namespace, where the demo runs the operator; the seeded release-check
  registry and its token server at ``127.0.0.1:<port>`` there too;
- the Helm release of the stand-in Cilium chart in the adopted ``edge`` cluster, which
  the Cilium step's Job upgrades.

It refuses to start without the node's parts or without root: :func:`missing` says what
is missing and what builds it, and the demo stops with that (or runs with played Jobs
when asked to).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.harness import binaries, checkout, controlplane, images, node, talos_standin

#: The stand-in Cilium chart of the node tests; the executor's helm upgrades it for real.
CILIUM_CHART = checkout.ROOT / "tests" / "node" / "charts" / "cilium"
#: Seconds a node start may wait for another run's node to stop (the CI's node tier).
LOCK_WAIT = node.LOCK_WAIT
#: Seconds a stand-in node stays down on reboot.
TALOS_DOWN = 1.0
READY_FILE = "ready.json"
SPEC_FILE = "spec.json"

_NODE_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "kubectl",
    "crane",
    "helm",
    "registry",
    "pause",
    "talosctl",
)


def missing() -> str | None:
    """Why the node cannot start here, as one sentence naming what to build; None when
    every part is present."""
    if os.geteuid() != 0:
        return (
            "the node needs root (a network namespace, cgroups and mounts of its own);"
            " run `make demo` as root"
        )
    try:
        for name in _NODE_BINARIES:
            binaries.find(name)
        node.runc_binary()
        node.cni_dir()
        talos_standin.binary()
    except binaries.MissingBinaryError as error:
        return str(error)
    return None


def _log(message: str) -> None:
    print(f"[demo-node {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _helm(*args: str, scratch: Path) -> str:
    env = controlplane.loopback_env(
        {
            "HELM_CACHE_HOME": str(scratch / "cache"),
            "HELM_CONFIG_HOME": str(scratch / "config"),
            "HELM_DATA_HOME": str(scratch / "data"),
        }
    )
    result = subprocess.run(
        [str(binaries.find("helm")), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise node.NodeError(f"helm {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


class DemoNode:
    """Everything the node side of the demo holds; :meth:`start` then :meth:`stop`."""

    def __init__(self, *, workdir: Path, spec: dict[str, Any]) -> None:
        self.workdir = workdir
        self.spec = spec
        self.registry = images.NodeRegistry(workdir=workdir / "registry")
        self.node: node.Node | None = None
        self.standin: talos_standin.TalosApi | None = None
        self.figures: dict[str, float] = {}

    def start(self) -> dict[str, Any]:
        """Start it all; what the demo needs to know (``ready.json``)."""
        began = time.monotonic()
        self.registry.start()
        images_ = self._push_images()
        charts = self._push_charts()
        self.node = node.Node(
            workdir=self.workdir / "cluster", registry_port=self.registry.port, lock_wait=LOCK_WAIT
        )
        self.node.start()
        self.figures["node ready"] = self.node.timings.node_ready
        self.figures["node lock wait"] = self.node.timings.lock_wait
        cluster = self.node
        # the operator runs in the node's namespace: it reaches these at 127.0.0.1 there
        for port in self.spec["loopback_ports"]:
            cluster.expose(int(port), address="127.0.0.1")
        # the Jobs' Pods reach the workload API servers at the node's address
        for port in self.spec["node_ports"]:
            cluster.expose(int(port))
        self._install_edge_cilium(charts)
        talosconfig = self._start_standin()
        assert cluster.namespace is not None
        self.figures["all ready"] = time.monotonic() - began
        return {
            "server": cluster.server,
            "kubeconfig": str(cluster.kubeconfig),
            "pki": str(cluster.pki),
            "netns": str(cluster.namespace.path),
            "node_name": node.NODE_NAME,
            "node_ip": node.NODE_IP,
            "inside_server": f"https://127.0.0.1:{node.APISERVER_PORT}",
            "helm_image": images_["helm"],
            "talosctl_image": images_["talosctl"],
            "cilium_chart": f"oci://{cluster.registry}/charts/cilium",
            "talosconfig": talosconfig,
            "processes": cluster.process_states(),
            "figures": {name: round(value, 1) for name, value in self.figures.items()},
        }

    def _push_images(self) -> dict[str, str]:
        began = time.monotonic()
        pushed: dict[str, str] = {}
        repository, _, tag = node.PAUSE_IMAGE_PATH.partition(":")
        wanted = [
            ("pause", repository, tag, "/pause"),
            ("helm", "ichor/helm", "demo", "/usr/local/bin/helm"),
            ("talosctl", "ichor/talosctl", "demo", "/usr/local/bin/talosctl"),
        ]
        for binary, repo, version, path in wanted:
            image = images.push_binary_image(
                self.registry, repository=repo, tag=version, binary=binaries.find(binary), path=path
            )
            pushed[binary] = image.reference.replace(
                self.registry.host, f"{node.NODE_IP}:{self.registry.port}", 1
            )
        self.figures["images pushed"] = time.monotonic() - began
        return pushed

    def _push_charts(self) -> str:
        chart = ""
        for version in (self.spec["edge_cilium"], self.spec["cilium_chart_version"]):
            chart = images.push_chart(self.registry, chart=CILIUM_CHART, version=version)
        return chart

    def _install_edge_cilium(self, chart: str) -> None:
        """The adopted cluster's Cilium as a Helm release of the stand-in chart: the
        release the Cilium step's ``helm upgrade`` moves."""
        began = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="ichor-demo-helm-") as scratch:
            _helm(
                "--kubeconfig", self.spec["edge_kubeconfig"], "install", "cilium", chart,
                "--version", self.spec["edge_cilium"], "--namespace", "kube-system",
                "--plain-http", "--wait", "--timeout", "2m",
                scratch=Path(scratch),
            )  # fmt: skip
        self.figures["edge Cilium installed"] = time.monotonic() - began

    def _start_standin(self) -> str:
        """The Talos API stand-in for prod's nodes, at the first control plane node's
        address on the node's link; the talosconfig a Secret holds."""
        assert self.node is not None
        talos = self.spec["talos"]
        endpoint_host = str(talos["endpoint"])
        self.node.add_address(endpoint_host)
        self.standin = talos_standin.TalosApi(
            workdir=self.workdir / "talos-api",
            endpoint_host=endpoint_host,
            nodes=[
                _talos_node(name, address, (talos.get("images") or {}).get(name) or {})
                for name, address in talos["nodes"]
            ],
            schematics={
                schematic: tuple(talos_standin.Extension(**e) for e in extensions)
                for schematic, extensions in (talos.get("schematics") or {}).items()
            },
            kubeconfig=Path(talos["kubeconfig"]),
            served_kubeconfig=str(talos["served_kubeconfig"]),
            down=TALOS_DOWN,
        )
        self.standin.start()
        # open until the node stops, which is the demo's end
        exposed = self.node.expose(self.standin.port, address=endpoint_host)
        return self.standin.talosconfig(endpoint=exposed.endpoint)

    def stop(self) -> None:
        """Stop the stand-in, the node (which leaves nothing) and the registry."""
        if self.standin is not None:
            with contextlib.suppress(Exception):
                self.standin.stop()
        try:
            if self.node is not None:
                self.node.stop()
        finally:
            self.registry.close()


def serve(workdir: Path) -> int:
    """Hold the demo's node until SIGTERM; ``ready.json`` once it is up, or ``failed``
    in it (with the reason) when it could not start."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    spec = json.loads((workdir / SPEC_FILE).read_text())
    held = DemoNode(workdir=workdir, spec=spec)
    ready = workdir / READY_FILE
    try:
        try:
            found = held.start()
        except Exception as error:
            _log(f"the node did not start: {error}")
            ready.write_text(json.dumps({"failed": str(error)}))
            return 1
        ready.write_text(json.dumps(found, indent=2))
        _log(f"ready: {found['figures']}")
        stop.wait()
        _log("stopping")
    finally:
        began = time.monotonic()
        held.stop()
        _log(f"stopped in {time.monotonic() - began:.1f} s")
    return 0


def read_ready(workdir: Path) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = json.loads((workdir / READY_FILE).read_text())
    except (OSError, ValueError):
        return None
    return found


def _talos_node(name: str, address: str, image: Mapping[str, Any]) -> talos_standin.TalosNode:
    """A node of prod as the stand-in plays it: its platform, SecureBoot, schematic,
    factory and extensions, as the demo's spec says (the stand-in's defaults otherwise)."""
    fields: dict[str, Any] = dict(image)
    if "extensions" in fields:
        fields["extensions"] = tuple(talos_standin.Extension(**e) for e in fields["extensions"])
    return talos_standin.TalosNode(name, address, **fields)


def write_spec(
    workdir: Path,
    *,
    loopback_ports: Sequence[int],
    node_ports: Sequence[int],
    edge_kubeconfig: Path,
    edge_cilium: str,
    cilium_chart_version: str,
    talos_kubeconfig: Path,
    talos_served_kubeconfig: str,
    talos_endpoint: str,
    talos_nodes: Sequence[tuple[str, str]],
    talos_images: Mapping[str, Mapping[str, Any]] | None = None,
    talos_schematics: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    spec = {
        "loopback_ports": list(loopback_ports),
        "node_ports": list(node_ports),
        "edge_kubeconfig": str(edge_kubeconfig),
        "edge_cilium": edge_cilium,
        "cilium_chart_version": cilium_chart_version,
        "talos": {
            "kubeconfig": str(talos_kubeconfig),
            "served_kubeconfig": talos_served_kubeconfig,
            "endpoint": talos_endpoint,
            "nodes": [list(pair) for pair in talos_nodes],
            # what each node runs (TalosNode's fields), and each schematic's extensions
            "images": {name: dict(image) for name, image in (talos_images or {}).items()},
            "schematics": {k: [dict(e) for e in v] for k, v in (talos_schematics or {}).items()},
        },
    }
    (workdir / SPEC_FILE).write_text(json.dumps(spec, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.harness.demo_node", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serving = sub.add_parser("serve", help="hold the demo's node until SIGTERM")
    serving.add_argument("--workdir", type=Path, required=True)
    sub.add_parser("check", help="say whether the node's parts are here")
    args = parser.parse_args(argv)
    if args.command == "check":
        reason = missing()
        print(reason or "the node's parts are built")
        return 1 if reason else 0
    return serve(args.workdir)


if __name__ == "__main__":
    sys.exit(main())
