"""A workload cluster for the node's upgrade Jobs: a second API server with Node objects.

The same etcd + kube-apiserver as the component tests' (on the machine's loopback), whose
serving certificate also names the node's address, so a Pod of the node reaches it at
``NODE_IP:<port>`` through the node's forwarder (:meth:`tests.harness.node.Node.expose`)
and verifies it. A kube-controller-manager running only the DaemonSet controller keeps
DaemonSet status current, so ``helm upgrade --wait`` sees a stand-in Cilium roll out.
There is no kubelet: its Nodes are objects the tests write (as a Talos node would report
itself), and a DaemonSet the tests install selects none of them.

It refuses to be reached from the node at any other address.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from tests.harness import binaries, controlplane, node


class WorkloadPlane(controlplane.ControlPlane):
    """``start()`` then ``expose(cluster)``; ``node_kubeconfig()`` is what a Secret holds."""

    def __init__(self, *, workdir: Path, detached: bool = False, daemonsets: bool = True) -> None:
        super().__init__(workdir=workdir, detached=detached)
        self.node_server = ""
        self._exposure: node.Exposure | None = None
        #: Whether to run the DaemonSet controller (a Cilium that ``helm --wait`` follows).
        self.daemonsets = daemonsets

    def _write_pki(self) -> None:
        super()._write_pki()
        serving = self.authority.issue_server(
            hosts=["127.0.0.1", "localhost", node.NODE_IP], common_name="kube-apiserver"
        )
        serving.write(cert_path=self.pki / "apiserver.crt", key_path=self.pki / "apiserver.key")

    def start(self) -> WorkloadPlane:
        super().start()
        if not self.daemonsets:
            return self
        manager = binaries.find("kube-controller-manager")
        self._spawn(
            "kube-controller-manager",
            manager,
            [
                f"--kubeconfig={self.kubeconfig}",
                "--controllers=daemonset",
                "--leader-elect=false",
                "--secure-port=0",
            ],
        )
        return self

    def expose(self, cluster: node.Node) -> str:
        """Make this API server reachable from the node's Pods until it stops; returns its
        URL there."""
        port = int(self.server.rsplit(":", 1)[1])
        self._exposure = cluster.expose(port)
        self.node_server = f"https://{self._exposure.endpoint}"
        return self.node_server

    def stop(self) -> None:
        """Close the node's forwarder to this API server first (the port is free for
        anything else afterwards, and the node must not accept for it), then stop."""
        exposure, self._exposure = self._exposure, None
        if exposure is not None:
            exposure.close()
        super().stop()

    def node_kubeconfig(self) -> str:
        """The admin kubeconfig with the server as the node's Pods reach it (after
        :meth:`expose`, or once ``node_server`` is set by whoever exposed it)."""
        if not self.node_server:
            raise RuntimeError("expose() the workload plane to the node first")
        config: dict[str, Any] = yaml.safe_load(self.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = self.node_server
        return yaml.safe_dump(config, sort_keys=False)

    def node_kubeconfig_b64(self) -> str:
        return base64.b64encode(self.node_kubeconfig().encode()).decode()
