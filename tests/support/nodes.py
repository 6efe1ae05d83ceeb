"""What a test writes to play a workload cluster's Node, in one place."""

from __future__ import annotations


def node_info(*, os_image: str, kubelet: str) -> dict[str, str]:
    """A Node's ``status.nodeInfo``: every field NodeSystemInfo requires, so the API
    server accepts the status."""
    return {
        "osImage": os_image,
        "kubeletVersion": kubelet,
        "kubeProxyVersion": "",
        "machineID": "m",
        "systemUUID": "s",
        "bootID": "b",
        "kernelVersion": "6.12.0-talos",
        "containerRuntimeVersion": "containerd://2.1.0",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }


def talos_node_info(*, talos: str, kubelet: str) -> dict[str, str]:
    """``nodeInfo`` of a Talos node: its ``osImage`` names the Talos version."""
    return node_info(os_image=f"Talos ({talos})", kubelet=kubelet)
