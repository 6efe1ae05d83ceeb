"""``make demo``: the whole upgrade story on this machine, in one command.

It builds nothing itself (``make testenv`` has built or cached the binaries) and starts,
under the stack name ``demo`` (``$ICHOR_CACHE/stacks/demo``):

- the local control plane (etcd and kube-apiserver on loopback, ``tests.harness.stack``),
  and a second small one that stands for an older running cluster the story adopts;
- the test OCI registry with its token server, seeded with realistic Talos
  (``siderolabs/installer-base``) and Kubernetes (``siderolabs/kubelet``) tag sets: real
  release numbers, ``v``-prefixed and plain, pre-releases among them;
- the CRDs, two users (``nadia`` may start upgrades, ``olivia`` also holds the override
  verb), the operator (``python -m ichor.operator``: the controllers and the admission
  webhook on loopback TLS with a generated certificate) and the webhook configuration.

Then it walks through the story, printing each command before its output and what to
notice after it.

Where the upgrade Jobs run (``ICHOR_DEMO_JOBS``):

- ``node`` (the default): the management cluster is the one-node Kubernetes of the node
  tests (tests/harness/demo_node.py holds it), and the Talos step's and the Cilium step's
  Jobs run there for real: talosctl from the talosctl image against the Talos API
  stand-in, helm from the helm image against the stand-in Cilium chart in the node's
  registry. The operator runs as a process inside the node's network namespace. The
  workload clusters are small API servers of their own (``prod`` and ``edge``) with Node
  objects the demo writes; the Talos API stand-in plays prod's Talos nodes. The auto-patch
  step's Kubernetes Job (``talosctl upgrade-k8s``) needs a real Talos control plane, so
  an admission policy of the demo's refuses that one Job's Pod (its etcd checks run) and
  the demo plays the Job's outcome, and says so. When the node
  cannot start here (no root, a part ``make testenv`` did not build) the demo stops and
  says what to build; it never falls back on its own.
- ``played``: the pre-node demo, for a machine without the node: the workload cluster
  of ``prod`` is the management API server itself, and the demo plays each Job's outcome
  (and the versions the nodes or the DaemonSet then report), saying so at each step.

It leaves everything running and prints the kubeconfig; ``make demo-down``
(``python -m tests.harness.stack down --name demo``) stops the operator, the registry,
the node (its holder process, which leaves no process, mount or network namespace) and
the other API servers, because their pids are recorded in the stack's ``state.json``.
It refuses to run over a demo already running: that one is stopped first, so every run
tells the same story.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ichor.api import kinds, records
from ichor.api.talosoperation import STARTED_BY_LABEL, StartedBy
from ichor.release.release_set import PINNED
from ichor.webhook.configuration import render_configuration, render_mutating_configuration
from tests.harness import (
    account,
    binaries,
    certs,
    checkout,
    controlplane,
    demo_node,
    netns,
    node,
    stack,
    talos_standin,
    workload,
)
from tests.harness import registry as test_registry
from tests.support import credential_files, table

T = TypeVar("T")

STACK = "demo"
#: The demo's copy of the chart's operator ClusterRole, bound to the chart's ServiceAccount.
OPERATOR_ROLE = "ichor-demo-operator-account"
NAMESPACE = "default"
#: The admission policy that keeps auto-patch's upgrade-k8s Pod from being created on the
#: node (the demo plays that one Job): only that container's Pods, only in the namespace.
_NO_UPGRADE_K8S = "ichor-demo-plays-upgrade-k8s"
_NO_UPGRADE_K8S_POD = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": _NO_UPGRADE_K8S},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "!object.spec.containers.exists(c, c.name == 'upgrade-k8s')",
                        "message": "the demo plays this Job: upgrade-k8s needs a real Talos "
                        "control plane",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": _NO_UPGRADE_K8S},
            "spec": {
                "policyName": _NO_UPGRADE_K8S,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
                },
            },
        },
    ],
}
CLUSTER = "prod"
#: The account that reads a cluster without a kubeconfig (the fleet's default).
READER_ACCOUNT = "ichor-reader"
PLAIN_USER = "nadia"
HOLDER = "olivia"
CRDS = checkout.CRDS

TALOS_REPOSITORY = "siderolabs/installer-base"
KUBERNETES_REPOSITORY = "siderolabs/kubelet"
CHART_REPOSITORY = "ichor-dev/charts/ichor"

#: What the workload cluster runs at the start: the release set, with its Cilium.
START_CILIUM = PINNED.cilium_chart
#: Talos the demo's operation moves to (the default choice: the newest 1.14 patch).
TALOS_TARGET = "v1.14.5"
#: The newest Kubernetes patch of the running minor the registry lists: auto-patch's.
KUBERNETES_PATCH = "v1.36.7"
#: A Kubernetes the embedded Cilium does not run (1.20 runs 1.33 to 1.36).
INCOMPATIBLE_KUBERNETES = "v1.37.2"
#: The older cluster the demo adopts: its own small API server, below the release set.
EDGE = "edge"
EDGE_TALOS = "v1.13.9"
EDGE_KUBERNETES = "v1.35.5"
EDGE_CILIUM = "1.19.10"
#: A Kubernetes the chart runs and edge's Cilium does not: the Cilium step comes first.
EDGE_KUBERNETES_TARGET = "v1.36.7"

_WAIT = 90.0

#: ``ICHOR_DEMO_JOBS``: where the upgrade Jobs run.
JOBS_ENV = "ICHOR_DEMO_JOBS"
ON_NODE = "node"
PLAYED = "played"
#: prod's Nodes (name, InternalIP, control plane): on the node the Talos API stand-in
#: answers for them behind the first one's address, on the node's own link.
PROD_NODES = (
    ("prod-cp-1", "10.201.1.21", True),
    ("prod-cp-2", "10.201.1.22", True),
    ("prod-worker-1", "10.201.1.23", False),
)
#: What prod's nodes run (the Talos API stand-in's TalosNode fields): they differ.
STORAGE_SCHEMATIC = "c9078f9419961640c712a8bf2bb9174933dfcf1da383fd8ea2b7dc21493f8bac"
GPU_SCHEMATIC = "0b2b2c0f8a6e1d3b7d1d6d9a4c5e0f3e9d2a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"
PROD_IMAGES: dict[str, dict[str, Any]] = {
    "prod-cp-1": {},
    "prod-cp-2": {"secure_boot": True, "schematic": STORAGE_SCHEMATIC,
                  "extensions": [{"name": "iscsi-tools", "version": "v0.2.0"}]},
    "prod-worker-1": {"platform": "aws", "schematic": GPU_SCHEMATIC,
                      "extensions": [{"name": "nonfree-kmod-nvidia-production",
                                      "version": "570.172.08-v1.14.5"}]},
}  # fmt: skip
#: prod's health check in step 7, and the Node label it refuses.
DEGRADED = "demo.ichor.dev/storage-degraded"
GATE = {
    "name": "storage-ready",
    "apiVersion": "v1",
    "resource": "nodes",
    "expression": (
        f"objects.all(n, !has(n.metadata.labels) || !('{DEGRADED}' in n.metadata.labels))"
    ),
}
#: Seconds the node may take to start, beyond waiting for another run's node to stop.
_NODE_START = 300.0
#: ``helm upgrade`` of the Cilium Job on the node: the node's registry speaks plain HTTP.
_NODE_HELM_ARGS = "--reset-then-reuse-values --wait --timeout 5m --plain-http"


def _played_images() -> dict[str, dict[str, Any]]:
    """``PROD_IMAGES`` as the played reads take them: by address, extension names."""
    found = {}
    for name, address, _ in PROD_NODES:
        image = PROD_IMAGES[name]
        schematic = image.get("schematic", talos_standin.DEFAULT_SCHEMATIC)
        found[address] = {
            "platform": image.get("platform", "metal"),
            "secure_boot": image.get("secure_boot", False),
            "schematic": schematic,
            "factory": "factory.talos.dev" if schematic else None,
            "extensions": [e["name"] for e in image.get("extensions", [])],
        }
    return found


def jobs_mode() -> str:
    """``ICHOR_DEMO_JOBS`` (default ``node``)."""
    mode = os.environ.get(JOBS_ENV, "").strip() or ON_NODE
    if mode not in (ON_NODE, PLAYED):
        raise DemoError(f"{JOBS_ENV}={mode} is refused: use {ON_NODE} (the default) or {PLAYED}")
    return mode


def _patches(minor: str, last: int) -> list[str]:
    return [f"v{minor}.{patch}" for patch in range(last + 1)]


def talos_tags() -> list[str]:
    """Talos releases as installer-base lists them (finals, pre-releases, plain forms)."""
    finals = (
        _patches("1.10", 9)
        + _patches("1.11", 6)
        + _patches("1.12", 11)
        + _patches("1.13", 9)
        + _patches("1.14", 5)
    )
    pre = [
        "v1.14.0-alpha.0",
        "v1.14.0-alpha.1",
        "v1.14.0-beta.0",
        "v1.14.0-rc.0",
        "v1.14.0-rc.1",
        "v1.15.0-alpha.0",
        "v1.15.0-alpha.1",
    ]
    plain = [tag[1:] for tag in _patches("1.14", 5)]
    return finals + pre + plain


def kubernetes_tags() -> list[str]:
    """Kubernetes releases as the kubelet repository lists them."""
    finals = (
        _patches("1.31", 14)
        + _patches("1.32", 11)
        + _patches("1.33", 8)
        + _patches("1.34", 6)
        + _patches("1.35", 5)
        + _patches("1.36", 7)
        + _patches("1.37", 2)
    )
    pre = [
        "v1.37.0-alpha.1",
        "v1.37.0-beta.0",
        "v1.37.0-rc.0",
        "v1.37.0-rc.1",
        "v1.38.0-alpha.0",
        "v1.38.0-alpha.1",
    ]
    plain = [tag[1:] for tag in _patches("1.36", 7)]
    return finals + pre + plain


CHART_TAGS = ["0.1.0"]


class DemoError(RuntimeError):
    """A step did not go as the story says; the message says which and what was seen."""


def _say(text: str = "") -> None:
    print(text, flush=True)


def _wait_for(what: str, probe: Callable[[], T | None], *, within: float = _WAIT) -> T:
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise DemoError(f"{what} did not happen within {within:.0f} s")
        time.sleep(0.25)


# --- the registry, as its own process -------------------------------------------------------


def serve_registry(workdir: Path) -> int:
    """Run the seeded registry until SIGTERM; write ``ready.json`` once it answers."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with test_registry.LocalRegistry(workdir=workdir) as local:
        local.seed(TALOS_REPOSITORY, talos_tags())
        local.seed(KUBERNETES_REPOSITORY, kubernetes_tags())
        local.seed(CHART_REPOSITORY, CHART_TAGS)
        ready = {"url": local.url, "host": local.host, "realm": local.tokens.realm}
        (workdir / "ready.json").write_text(json.dumps(ready))
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


