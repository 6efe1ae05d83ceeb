"""The upgrade story's moving parts on the node, shared by its tests: a workload cluster
(tests/harness/workload.py) as a Talos install leaves it, a TalosCluster naming its
kubeconfig Secret, operations, and waits that explain themselves when they time out."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tests.component.chart import helm
from tests.harness import workload
from tests.node.conftest import OnNode
from tests.support import nodes

T = TypeVar("T")

EDGE_TALOS = "v1.13.9"
EDGE_KUBERNETES = "v1.35.5"
EDGE_CILIUM = "1.19.10"
WITHIN = 240.0


def helm_on(plane: workload.WorkloadPlane, *args: str) -> str:
    result = helm.run("--kubeconfig", str(plane.kubeconfig), *args, check=False)
    if result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def get(on_node: OnNode, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(on_node.kubectl("get", *args, "-o", "json").stdout)
    return found


def wait(
    what: str,
    probe: Callable[[], T],
    check: Callable[[T], bool],
    *,
    within: float = WITHIN,
    explain: Callable[[], str] | None = None,
) -> T:
    """Poll once a second, at most ``within`` seconds; the failure shows ``explain()``."""
    deadline = time.monotonic() + within
    value = probe()
    while not check(value):
        if time.monotonic() > deadline:
            more = explain() if explain else ""
            raise AssertionError(f"{what} not reached in {within} s; last: {value!r}\n{more}")
        time.sleep(1)
        value = probe()
    return value


def talos_node(
    plane: workload.WorkloadPlane,
    name: str,
    *,
    address: str,
    talos: str = EDGE_TALOS,
    kubelet: str = EDGE_KUBERNETES,
) -> None:
    """A control-plane Node object as a Talos node reports itself."""
    plane.kubectl(
        "apply", "-f", "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"node-role.kubernetes.io/control-plane": ""}},
            }
        ),
    )  # fmt: skip
    plane.kubectl(
        "patch", "node", name, "--subresource=status", "--type=merge", "-p",
        json.dumps(
            {
                "status": {
                    "addresses": [{"type": "InternalIP", "address": address}],
                    "nodeInfo": nodes.talos_node_info(talos=talos, kubelet=kubelet),
                }
            }
        ),
    )  # fmt: skip


@dataclass
class Cluster:
    """A TalosCluster on the node whose workload cluster is ``plane``."""

    on_node: OnNode
    namespace: str
    name: str

    def status(self) -> dict[str, Any]:
        found: dict[str, Any] = (
            get(self.on_node, "taloscluster", self.name, "-n", self.namespace).get("status") or {}
        )
        return found

    def cni_version(self) -> str | None:
        found: str | None = (self.status().get("cni") or {}).get("detectedVersion")
        return found

    def start(self, operation: str, *, type_: str, version: str | None = None) -> Operation:
        spec: dict[str, Any] = {"clusterRef": {"name": self.name}, "type": type_}
        if version is not None:
            spec["version"] = version
        self.on_node.kubectl(
            "apply", "-n", self.namespace, "-f", "-",
            input=json.dumps(
                {
                    "apiVersion": "ichor.dev/v1alpha1",
                    "kind": "TalosOperation",
                    "metadata": {"name": operation},
                    "spec": spec,
                }
            ),
        )  # fmt: skip
        return Operation(cluster=self, name=operation)

    def jobs(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = get(self.on_node, "jobs", "-n", self.namespace)["items"]
        return found

    def pods(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = get(self.on_node, "pods", "-n", self.namespace)["items"]
        return found


@dataclass
class Operation:
    cluster: Cluster
    name: str

    def status(self) -> dict[str, Any]:
        on_node, namespace = self.cluster.on_node, self.cluster.namespace
        found: dict[str, Any] = (
            get(on_node, "talosoperation", self.name, "-n", namespace).get("status") or {}
        )
        return found

    def phase(self) -> str | None:
        found: str | None = self.status().get("phase")
        return found

    def message(self) -> str:
        return " ".join(str(c.get("message", "")) for c in self.status().get("conditions", []))

    def explain(self) -> str:
        on_node, namespace = self.cluster.on_node, self.cluster.namespace
        described = on_node.kubectl("describe", "jobs,pods", "-n", namespace, check=False).stdout
        operation = on_node.kubectl(
            "get", "talosoperation", self.name, "-n", namespace, "-o", "yaml", check=False
        ).stdout
        return f"{operation}\n{described}\noperator:\n{on_node.logs()}"

    def wait_ended(self, *, within: float = WITHIN) -> str:
        return str(
            wait(
                f"operation {self.name} ended",
                self.phase,
                lambda p: p in ("Succeeded", "Failed"),
                within=within,
                explain=self.explain,
            )
        )


def edge_cluster(
    on_node: OnNode,
    plane: workload.WorkloadPlane,
    *,
    name: str = "edge",
    talos: str = EDGE_TALOS,
    kubernetes: str = EDGE_KUBERNETES,
    contract: str = "v1.13",
    cilium: str = EDGE_CILIUM,
    talosconfig: str | None = None,
) -> Cluster:
    """A namespace with the workload's kubeconfig Secret (the server as the node's Pods
    reach it), a talosconfig Secret when given, and a TalosCluster naming them, Cilium
    managed; returns once the operator observed the workload's Cilium."""
    namespace = f"{name}-{uuid.uuid4().hex[:6]}"
    on_node.kubectl("create", "namespace", namespace)
    on_node.kubectl(
        "create", "secret", "generic", f"{name}-kubeconfig", "-n", namespace,
        f"--from-literal=kubeconfig={plane.node_kubeconfig()}",
    )  # fmt: skip
    refs: dict[str, Any] = {"kubeconfigSecretRef": {"name": f"{name}-kubeconfig"}}
    if talosconfig is not None:
        on_node.kubectl(
            "create", "secret", "generic", f"{name}-talosconfig", "-n", namespace,
            f"--from-literal=talosconfig={talosconfig}",
        )  # fmt: skip
        refs["talosconfigSecretRef"] = {"name": f"{name}-talosconfig"}
    on_node.kubectl(
        "apply", "-n", namespace, "-f", "-",
        input=json.dumps(
            {
                "apiVersion": "ichor.dev/v1alpha1",
                "kind": "TalosCluster",
                "metadata": {"name": name},
                "spec": {
                    "talosVersion": talos,
                    "kubernetesVersion": kubernetes,
                    "versionContract": contract,
                    "cni": {"preset": "cilium"},
                    **refs,
                },
            }
        ),
    )  # fmt: skip
    cluster = Cluster(on_node=on_node, namespace=namespace, name=name)
    wait(
        f"Cilium {cilium} observed through the kubeconfig Secret",
        cluster.cni_version,
        lambda v: v == cilium,
        explain=on_node.logs,
    )
    return cluster


def plain_cilium(plane: workload.WorkloadPlane, version: str) -> None:
    """Cilium from a plain manifest (as Talos's inline manifests install it): no Helm
    release; its DaemonSet selects no node."""
    plane.kubectl(
        "apply", "-f", "-",
        input=json.dumps(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "cilium", "namespace": "kube-system"},
                "spec": {
                    "selector": {"matchLabels": {"k8s-app": "cilium"}},
                    "template": {
                        "metadata": {"labels": {"k8s-app": "cilium"}},
                        "spec": {
                            "nodeSelector": {"ichor.dev/stand-in": "none"},
                            "containers": [
                                {
                                    "name": "cilium-agent",
                                    "image": f"quay.io/cilium/cilium:v{version}",
                                }
                            ],
                        },
                    },
                },
            }
        ),
    )  # fmt: skip
