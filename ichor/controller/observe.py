"""What a workload cluster runs: Talos and kubelet versions of its Nodes, and its CNI.

Read from the workload cluster's own API: each Node's ``osImage`` (``Talos (v1.14.3)``)
and ``kubeletVersion``, and the CNI's DaemonSet (for Cilium, ``cilium``; its image tag,
or the chart version of its Helm release when the image carries no version tag).

Mixed versions (an upgrade half done) are reported, never averaged: the lowest of each
and the list of distinct versions. A Node whose versions cannot be read is named, not
guessed. The parsing is pure (``nodes_observation``, ``cni_observation``); ``observe``
only fetches. Nothing here decides compatibility.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from ichor.api.taloscluster import DETECTED_CILIUM
from ichor.kube.clients import REQUEST_TIMEOUT
from ichor.kube.payloads import DaemonSet, Node, Secret
from ichor.release.versions import Version, VersionError, parse

_OS_IMAGE = re.compile(r"^Talos \((?P<version>[^()\s]+)\)$")

#: DaemonSet names of the CNIs Ichor recognises, and the CNI each one means.
CNI_DAEMONSETS: Mapping[str, str] = {
    "cilium": DETECTED_CILIUM,
    "kube-flannel": "flannel",
    "kube-flannel-ds": "flannel",
    "calico-node": "calico",
    "weave-net": "weave",
    "kube-router": "kube-router",
    "antrea-agent": "antrea",
}
#: Where Talos and the Cilium chart put the CNI; looked at before any other namespace.
CNI_NAMESPACE = "kube-system"
#: The agent container of the Cilium DaemonSet.
CILIUM_AGENT = "cilium-agent"


@dataclass(frozen=True)
class NodesObservation:
    count: int
    #: Distinct versions, lowest first (normalised with a leading v).
    talos_versions: tuple[str, ...]
    kubernetes_versions: tuple[str, ...]
    #: One sentence per Node whose versions could not be read.
    unreadable: tuple[str, ...]

    @property
    def talos(self) -> str | None:
        return self.talos_versions[0] if self.talos_versions else None

    @property
    def kubernetes(self) -> str | None:
        return self.kubernetes_versions[0] if self.kubernetes_versions else None

    @property
    def differ(self) -> bool:
        return len(self.talos_versions) > 1 or len(self.kubernetes_versions) > 1


@dataclass(frozen=True)
class CNIObservation:
    #: ``cilium``, another CNI's name, or None when no known CNI DaemonSet is seen.
    detected: str | None
    #: Its release without a leading v (``1.20.4``), or None when it cannot be read.
    version: str | None
    #: Where the version came from, for messages (``DaemonSet kube-system/cilium``).
    source: str | None = None


@dataclass(frozen=True)
class Observation:
    nodes: NodesObservation
    cni: CNIObservation


def _tagged(version: Version) -> str:
    return version.tag


def nodes_observation(nodes: Iterable[Node]) -> NodesObservation:
    """The versions the Nodes run: distinct values, lowest first, and unreadable Nodes."""
    talos: dict[Version, str] = {}
    kubelet: dict[Version, str] = {}
    unreadable: list[str] = []
    count = 0
    for node in nodes:
        count += 1
        name = node.get("metadata", {}).get("name", "?")
        info = node.get("status", {}).get("nodeInfo", {})
        os_image = info.get("osImage", "")
        match = _OS_IMAGE.match(os_image)
        try:
            if match is None:
                raise VersionError(os_image, expected='an osImage of the form "Talos (vX.Y.Z)"')
            version = parse(match["version"])
            talos.setdefault(version, _tagged(version))
        except VersionError:
            unreadable.append(f'Node {name} runs osImage "{os_image}", not "Talos (vX.Y.Z)"')
        kubelet_version = info.get("kubeletVersion", "")
        try:
            version = parse(kubelet_version)
            kubelet.setdefault(version, _tagged(version))
        except VersionError:
            unreadable.append(f'Node {name} reports kubeletVersion "{kubelet_version}"')
    return NodesObservation(
        count=count,
        talos_versions=tuple(talos[v] for v in sorted(talos)),
        kubernetes_versions=tuple(kubelet[v] for v in sorted(kubelet)),
        unreadable=tuple(unreadable),
    )


def image_version(image: str) -> str | None:
    """The release in an image reference's tag, without a leading v; None without a tag
    or when the tag is not a version (``quay.io/cilium/cilium:v1.20.4@sha256:...`` ->
    ``1.20.4``)."""
    reference = image.split("@", 1)[0]
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag or not tag:
        return None
    try:
        parse(tag)
    except VersionError:
        return None
    return tag[1:] if tag.startswith("v") else tag


def helm_chart_version(secret: Secret) -> str | None:
    """The chart version recorded in a Helm release Secret (``sh.helm.release.v1.*``)."""
    encoded = secret.get("data", {}).get("release")
    if not encoded:
        return None
    try:
        raw = base64.b64decode(base64.b64decode(encoded))
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        release: Any = json.loads(raw)
        version = release["chart"]["metadata"]["version"]
    except (binascii.Error, OSError, ValueError, KeyError, TypeError):
        return None
    return str(version) if version else None


def _agent_image(daemonset: DaemonSet) -> str | None:
    containers = daemonset.get("spec", {}).get("template", {}).get("spec", {}).get("containers")
    if not containers:
        return None
    for container in containers:
        if container.get("name") == CILIUM_AGENT:
            return container.get("image")
    return containers[0].get("image")


def cni_observation(
    daemonsets: Iterable[DaemonSet], helm_releases: Iterable[Secret] = ()
) -> CNIObservation:
    """The CNI the DaemonSets show; Cilium wins over another CNI, ``kube-system`` over
    other namespaces. ``helm_releases`` are the deployed Helm release Secrets of the
    ``cilium`` release, read when the agent's image tag carries no version."""
    found: list[tuple[int, int, str, DaemonSet]] = []
    for daemonset in daemonsets:
        meta = daemonset.get("metadata", {})
        kind = CNI_DAEMONSETS.get(meta.get("name", ""))
        if kind is None:
            continue
        rank = (
            0 if kind == DETECTED_CILIUM else 1,
            0 if meta.get("namespace") == CNI_NAMESPACE else 1,
        )
        found.append((*rank, kind, daemonset))
    if not found:
        return CNIObservation(detected=None, version=None)
    found.sort(key=lambda item: item[:2])
    _, _, kind, daemonset = found[0]
    meta = daemonset.get("metadata", {})
    source = f"DaemonSet {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    image = _agent_image(daemonset)
    version = image_version(image) if image else None
    if version is None and kind == DETECTED_CILIUM:
        for secret in helm_releases:
            version = helm_chart_version(secret)
            if version is not None:
                source = f"Helm release Secret {secret.get('metadata', {}).get('name', '?')}"
                break
    return CNIObservation(detected=kind, version=version, source=source)