# --- the demo -------------------------------------------------------------------------------


@dataclass
class Ran:
    command: str
    returncode: int
    output: str


class Demo:
    def __init__(self) -> None:
        self.dir = stack.stack_dir(STACK)
        self.started = time.monotonic()
        self.kubectl_binary = binaries.find("kubectl")
        self.state: controlplane.State | None = None
        self.kubeconfig = self.dir / "kubeconfig"
        self.webhook_name = "ichor-webhook"
        self.jobs = jobs_mode()
        #: the management cluster: its API server as this machine reaches it, and its CA
        self.server = ""
        self.pki = self.dir / "pki"
        #: on the node: the API server as the operator reaches it inside the node
        self.inside_server = ""
        self.node_ready: dict[str, Any] = {}
        self.lock_wait = 0.0
        #: kubectl flags for prod's workload cluster (none: the management API server)
        self.prod_config: tuple[str, ...] = ()
        self.prod_server = ""
        self.prod_node_kubeconfig = ""
        self.edge_server = ""
        self.registry_url = ""
        self.registry_ports: tuple[int, int] = (0, 0)
        #: the real Jobs' figures, for the end: (what, seconds)
        self.figures: list[tuple[str, str]] = []

    # -- processes and files ---------------------------------------------------------------

    def env(self) -> dict[str, str]:
        path = os.pathsep.join(
            [str(Path(sys.executable).parent), str(self.kubectl_binary.parent), os.environ["PATH"]]
        )
        return controlplane.loopback_env(
            {
                "KUBECONFIG": str(self.kubeconfig),
                "PATH": path,
                "COLUMNS": "120",
                # helm's own folders inside the demo's (the Cilium step shows its history)
                "HELM_CACHE_HOME": str(self.dir / "helm" / "cache"),
                "HELM_CONFIG_HOME": str(self.dir / "helm" / "config"),
                "HELM_DATA_HOME": str(self.dir / "helm" / "data"),
                "NO_COLOR": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )

    def kubectl(self, *args: str, input: str | None = None) -> str:
        result = subprocess.run(
            [str(self.kubectl_binary), *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise DemoError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def get(self, *args: str) -> dict[str, Any] | None:
        result = subprocess.run(
            [str(self.kubectl_binary), "get", *args, "-o", "json"],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            return None
        found: dict[str, Any] = json.loads(result.stdout)
        return found

    def apply(self, documents: Iterable[dict[str, Any]]) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(list(documents)))

    def spawn(
        self,
        name: str,
        args: Sequence[str],
        env: dict[str, str],
        *,
        grace: float | None = None,
        holds_node: bool = False,
        netns_path: str | None = None,
    ) -> int:
        """Start a process that outlives the demo and record it for ``make demo-down``
        (``grace``: seconds it may take to stop; ``netns_path``: the network namespace it
        runs in). Returns its pid."""
        logs = self.dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{name}.log"

        def enter() -> None:
            if netns_path is not None:
                netns.setns(netns_path)

        with log.open("ab") as sink:
            process = subprocess.Popen(
                [sys.executable, *args],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.dir,
                start_new_session=True,
                preexec_fn=enter if netns_path is not None else None,
            )
        assert self.state is not None
        entry: controlplane.ProcessState = {
            "name": name,
            "pid": process.pid,
            "binary": sys.executable,
            "log": str(log),
        }
        if grace is not None:
            entry["grace"] = grace
        if holds_node:
            entry["holds_node"] = True
        self.state["processes"].append(entry)
        self.save_state()
        return process.pid

    # -- setup ------------------------------------------------------------------------------

    def setup(self) -> None:
        for name in ("etcd", "kube-apiserver", "kubectl", "registry"):
            binaries.find(name)
        if self.jobs == ON_NODE:
            reason = demo_node.missing()
            if reason is not None:
                raise DemoError(
                    f"the node the demo runs its upgrade Jobs on cannot start here: {reason}."
                    f" The demo does not fall back on its own; for the story with played"
                    f" Jobs instead, run `{JOBS_ENV}={PLAYED} make demo`"
                )
        _say("Setting up the demo (the binaries come from `make testenv`, cached)...")
        if stack.load(STACK) is not None:
            stack.down(STACK)
            _say("  a demo from before was still running: stopped it, so this run starts fresh")
        if self.jobs == ON_NODE:
            self.setup_on_node()
        else:
            self.setup_played()
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
        for kind in kinds.Kind:
            self.kubectl(
                "wait",
                "--for=condition=Established",
                f"crd/{kinds.crd_name(kind)}",
                "--timeout=60s",
            )
        _say("  CRDs installed: TalosCluster, TalosOperation, IchorInstallation")
        if self.jobs != ON_NODE:
            self.tenant_account()
        self.users()
        _say(
            f"  users: {PLAIN_USER} (may start upgrades) and {HOLDER} (also holds the RBAC "
            "verb override on talosclusters.ichor.dev)"
        )
        began = time.monotonic()
        self.operator()
        where = " inside the node's network namespace" if self.jobs == ON_NODE else ""
        _say(
            f"  operator running{where} as {account.username()} with the chart's ClusterRole, "
            f"admission webhook registered and answering over mutual TLS ({self._since(began)})"
        )
        self.workload()
        self.edge_workload()
        if self.jobs == ON_NODE:
            _say(
                f"  workload cluster of {CLUSTER}: a small API server of its own "
                f"({self.prod_server}) with 3 Node objects (Talos {PINNED.talos}, kubelet "
                f"{PINNED.kubernetes}) and a cilium DaemonSet (Cilium {START_CILIUM}) that "
                "the demo created"
            )
        else:
            _say(
                "  workload cluster: this same API server, with 3 Node objects (Talos "
                f"{PINNED.talos}, kubelet {PINNED.kubernetes}) and a cilium DaemonSet "
                f"(Cilium {START_CILIUM}) that the demo created; the operator reads it as "
                f"ServiceAccount {NAMESPACE}/{READER_ACCOUNT} (the fleet's default account, "
                f"bound to the chart's {account.TENANT_READER}), never as itself"
            )
        cilium = (
            f"the stand-in Cilium chart's release at {EDGE_CILIUM}, installed with helm"
            if self.jobs == ON_NODE
            else f"a cilium DaemonSet (Cilium {EDGE_CILIUM})"
        )
        _say(
            f"  an older running cluster to adopt later: another small API server "
            f"({self.edge_server}) with 2 Node objects (Talos {EDGE_TALOS}, kubelet "
            f"{EDGE_KUBERNETES}) and {cilium}, also created by the demo"
        )
        began = time.monotonic()
        self.installation()
        _say(
            f"  release check listed the registry into the IchorInstallation ({self._since(began)})"
        )
        self.say_what_is_real()
        _say(f"Ready in {self._since(self.started)}.")

    def say_what_is_real(self) -> None:
        """Which parts are the real thing and which stand in, in plain words."""
        _say("What is real here and what stands in:")
        if self.jobs == ON_NODE:
            _say(
                f"  real: the management cluster is a one-node Kubernetes ({node.NODE_NAME}: "
                "kube-apiserver, etcd, controller-manager, scheduler, kubelet, containerd, "
                "runc), and the Talos and Cilium steps' Jobs run there in Pods: talosctl and "
                "helm, built from their modules, in images in the node's registry"
            )
            _say(
                "  stand-ins: the Talos nodes themselves (a Talos API stand-in answers "
                "talosctl over mutual TLS and moves each Node's osImage when it 'reboots'); "
                "the workload clusters (small API servers whose Node objects the demo wrote, "
                "with no kubelet behind them); the Cilium chart (a stand-in whose DaemonSet "
                "selects no node); and the auto-patch step's Kubernetes Job, whose outcome "
                "the demo plays (talosctl upgrade-k8s needs a real Talos control plane)"
            )
        else:
            _say(
                f"  PLAYED JOBS ({JOBS_ENV}={PLAYED}): no kubelet or Job controller runs, so "
                "no upgrade Job runs: the demo writes each Job's outcome and the versions "
                "the Nodes or the DaemonSet then report. Everything else is real."
            )

    def setup_played(self) -> None:
        """The management cluster is the stack's API server, which is also prod's
        workload cluster; nothing runs the Jobs."""
        began = time.monotonic()
        self.state = stack.up(STACK)
        self.server = self.state["server"]
        _say(f"  control plane: kube-apiserver {self.server} ({self._since(began)})")
        began = time.monotonic()
        self.spawn_registry()
        self.edge_plane()
        self.wait_registry(began)

    def tenant_account(self) -> None:
        """prod names no kubeconfig here: its workload is the management API server, read
        as the ServiceAccount default/default (no controller makes it on this control
        plane), which holds the chart's ichor-tenant-reader, as a platform admin binds it
        (docs/install.md)."""
        self.apply(
            [
                {"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "default", "namespace": NAMESPACE}},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": account.TENANT_READER},
                 "rules": account.tenant_reader_rules()},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": f"{account.TENANT_READER}-{NAMESPACE}-default"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": account.TENANT_READER},
                 "subjects": [{"kind": "ServiceAccount", "name": "default",
                               "namespace": NAMESPACE}]},
            ]
        )  # fmt: skip
        _say(f"  {NAMESPACE}/default reads prod (the chart's {account.TENANT_READER})")

    def setup_on_node(self) -> None:
        """The management cluster is the node (held by ``demo_node``); prod and edge are
        workload API servers of their own, reachable from the node."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state = {
            "server": "",
            "etcd_url": "",
            "kubeconfig": str(self.kubeconfig),
            "ca_file": "",
            "processes": [],
        }
        self.save_state()
        began = time.monotonic()
        self.spawn_registry()
        self.prod_plane()
        self.prod_nodes()
        self.edge_plane()
        self.wait_registry(began)
        began = time.monotonic()
        ready = self.start_node()
        self.node_ready = ready
        self.server = str(ready["server"])
        self.inside_server = str(ready["inside_server"])
        self.pki = Path(str(ready["pki"]))
        self.kubeconfig.write_text(Path(str(ready["kubeconfig"])).read_text())
        assert self.state is not None
        self.state["server"] = self.server
        self.state["ca_file"] = str(self.pki / "ca.crt")
        # the node's parts, recorded before their holder: `demo-down` stops the holder,
        # which stops them, and finds them gone
        holder = next(i for i, p in enumerate(self.state["processes"]) if p["name"] == "node")
        self.state["processes"][holder:holder] = list(ready["processes"])
        self.save_state()
        figures = ready.get("figures") or {}
        waited = float(figures.get("node lock wait", 0.0))
        self.lock_wait = waited
        _say(
            f"  management cluster: the node {node.NODE_NAME}, Ready "
            f"{figures.get('node ready', '?')} s after its start, kube-apiserver {self.server}"
            f" (node and its images {self._since(began)}"
            + (f", of which {waited:.0f} s waiting for another run's node" if waited else "")
            + ")"
        )

    def save_state(self) -> None:
        (self.dir / "state.json").write_text(json.dumps(self.state, indent=2) + "\n")

    def spawn_registry(self) -> None:
        registry_dir = self.dir / "registry"
        registry_dir.mkdir(parents=True, exist_ok=True)
        self.spawn(
            "registry",
            ["-m", "tests.harness.demo", "serve-registry", "--workdir", str(registry_dir)],
            checkout.python_env(controlplane.loopback_env()),
        )

    def wait_registry(self, began: float) -> None:
        ready = _wait_for(
            "the registry's start and seeding",
            lambda: _read_json(self.dir / "registry" / "ready.json"),
        )
        self.registry_url = str(ready["url"])
        self.registry_ports = (
            int(str(ready["host"]).rsplit(":", 1)[1]),
            int(str(ready["realm"]).split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]),
        )
        _say(
            f"  OCI registry {self.registry_url} with token auth, seeded with "
            f"{len(talos_tags())} Talos and {len(kubernetes_tags())} Kubernetes tags "
            f"({self._since(began)})"
        )

    def start_node(self) -> dict[str, Any]:
        """Start the node's holder and wait until it is up; say so while it waits for
        another run's node (one node runs on a machine at a time)."""
        workdir = self.dir / "node"
        prod_port = int(self.prod_server.rsplit(":", 1)[1])
        edge_port = int(self.edge_server.rsplit(":", 1)[1])
        demo_node.write_spec(
            workdir,
            loopback_ports=[prod_port, edge_port, *self.registry_ports],
            node_ports=[prod_port, edge_port],
            edge_kubeconfig=self.dir / EDGE / "kubeconfig",
            edge_cilium=EDGE_CILIUM,
            cilium_chart_version=PINNED.cilium_chart,
            talos_kubeconfig=self.dir / CLUSTER / "kubeconfig",
            talos_served_kubeconfig=self.prod_node_kubeconfig,
            talos_endpoint=PROD_NODES[0][1],
            talos_nodes=[(name, address) for name, address, _ in PROD_NODES],
            talos_images=PROD_IMAGES,
            talos_schematics={
                STORAGE_SCHEMATIC: PROD_IMAGES["prod-cp-2"]["extensions"],
                GPU_SCHEMATIC: PROD_IMAGES["prod-worker-1"]["extensions"],
            },
        )
        pid = self.spawn(
            "node",
            ["-m", "tests.harness.demo_node", "serve", "--workdir", str(workdir)],
            checkout.python_env(controlplane.loopback_env()),
            grace=180.0,
            holds_node=True,
        )
        lock = node.MachineLock()
        told = False
        deadline = time.monotonic() + demo_node.LOCK_WAIT + _NODE_START
        while True:
            found = demo_node.read_ready(workdir)
            if found is not None:
                break
            holder = lock.holder()
            if not told and holder and not holder.startswith(f"process {pid},"):
                _say(
                    f"  waiting for the machine's node lock ({holder}): one node runs on a "
                    "machine at a time; the demo goes on once that run's node has stopped"
                )
                told = True
            if not _alive(pid) or time.monotonic() > deadline:
                found = {"failed": "its holder ended or did not start in time"}
                break
            time.sleep(0.5)
        if "failed" in found:
            log = self.dir / "logs" / "node.log"
            raise DemoError(
                f"the node did not start: {found['failed']}. The end of {log}:\n"
                f"{_tail(log)}\nThe node's parts come from `make testenv`; "
                "`make demo-down` stops what was started"
            )
        return found

    def prod_plane(self) -> None:
        """prod's workload cluster on the node: an API server of its own (the node's own
        API server has a real Node, which is not a Talos node)."""
        plane = workload.WorkloadPlane(workdir=self.dir / CLUSTER, detached=True, daemonsets=False)
        plane.start()
        self.record(plane, CLUSTER)
        self.prod_server = plane.server
        plane.node_server = f"https://{node.NODE_IP}:{plane.server.rsplit(':', 1)[1]}"
        self.prod_node_kubeconfig = plane.node_kubeconfig()
        self.prod_config = ("--kubeconfig", str(plane.kubeconfig))

    def record(self, plane: controlplane.ControlPlane, prefix: str) -> None:
        assert self.state is not None
        for process in plane.state()["processes"]:
            self.state["processes"].append({**process, "name": f"{prefix}-{process['name']}"})
        self.save_state()

    def _since(self, began: float) -> str:
        return f"{time.monotonic() - began:.1f} s"

    def users(self) -> None:
        authority = _authority(self.pki)
        for user in (PLAIN_USER, HOLDER):
            controlplane.write_kubeconfig(
                self.dir / "users" / f"{user}.kubeconfig",
                server=self.server,
                ca_pem=authority.cert_pem,
                user=user,
                client=authority.issue_client(user=user),
            )
        self.apply(_rbac())

    def operator(self) -> None:
        # The operator runs as the chart's ServiceAccount with the chart's ClusterRole,
        # never as the admin: the admin holds every verb and would hide what it lacks.
        on_node = self.jobs == ON_NODE
        identity = account.issue(
            _authority(self.pki),
            # on the node the operator runs inside the node's network namespace, where
            # the API server listens on 127.0.0.1
            server=self.inside_server if on_node else self.server,
            directory=self.dir / "operator",
        )
        self.apply(account.manifests(account.chart_rules(), role=OPERATOR_ROLE))
        files = certs.write_serving_certificate(self.dir / "webhook")
        port = controlplane.free_port()
        env = controlplane.loopback_env(
            {
                "KUBECONFIG": str(identity.kubeconfig),
                "ICHOR_WEBHOOK_CERT": str(files.cert),
                "ICHOR_WEBHOOK_KEY": str(files.key),
                "ICHOR_WEBHOOK_PORT": str(port),
                # mutual TLS: the control plane presents its webhook client certificate
                "ICHOR_WEBHOOK_CLIENT_CA": str(self.pki / "webhook-client-ca.crt"),
                "ICHOR_WEBHOOK_CLIENT_NAMES": controlplane.WEBHOOK_CLIENT,
                "ICHOR_OBSERVE_INTERVAL": "2",
                "ICHOR_BACKOFF_INITIAL": "1",
                "ICHOR_OPERATION_RESYNC": "2",
                "ICHOR_OPERATION_RETRY": "1",
                # as the chart sets it: a cluster without a kubeconfig is read only as an
                # account its spec or the fleet names
                "ICHOR_REQUIRE_SERVICE_ACCOUNT": "true",
                "ICHOR_RELEASE_RETRY": "10",
                # the gate of step 7 stops the operation this long after a node
                "ICHOR_NODE_VERSION_DEADLINE": "20",
                **(self.executor_env() if on_node else {}),
            }
        )
        if not on_node:
            # no kubelet runs the read Jobs: their output is played (played_operator.py)
            env["ICHOR_DEMO_NODE_IMAGES"] = json.dumps(_played_images())
            env = checkout.python_env(env)
        self.spawn(
            "operator",
            ["-m", "ichor.operator" if on_node else "tests.harness.played_operator"],
            env,
            netns_path=str(self.node_ready["netns"]) if on_node else None,
        )
        configuration = render_configuration(
            url=f"https://127.0.0.1:{port}",
            ca_bundle=files.ca.read_bytes(),
            name=self.webhook_name,
        )
        mutating = render_mutating_configuration(
            url=f"https://127.0.0.1:{port}",
            ca_bundle=files.ca.read_bytes(),
            name=self.webhook_name,
        )
        self.apply([dict(mutating), dict(configuration)])
        probe = {
            "apiVersion": kinds.API_VERSION,
            "kind": kinds.Kind.TALOS_CLUSTER.value,
            "metadata": {"name": "probe", "namespace": NAMESPACE},
            "spec": {
                "talosVersion": table.unknown_talos(),
                "kubernetesVersion": "v1.36.6",
                "versionContract": "v1.14",
            },
        }

        def answering() -> bool | None:
            result = subprocess.run(
                [str(self.kubectl_binary), "create", "--dry-run=server", "-f", "-"],
                input=json.dumps(probe),
                capture_output=True,
                text=True,
                env=self.env(),
                timeout=30,
                check=False,
            )
            refused = f"Talos {table.unknown_talos()} is refused"
            return True if refused in result.stderr else None

        _wait_for("the admission webhook's first answer", answering)

    def executor_env(self) -> dict[str, str]:
        """The executor's images and chart in the node's registry, as the Pods pull them."""
        ready = self.node_ready
        return {
            "ICHOR_TALOSCTL_IMAGE": str(ready["talosctl_image"]),
            "ICHOR_HELM_IMAGE": str(ready["helm_image"]),
            "ICHOR_CILIUM_CHART": str(ready["cilium_chart"]),
            "ICHOR_HELM_ARGS": _NODE_HELM_ARGS,
            "ICHOR_NODE_VERSION_DEADLINE": "30",
        }

    def workload(self) -> None:
        if self.jobs != ON_NODE:
            self.prod_nodes()
        # on the node, the Talos API stand-in's talosconfig (endpoint and client
        # certificate); played, one of a throwaway CA nothing dials (the executor still
        # checks it holds inline keys only before it creates the Job)
        talosconfig = (
            str(self.node_ready["talosconfig"])
            if self.jobs == ON_NODE
            else credential_files.text(credential_files.talosconfig())
        )
        secrets = [_secret(f"{CLUSTER}-talosconfig", "talosconfig", talosconfig)]
        if self.jobs != ON_NODE:
            # prod is this API server: read as an account of its namespace, which a
            # platform admin makes and binds (no controller-manager runs here to make
            # the namespace's `default` one)
            self.apply(_reader_account())
        if self.jobs == ON_NODE:
            # the operator reads prod's workload cluster at the node's address
            secrets.append(
                _secret(f"{CLUSTER}-kubeconfig", "kubeconfig", self.prod_node_kubeconfig)
            )
        self.apply(secrets)

    def prod_nodes(self) -> None:
        """prod's Node objects and cilium DaemonSet (on the node before the Talos API
        stand-in starts: it reads the Nodes it plays)."""
        config = self.prod_config
        for name, address, control_plane in PROD_NODES:
            labels = {"node-role.kubernetes.io/control-plane": ""} if control_plane else {}
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
            }
            self.kubectl(*config, "apply", "-f", "-", input=json.dumps(body))
            self.set_node(
                name,
                talos=PINNED.talos,
                kubelet=PINNED.kubernetes,
                address=address,
                kubeconfig=config,
            )
        daemonset = json.dumps(_cilium_daemonset(START_CILIUM))
        self.kubectl(*config, "apply", "-f", "-", input=daemonset)

    def edge_plane(self) -> None:
        """Another API server, the workload cluster of the adopted ``edge``; on the node
        with the DaemonSet controller, so the Cilium Job's ``helm --wait`` sees a rollout."""
        plane: controlplane.ControlPlane
        if self.jobs == ON_NODE:
            plane = workload.WorkloadPlane(workdir=self.dir / EDGE, detached=True).start()
            port = plane.server.rsplit(":", 1)[1]
            plane.node_server = f"https://{node.NODE_IP}:{port}"
            # what the Secret of an adopted edge holds on the node (see step 9)
            (self.dir / EDGE / "node.kubeconfig").write_text(plane.node_kubeconfig())
        else:
            plane = controlplane.ControlPlane(workdir=self.dir / EDGE, detached=True).start()
        self.record(plane, EDGE)
        self.edge_server = plane.server

    def edge_workload(self) -> None:
        config = ("--kubeconfig", str(self.dir / EDGE / "kubeconfig"))
        for index, name in enumerate(("edge-cp-1", "edge-worker-1")):
            labels = {"node-role.kubernetes.io/control-plane": ""} if index == 0 else {}
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
            }
            self.kubectl(*config, "apply", "-f", "-", input=json.dumps(node))
            self.set_node(
                name,
                talos=EDGE_TALOS,
                kubelet=EDGE_KUBERNETES,
                address=f"10.6.0.{index + 2}",
                kubeconfig=config,
            )
        if self.jobs != ON_NODE:
            # on the node, a Helm release of the stand-in chart (demo_node installed it)
            daemonset = json.dumps(_cilium_daemonset(EDGE_CILIUM))
            self.kubectl(*config, "apply", "-f", "-", input=daemonset)

    def set_node(
        self,
        name: str,
        *,
        talos: str,
        kubelet: str,
        address: str | None = None,
        kubeconfig: tuple[str, ...] = (),
    ) -> None:
        status: dict[str, Any] = {
            "nodeInfo": _node_info(talos=talos, kubelet=kubelet),
            # as a kubelet reports a healthy node (auto-patch waits for every Node Ready)
            "conditions": [_node_ready()],
        }
        if address is not None:
            status["addresses"] = [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ]
        self.kubectl(
            *kubeconfig, "patch", "node", name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}),
        )  # fmt: skip

    def installation(self) -> None:
        self.apply(
            [
                {
                    "apiVersion": kinds.API_VERSION,
                    "kind": kinds.Kind.ICHOR_INSTALLATION.value,
                    "metadata": {"name": kinds.INSTALLATION_NAME},
                    "spec": {
                        # the fleet's default account, for a cluster without a kubeconfig
                        # (played, prod; on the node every cluster has a kubeconfig)
                        "defaultServiceAccountName": READER_ACCOUNT,
                        "releaseCheck": {
                            "enabled": True,
                            "interval": "6h",
                            "talosRepository": f"{self.registry_url}/{TALOS_REPOSITORY}",
                            "kubernetesRepository": f"{self.registry_url}/{KUBERNETES_REPOSITORY}",
                            "chartRepository": f"{self.registry_url}/{CHART_REPOSITORY}",
                        },
                    },
                }
            ]
        )

        def listed() -> bool | None:
            body = self.get(
                f"{kinds.Plural.ICHOR_INSTALLATIONS}.{kinds.GROUP}", kinds.INSTALLATION_NAME
            )
            found = ((body or {}).get("status") or {}).get("upgradeTargets") or {}
            return True if found.get("talos") and found.get("kubernetes") else None

        _wait_for("the release check's first listing", listed)

    # -- the story --------------------------------------------------------------------------

    def run(self, command: str, *, expect: int = 0, display: str | None = None) -> Ran:
        _say(f"$ {display or command}")
        result = subprocess.run(
            command,
            shell=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env(),
            cwd=self.dir,
            timeout=300,
            check=False,
        )
        text = result.stdout.rstrip()
        if text:
            _say(text)
        if result.returncode != 0:
            _say(f"(exit {result.returncode})")
        if result.returncode != expect:
            raise DemoError(f"`{command}` exited with {result.returncode}, expected {expect}")
        return Ran(command=command, returncode=result.returncode, output=text)

    def step(self, number: int, title: str) -> None:
        _say()
        _say(f"=== Step {number}: {title}")

    def notice(self, text: str) -> None:
        _say(f"--> Notice: {text}")

    def cluster(self, name: str = CLUSTER) -> dict[str, Any]:
        found = self.get(f"{kinds.Plural.TALOS_CLUSTERS}.{kinds.GROUP}", name, "-n", NAMESPACE)
        return found or {}

    def wait_cluster(
        self, what: str, check: Callable[[dict[str, Any]], bool], *, name: str = CLUSTER
    ) -> None:
        _wait_for(what, lambda: True if check(self.cluster(name)) else None)

    def follow_played(self, command: str, *, type_: str, after: Callable[[], None]) -> str:
        """Run ``command`` (with ``--wait``) while playing its operation's Job to success."""
        played: list[str] = []

        def play() -> None:
            operation = _wait_for(f"the {type_} operation", lambda: self._newest_operation(type_))
            played.append(self.play_job(operation, after=after))

        player = threading.Thread(target=_capture(play, played), daemon=True)
        player.start()
        self.run(command)
        player.join(30)
        if not played or played[-1].startswith("error:"):
            raise DemoError(f"the demo could not play the Job: {played}")
        return played[-1]

    def follow_nodes_played(self, command: str, *, expect: int = 0) -> str:
        """Run ``command`` (a Talos upgrade with ``--wait``) while playing each node's Job
        of its operation to success, the Node reporting the target first."""
        played: list[str] = []
        began = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

        def play() -> None:
            operation = _wait_for(
                "the talos operation", lambda: self._newest_operation("talos", since=began)
            )
            path = f"{kinds.Plural.TALOS_OPERATIONS}.{kinds.GROUP}"
            done: set[str] = set()
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                body = self.get(path, operation, "-n", NAMESPACE) or {}
                status = body.get("status") or {}
                if status.get("phase") in ("Succeeded", "Failed"):
                    return
                job = str(status.get("jobName") or "")
                found = self.get("job", job, "-n", NAMESPACE) if job else None
                if found is not None and job not in done:
                    name = (found["metadata"].get("annotations") or {}).get("ichor.dev/node")
                    if name:
                        self.set_node(
                            name, talos=TALOS_TARGET, kubelet=PINNED.kubernetes,
                            kubeconfig=self.prod_config,
                        )  # fmt: skip
                    self._complete(job)
                    done.add(job)
                    played.append(job)
                time.sleep(0.5)

        player = threading.Thread(target=_capture(play, played), daemon=True)
        player.start()
        self.run(command, expect=expect)
        player.join(30)
        if not played or played[-1].startswith("error:"):
            raise DemoError(f"the demo could not play the nodes' Jobs: {played}")
        return played[-1]

    def _complete(self, job: str) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.kubectl(
            "patch", "job", job, "-n", NAMESPACE, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"startTime": now, "active": 1, "ready": 0}}),
        )  # fmt: skip
        done = {
            "active": 0,
            "ready": 0,
            "terminating": 0,
            "succeeded": 1,
            "completionTime": now,
            "uncountedTerminatedPods": {},
            "conditions": [_condition("SuccessCriteriaMet", now), _condition("Complete", now)],
        }
        self.kubectl(
            "patch", "job", job, "-n", NAMESPACE, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": done}),
        )  # fmt: skip

    def play_job(self, operation: str, *, after: Callable[[], None]) -> str:
        """Play the Job of ``operation`` to success as the Job controller would (on the
        node, where the Job controller runs and has started it, only its end)."""
        path = f"{kinds.Plural.TALOS_OPERATIONS}.{kinds.GROUP}"

        def job_name() -> str | None:
            body = self.get(path, operation, "-n", NAMESPACE) or {}
            name = (body.get("status") or {}).get("jobName")
            if name and self.get("job", str(name), "-n", NAMESPACE) is not None:
                return str(name)
            return None

        job = _wait_for(f"the Job of {operation}", job_name)
        time.sleep(1.0)  # let `--wait` show Running first
        after()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if self.jobs != ON_NODE:
            self.kubectl(
                "patch", "job", job, "-n", NAMESPACE, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"startTime": now, "active": 1, "ready": 0}}),
            )  # fmt: skip
        done = {
            "active": 0,
            "ready": 0,
            "terminating": 0,
            "succeeded": 1,
            "completionTime": now,
            "uncountedTerminatedPods": {},
            "conditions": [
                _condition("SuccessCriteriaMet", now),
                _condition("Complete", now),
            ],
        }
        self.kubectl(
            "patch", "job", job, "-n", NAMESPACE, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": done}),
        )  # fmt: skip
        return job

    def story(self) -> None:
        admin = "ichor"
        nadia = f"ichor --kubeconfig users/{PLAIN_USER}.kubeconfig"
        olivia = f"ichor --kubeconfig users/{HOLDER}.kubeconfig"

        self.step(1, "What this build installs")
        self.run(f"{admin} version")
        self.notice(
            "the release set decides a first install only; after it, each component "
            "upgrades on its own."
        )

        self.step(2, "A cluster created with `ichor init`")
        self.run(f"{admin} init staging --kubernetes-version {INCOMPATIBLE_KUBERNETES}", expect=1)
        self.notice("init takes the release set and nothing else: another version is an upgrade.")
        if self.jobs == ON_NODE:
            self.run(
                f"{admin} init {CLUSTER} --talosconfig-secret {CLUSTER}-talosconfig "
                f"--kubeconfig-secret {CLUSTER}-kubeconfig"
            )
            here = "prod's own API server, its Node objects and cilium DaemonSet"
        else:
            self.run(f"{admin} init {CLUSTER} --talosconfig-secret {CLUSTER}-talosconfig")
            here = "this API server's Node objects and cilium DaemonSet"
        self.notice(
            "the TalosCluster holds the release set; the operator now reads the workload "
            f"cluster (here: {here})."
        )

        self.wait_cluster(
            "the controller's first status of prod",
            lambda body: bool(
                (
                    ((body.get("status") or {}).get("upgradeChoices") or {}).get("kubernetes") or {}
                ).get("default")
            ),
        )
        self.step(3, "`kubectl get talosclusters` answers: what can I upgrade to?")
        self.run("kubectl get talosclusters")
        self.notice(
            "the observed versions come from the Nodes and the cilium DaemonSet; the "
            "upgrade columns are the default choices computed from the recorded releases."
        )

        self.step(4, "The Kubernetes choices, and why the newer ones are not offered")
        self.run(f"{admin} upgrade kubernetes {CLUSTER} --list")
        self.notice(
            "the registry lists Kubernetes up to v1.37.2 (plus pre-releases and plain tags, "
            "which are never offered); v1.37 is held back by Cilium, and the line says the step."
        )

        self.step(5, f"An incompatible target, refused for an ordinary user ({PLAIN_USER})")
        self.run(f"{nadia} upgrade kubernetes {CLUSTER} {INCOMPATIBLE_KUBERNETES}", expect=1)
        self.notice(
            "the server's plan (a dry-run create) refused it, naming the Cilium order and the "
            "step: Cilium 1.20.4 does not run Kubernetes 1.37, and only a newer Ichor ships a "
            "Cilium that does. The refusal is overridable, so the hint names --override."
        )
        self.run(
            f"{nadia} upgrade kubernetes {CLUSTER} {INCOMPATIBLE_KUBERNETES} --override", expect=1
        )
        self.notice(f"--override needs the RBAC verb, which {PLAIN_USER} does not hold.")

        self.step(6, f"The same target, passed by an admin ({HOLDER}) with --override")
        ran = self.run(
            f"{olivia} upgrade kubernetes {CLUSTER} {INCOMPATIBLE_KUBERNETES} --override"
        )
        created = re.search(r"TalosOperation \S+/(\S+) created", ran.output)
        if created is None:
            raise DemoError("the override did not create an operation")
        name = created[1]

        def recorded() -> bool | None:
            # the operator posts the webhook's record once it sees the stored operation
            found = self.get("talosoperation", name, "-n", NAMESPACE)
            annotations = ((found or {}).get("metadata") or {}).get("annotations") or {}
            return True if records.RECORDS not in annotations else None

        _wait_for("the operator's Override Event", recorded)
        self.run("kubectl get events --field-selector reason=Override")
        self.notice(
            "the override is recorded as a Warning Event on the TalosCluster, naming the user "
            "and the refusal passed."
        )
        self.run(f"kubectl delete talosoperation {created[1]}")
        self.notice(
            "the demo withdraws that operation here (its Job goes with it): a cluster should "
            "not run Kubernetes 1.37 under Cilium 1.20."
        )

        self.step(7, "An operation followed to Succeeded")
        _say(
            "(prod's nodes differ, as a real cluster's do: prod-cp-1 on metal from the Image "
            "Factory's plain schematic, prod-cp-2 a SecureBoot node with iscsi-tools, "
            "prod-worker-1 on aws with NVIDIA drivers. The operation reads each through the "
            "Talos API and gives each its own installer; it goes node by node and checks "
            "the cluster between nodes, its own health checks among them.)"
        )
        self.kubectl(
            "patch", f"{kinds.Plural.TALOS_CLUSTERS}.{kinds.GROUP}", CLUSTER, "-n", NAMESPACE,
            "--type=merge", "-p", json.dumps({"spec": {"autoPatch": {"healthChecks": [GATE]}}}),
        )  # fmt: skip
        _say(
            f"(prod has a health check, {GATE['name']}: no Node may carry the label "
            f"{DEGRADED}. The demo puts it on prod-worker-1 now, as a storage system that "
            "lost a replica would; the operation asks the check after its first node.)"
        )
        self.kubectl(*self.prod_config, "label", "node", "prod-worker-1", f"{DEGRADED}=true")
        if self.jobs == ON_NODE:
            self.run(f"{admin} upgrade talos {CLUSTER} --wait", expect=1)
        else:
            self.follow_nodes_played(f"{admin} upgrade talos {CLUSTER} --wait", expect=1)
        stopped = self._newest_operation("talos")
        self.run(f"kubectl get talosoperation {stopped} -o jsonpath='{{.status.message}}'; echo")
        self.notice(
            "the gate stopped the operation after its first node: prod-cp-1 runs the new "
            "Talos, the others were not touched, and the message names the check, the node "
            "reached and the step. A person's operation is gated like an auto-patch one."
        )
        self.kubectl(*self.prod_config, "label", "node", "prod-worker-1", f"{DEGRADED}-")
        _say("(The storage recovered: the demo removes the label. Run it again.)")
        if self.jobs == ON_NODE:
            _say(
                f"(Each node's Job runs for real on the node {node.NODE_NAME}: talosctl "
                "upgrade with that node's own installer, in a Pod from the talosctl image, "
                "against the Talos API stand-in that plays prod's Talos nodes and moves each "
                "Node's osImage when it reboots.)"
            )
            began = time.monotonic()
            self.run(f"{admin} upgrade talos {CLUSTER} --wait")
            job = self.real_job("talos", began=began, what="Talos")
            self.run(
                f"kubectl --kubeconfig {CLUSTER}/kubeconfig get nodes -o custom-columns="
                "NAME:.metadata.name,OS-IMAGE:.status.nodeInfo.osImage,"
                "KUBELET:.status.nodeInfo.kubeletVersion"
            )
        else:
            _say(
                "(No kubelet or Job controller runs here: the demo plays each node's Job, "
                f"success, and that Node then reports Talos {TALOS_TARGET}, as talosctl upgrade "
                "would leave it; the read Jobs' output is played too.)"
            )
            job = self.follow_nodes_played(f"{admin} upgrade talos {CLUSTER} --wait")
        self.wait_cluster(
            f"Talos {TALOS_TARGET} observed",
            lambda body: (body.get("status") or {}).get("talosVersion") == TALOS_TARGET,
        )
        self.run(f"kubectl get talosclusters {CLUSTER} -o wide")
        self.run(f"{admin} status {CLUSTER}")
        outcome = (
            f"Job {job} ran talosctl upgrade in its Pod and the stand-in's Nodes now report "
            f"Talos {TALOS_TARGET}"
            if self.jobs == ON_NODE
            else f"the demo played the nodes' Jobs, the last {job}, as succeeded"
        )
        self.notice(
            f"without VERSION the default choice ({TALOS_TARGET}, the newest patch) was used; "
            f"prod-cp-1, already on it, was checked and not rebooted again; each node got its "
            f"own image (IMAGES: 3 images); {outcome}, and the executor moved the cluster's "
            "spec to the new version."
        )

        self.step(8, "The path to the newest recorded releases")
        self.run(f"{admin} upgrade plan {CLUSTER}", expect=1)
        self.notice(
            "no order of upgrades reaches Kubernetes v1.37.2 with this build, and the plan says "
            "why (exit 1: the goal is not reached); it lists what the rules do reach instead, "
            "as commands. Nothing is run."
        )

        self.step(9, "An older cluster, adopted as it runs")
        _say(
            f"(Its workload cluster is another small API server of the demo: Node objects on "
            f"Talos {EDGE_TALOS} and Kubernetes {EDGE_KUBERNETES}, and Cilium {EDGE_CILIUM}.)"
        )
        self.run(f"{admin} adopt {EDGE} --workload-kubeconfig {EDGE}/kubeconfig")
        self.notice(
            "adopt read the versions from the running cluster and took them as they are: "
            "older than the release set is no reason to refuse; the kubeconfig went into a Secret."
        )
        if self.jobs == ON_NODE:
            _say(
                "(A stand-in arrangement: the Jobs' Pods run inside the node's network "
                f"namespace, where this API server is at {node.NODE_IP}, the node's forwarder "
                "to it, not at the machine's 127.0.0.1 that adopt read; the demo points the "
                "Secret there. On a real network one address serves both.)"
            )
            self.run(
                f"kubectl patch secret {EDGE}-kubeconfig --type=merge -p "
                f'"{{\\"data\\":{{\\"kubeconfig\\":\\"$(base64 -w0 {EDGE}/node.kubeconfig)\\"}}}}"'
            )
        self.wait_cluster(
            f"Cilium {EDGE_CILIUM} observed on {EDGE}",
            lambda body: (
                ((body.get("status") or {}).get("cni") or {}).get("detectedVersion") == EDGE_CILIUM
            ),
            name=EDGE,
        )

        self.step(10, "A Cilium-order refusal that names the step")
        self.run(f"{admin} upgrade kubernetes {EDGE} {EDGE_KUBERNETES_TARGET}", expect=1)
        self.notice(
            f"Cilium {EDGE_CILIUM} does not run Kubernetes 1.36 and the chart this Ichor embeds "
            f"({PINNED.cilium_chart}) does, so the refusal says to upgrade Cilium first."
        )
        self.run(f"{admin} upgrade plan {EDGE}", expect=1)
        self.notice(
            "the plan puts the Cilium step where the next Kubernetes minor needs it; each step "
            "is the exact command, and every one passes the rules at its turn (exit 1: the "
            "newest releases themselves are out of reach)."
        )

        self.step(11, "The Cilium step, followed to Succeeded")
        if self.jobs == ON_NODE:
            _say(
                f"(The Job runs for real on the node {node.NODE_NAME}: helm from the helm "
                f"image upgrades edge's Cilium release to the stand-in chart {PINNED.cilium_chart}"
                " from the node's registry, and waits for its DaemonSet to roll out.)"
            )
            began = time.monotonic()
            self.run(f"{admin} cni upgrade {EDGE} --wait")
            job = self.real_job("cni", began=began, what="Cilium")
            self.run(f"kubectl logs job/{job}")
            self.run(f"helm --kubeconfig {EDGE}/kubeconfig history cilium -n kube-system")
            self.run(
                f"kubectl --kubeconfig {EDGE}/kubeconfig get daemonset cilium -n kube-system "
                "-o custom-columns=NAME:.metadata.name,"
                "IMAGE:.spec.template.spec.containers[0].image"
            )
            self.notice(
                f"the operation's Job ran helm upgrade in its Pod; the controller now reads "
                f"Cilium {PINNED.cilium_chart} from the DaemonSet helm left in edge's API server."
            )
        else:
            _say(
                "(Again the demo plays the Job's outcome, a helm upgrade, and the cilium "
                f"DaemonSet of the edge API server then runs {PINNED.cilium_chart}, as the chart "
                "would leave it.)"
            )
            self.follow_played(
                f"{admin} cni upgrade {EDGE} --wait", type_="cni", after=self._edge_cilium_on_chart
            )
            self.notice(
                f"the operation's Job (played) ran the helm upgrade; the controller now reads "
                f"Cilium {PINNED.cilium_chart} from the edge API server's DaemonSet."
            )
        self.wait_cluster(
            f"Cilium {PINNED.cilium_chart} observed on {EDGE}",
            lambda body: (
                ((body.get("status") or {}).get("cni") or {}).get("detectedVersion")
                == PINNED.cilium_chart
            ),
            name=EDGE,
        )
        self.run(f"{admin} upgrade kubernetes {EDGE} {EDGE_KUBERNETES_TARGET} --dry-run")
        self.notice("with Cilium on the chart, the same Kubernetes target now passes the plan.")

        self.step(12, "One table of clusters")
        self.run(f"{admin} status")

        self.step(13, "An open window patches a cluster unattended (auto-patch)")
        _say(
            "(The window is open all day so the demo need not wait for one, and minReleaseAge "
            "is 0m rather than the default 72h; the demo plays the Job once more, and the "
            f"Nodes then report kubelet {KUBERNETES_PATCH}.)"
        )
        if self.jobs == ON_NODE:
            _say(
                "(Played on the node too: this Job runs talosctl upgrade-k8s, which needs a "
                "real Talos control plane; the Talos API stand-in serves only what talosctl "
                "upgrade asks. So an admission policy of the demo's refuses that one Pod: "
                "the operation's etcd checks before and after run on the node as Jobs, the "
                "upgrade-k8s Pod is never created, and the demo writes that Job's outcome.)"
            )
            self.kubectl("apply", "-f", "-", input=json.dumps(_NO_UPGRADE_K8S_POD))
            self.run(f"kubectl get validatingadmissionpolicy {_NO_UPGRADE_K8S}")
        settings = {
            "components": ["talos", "kubernetes"],
            "windows": [{"schedule": "0 0 * * *", "duration": "24h", "timeZone": "UTC"}],
            "minReleaseAge": "0m",
        }
        patch = json.dumps({"spec": {"autoPatch": settings}})
        self.run(f"kubectl patch taloscluster {CLUSTER} --type=merge -p '{patch}'")
        operation = _wait_for("the operation auto-patch starts", self._auto_patch_operation)
        job = self.play_job(operation, after=self._kubelets_on_patch)
        if self.jobs == ON_NODE:
            self.kubectl(
                "delete", "validatingadmissionpolicybinding,validatingadmissionpolicy",
                _NO_UPGRADE_K8S, "--ignore-not-found",
            )  # fmt: skip
        self.wait_cluster(
            f"Kubernetes {KUBERNETES_PATCH} applied and observed",
            lambda body: (
                (body.get("spec") or {}).get("kubernetesVersion") == KUBERNETES_PATCH
                and (body.get("status") or {}).get("kubernetesVersion") == KUBERNETES_PATCH
                and (((body.get("status") or {}).get("autoPatch") or {}).get("lastRun") or {}).get(
                    "result"
                )
                == "Succeeded"
            ),
        )
        self.run("kubectl get events --field-selector reason=AutoPatchStarted")
        self.run(f"{admin} status")
        self.notice(
            f"with a window open, auto-patch started TalosOperation {operation} by itself: "
            f"Kubernetes {KUBERNETES_PATCH}, the newest patch of the running minor (Talos "
            f"already runs its newest patch, {TALOS_TARGET}; a next minor is never taken). The "
            f"same webhook admitted it, the demo played Job {job}, and the executor moved the "
            "spec."
        )

    def _newest_operation(self, type_: str, *, since: str = "") -> str | None:
        """The newest operation of ``type_`` (created at or after ``since``, RFC 3339)."""
        body = self.get(f"{kinds.Plural.TALOS_OPERATIONS}.{kinds.GROUP}", "-n", NAMESPACE) or {}
        found = [
            item
            for item in body.get("items") or []
            if (item.get("spec") or {}).get("type") == type_
            and str(item["metadata"].get("creationTimestamp", "")) >= since
        ]
        found.sort(key=lambda item: str(item["metadata"].get("creationTimestamp", "")))
        return str(found[-1]["metadata"]["name"]) if found else None

    def real_job(self, type_: str, *, began: float, what: str) -> str:
        """The Job of the newest ``type_`` operation, which ran on the node: show its Pod
        and what the API says of its containers, and keep its figures."""
        operation = self._newest_operation(type_)
        body = self.get(
            f"{kinds.Plural.TALOS_OPERATIONS}.{kinds.GROUP}", str(operation), "-n", NAMESPACE
        )
        job = str(((body or {}).get("status") or {}).get("jobName") or "")
        if not job:
            raise DemoError(f"the {type_} operation {operation} names no Job")
        followed = time.monotonic() - began
        if type_ == "talos":
            # one Job per node: show them all, their Pods and the node each upgraded
            self.run(
                f"kubectl get pods -l ichor.dev/operation-uid={(body or {})['metadata']['uid']} "
                "-o custom-columns=POD:.metadata.name,UPGRADES:.metadata.annotations."
                "ichor\\.dev/node,RAN-ON:.spec.nodeName,PHASE:.status.phase"
            )
        self.run(f"kubectl get pods -l job-name={job} -o wide")
        pods = (self.get("pods", "-n", NAMESPACE, "-l", f"job-name={job}") or {}).get("items") or []
        if len(pods) != 1:
            raise DemoError(f"Job {job} has {len(pods)} Pods, not one")
        pod = pods[0]
        status = pod.get("status") or {}
        ran = [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
        exits = {
            str(c["name"]): ((c.get("state") or {}).get("terminated") or {}).get("exitCode")
            for c in ran
        }
        if status.get("phase") != "Succeeded" or any(code != 0 for code in exits.values()):
            raise DemoError(f"Job {job}'s Pod is {status.get('phase')} with exits {exits}")
        found = self.get("job", job, "-n", NAMESPACE) or {}
        seconds = _seconds_between(
            (found.get("status") or {}).get("startTime"),
            (found.get("status") or {}).get("completionTime"),
        )
        codes = ", ".join(f"{name} {code}" for name, code in exits.items())
        _say(
            f"Ran for real: Job {job}, Pod {pod['metadata']['name']} on node "
            f"{(pod.get('spec') or {}).get('nodeName')}, phase Succeeded; container exit codes "
            f"(from the API): {codes}. The Job ran {seconds} s (its startTime to completionTime); "
            f"the operation was followed to Succeeded in {followed:.1f} s."
        )
        self.figures.append((f"{what} Job {job}", f"{seconds} s (followed {followed:.1f} s)"))
        return job

    def _edge_cilium_on_chart(self) -> None:
        config = ("--kubeconfig", str(self.dir / EDGE / "kubeconfig"))
        daemonset = json.dumps(_cilium_daemonset(PINNED.cilium_chart))
        self.kubectl(*config, "apply", "-f", "-", input=daemonset)

    def _auto_patch_operation(self) -> str | None:
        body = self.get(
            f"{kinds.Plural.TALOS_OPERATIONS}.{kinds.GROUP}", "-n", NAMESPACE,
            "-l", f"{STARTED_BY_LABEL}={StartedBy.AUTO_PATCH.value}",
        ) or {}  # fmt: skip
        for item in body.get("items") or []:
            return str(item["metadata"]["name"])
        return None

    def _kubelets_on_patch(self) -> None:
        for name, _, _ in PROD_NODES:
            self.set_node(
                name, talos=TALOS_TARGET, kubelet=KUBERNETES_PATCH, kubeconfig=self.prod_config
            )

    def _nodes_on_target(self) -> None:
        for name, _, _ in PROD_NODES:
            self.set_node(
                name, talos=TALOS_TARGET, kubelet=PINNED.kubernetes, kubeconfig=self.prod_config
            )

    def finish(self) -> None:
        _say()
        total = time.monotonic() - self.started
        waited = f" ({self.lock_wait:.0f} s of it waiting for another run's node)"
        _say(f"The demo ran in {total:.1f} s{waited if self.lock_wait >= 1 else ''}.")
        if self.figures:
            _say("Jobs that ran for real on the node:")
            for what, figure in self.figures:
                _say(f"  {what}: {figure}")
        self.say_what_is_real()
        _say("Everything keeps running:")
        _say(f"  export KUBECONFIG={self.kubeconfig}")
        _say(f"  users: {self.dir / 'users'} ({PLAIN_USER}.kubeconfig, {HOLDER}.kubeconfig)")
        if self.jobs == ON_NODE:
            _say(f"  prod's workload API server: {self.dir / CLUSTER / 'kubeconfig'}")
        _say(f"  the adopted cluster's API server: {self.dir / EDGE / 'kubeconfig'}")
        if self.jobs == ON_NODE:
            _say(f"  logs:  {self.dir / 'logs'} (operator.log, registry.log, node.log)")
            _say(
                "  stop it all (the node, the API servers, registry, operator) with: make demo-down"
            )
        else:
            _say(f"  logs:  {self.dir / 'logs'} (operator.log, registry.log)")
            _say("  stop it all (both API servers, registry, operator) with: make demo-down")


def _capture(fn: Callable[[], None], sink: list[str]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception as error:
            sink.append(f"error: {error}")

    return run


def _node_ready() -> dict[str, str]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def _condition(type_: str, now: str) -> dict[str, str]:
    return {
        "type": type_,
        "status": "True",
        "reason": "CompletionsReached",
        "message": "Reached expected number of succeeded pods",
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


def _reader_account() -> list[dict[str, Any]]:
    """ServiceAccount ``READER_ACCOUNT`` with the chart's ``ichor-tenant-reader``, as a
    platform admin grants it for a cluster without a kubeconfig Secret."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": READER_ACCOUNT, "namespace": NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": account.TENANT_READER},
            "rules": account.tenant_reader_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{account.TENANT_READER}-{NAMESPACE}-{READER_ACCOUNT}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": account.TENANT_READER,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": READER_ACCOUNT, "namespace": NAMESPACE}
            ],
        },
    ]


def _secret(name: str, key: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "type": "Opaque",
        "data": {key: base64.b64encode(value.encode()).decode()},
    }


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _seconds_between(start: object, end: object) -> str:
    """Whole seconds between two API timestamps (``2026-12-03T19:04:05Z``), or ``?``."""
    try:
        parsed = [
            time.mktime(time.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ")) for value in (start, end)
        ]
    except ValueError:
        return "?"
    return f"{parsed[1] - parsed[0]:.0f}"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found


def _authority(pki: Path) -> certs.Authority:
    """The stack's CA, read back from its files, to issue the demo users' certificates."""
    key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise DemoError(f"{pki / 'ca.key'} is not the ECDSA key the control plane writes")
    cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    return certs.Authority(key=key, cert=cert)


def _node_info(*, talos: str, kubelet: str) -> dict[str, str]:
    return {
        "osImage": f"Talos ({talos})",
        "kubeletVersion": kubelet,
        "kubeProxyVersion": "",
        "machineID": "demo",
        "systemUUID": "demo",
        "bootID": "demo",
        "kernelVersion": "6.12.0-talos",
        "containerRuntimeVersion": "containerd://2.1.0",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }


def _cilium_daemonset(version: str) -> dict[str, Any]:
    labels = {"k8s-app": "cilium"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "cilium", "namespace": "kube-system", "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "cilium-agent", "image": f"quay.io/cilium/cilium:v{version}"}
                    ]
                },
            },
        },
    }


def _rbac() -> list[dict[str, Any]]:
    def role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        }

    def binding(name: str, users: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
                for user in users
            ],
        }

    editor = role(
        "ichor-demo-operator",
        [
            {
                "apiGroups": [kinds.GROUP],
                "resources": ["talosclusters", "talosoperations", "ichorinstallations"],
                "verbs": ["get", "list", "watch", "create"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list"]},
        ],
    )
    override = role(
        "ichor-override",
        [{"apiGroups": [kinds.GROUP], "resources": ["talosclusters"], "verbs": ["override"]}],
    )
    return [
        editor,
        override,
        binding("ichor-demo-operator", [PLAIN_USER, HOLDER]),
        binding("ichor-override", [HOLDER]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.harness.demo", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve-registry", help="(internal) run the seeded demo registry")
    serve.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "serve-registry":
        return serve_registry(args.workdir)
    try:
        demo = Demo()
    except (DemoError, binaries.MissingBinaryError) as error:
        print(f"The demo did not start: {error}", file=sys.stderr)
        return 2
    try:
        demo.setup()
        demo.story()
    except (
        DemoError,
        binaries.MissingBinaryError,
        stack.StackError,
        controlplane.ControlPlaneError,
    ) as error:
        print(f"\nThe demo stopped: {error}", file=sys.stderr)
        if demo.dir.exists():
            print(
                f"Logs are in {demo.dir / 'logs'}; `make demo-down` stops what was started.",
                file=sys.stderr,
            )
        return 1
    demo.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