async def _get_json(method: Any, *args: Any, **params: Any) -> Any:
    params.update(_preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    response = await method(*args, **params)
    return json.loads(await response.read())


async def observe(api: ApiClient) -> Observation:
    """Read the Nodes and the CNI of the workload cluster behind ``api``.

    Raises the client's errors (ApiException, aiohttp errors, timeouts) for the caller to
    turn into a condition.
    """
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)
    node_list = await _get_json(core.list_node)
    nodes = nodes_observation(node_list.get("items", []))
    daemonset_list = await _get_json(apps.list_daemon_set_for_all_namespaces)
    daemonsets: list[DaemonSet] = daemonset_list.get("items", [])
    cni = cni_observation(daemonsets)
    if cni.detected == DETECTED_CILIUM and cni.version is None:
        namespace = next(
            (
                d.get("metadata", {}).get("namespace", CNI_NAMESPACE)
                for d in daemonsets
                if d.get("metadata", {}).get("name") == "cilium"
            ),
            CNI_NAMESPACE,
        )
        secrets = await _get_json(
            core.list_namespaced_secret,
            namespace,
            label_selector="owner=helm,name=cilium,status=deployed",
        )
        cni = cni_observation(daemonsets, secrets.get("items", []))
    return Observation(nodes=nodes, cni=cni)
