"""What a workload cluster runs: Talos and kubelet versions of its Nodes, and its CNI.

Read from the workload cluster's own API: each Node's ``osImage`` (``Talos (v1.14.3)``)
and ``kubeletVersion``, and the CNI's DaemonSet (for Cilium, ``cilium``; its image tag,
or the chart version of its Helm release when the image carries no version tag).

Mixed versions (an upgrade half done) are reported, never averaged: the lowest of each
and the list of distinct versions. A Node whose versions cannot be read is named, not
guessed. The parsing here is pure (``nodes_observation``, or ``NodesTally`` a page of
Nodes at a time, and ``cni_observation``); the reconciler's ``observe`` only fetches.
Nothing here decides compatibility.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ichor.api.taloscluster import DETECTED_CILIUM
from ichor.kube import untrusted
from ichor.release.versions import Version, VersionError, parse

_OS_IMAGE = re.compile(r"Talos \((?P<version>[^()\s]+)\)")

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
#: The longest text read as a version or an osImage; a longer one is unreadable.
MAX_VERSION_TEXT = 128
#: The longest value quoted back in a sentence (a condition message).
MAX_QUOTE = 64
#: Nodes named one by one in ``unreadable``; the rest are counted.
MAX_NAMED = 10
#: The most a Helm release may inflate to, and the JSON values and nesting it may hold
#: (``ichor.kube.untrusted``): a Cilium release (its chart's templates and files, its
#: values, the rendered manifest) inflates to a few MiB with tens of thousands of values,
#: while a Secret of 29 KiB can inflate to 16 MiB of ``[{},{},...]``, which json.loads
#: turns into 417 MiB of objects. Read within these, a release takes tens of MiB at most.
MAX_RELEASE_BYTES = 12 * 1024 * 1024
MAX_RELEASE_VALUES = 200_000
MAX_RELEASE_DEPTH = 100


@dataclass(frozen=True)
class NodesObservation:
    count: int
    #: Distinct versions, lowest first (normalised with a leading v).
    talos_versions: tuple[str, ...]
    kubernetes_versions: tuple[str, ...]
    #: One sentence per Node whose versions could not be read (the first
    #: ``MAX_NAMED``, then one counting the rest), or one saying the list is unreadable.
    unreadable: tuple[str, ...]
    #: Names of the Nodes whose ``Ready`` condition is not True (the first ``MAX_NAMED``,
    #: then one counting the rest); auto-patch starts nothing while any is listed.
    not_ready: tuple[str, ...] = ()

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
    #: A Cilium detected whose release cannot be read (``version`` None): what was seen
    #: and what could not be read, in Ichor's own words (nothing the cluster sent but a
    #: namespace in the form of a DNS name). None otherwise.
    unreadable: str | None = None


@dataclass(frozen=True)
class Observation:
    nodes: NodesObservation
    cni: CNIObservation


# Everything below reads JSON a workload cluster sent: any key may be missing or of
# another type, any text may be huge. Each reader returns what it can read, or None;
# none of them raises.


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _quote(value: object) -> str:
    """``value`` quoted for a sentence, cut to ``MAX_QUOTE`` characters."""
    if value is None:
        return "nothing"
    if not isinstance(value, str):
        return f"a {type(value).__name__}, not text"
    if len(value) > MAX_QUOTE:
        return f'"{value[:MAX_QUOTE]}..." ({len(value):,} characters)'
    return f'"{value}"'


def _version(text: str | None) -> Version | None:
    if text is None or len(text) > MAX_VERSION_TEXT:
        return None
    try:
        return parse(text)
    except VersionError:
        return None


def _items(payload: object) -> list[object] | None:
    """The ``items`` of a list response, or None when it is not a list response."""
    items = _mapping(payload).get("items")
    return items if isinstance(items, list) else None


def _name(obj: Mapping[str, Any]) -> str:
    name = _text(_mapping(obj.get("metadata")).get("name"))
    if not name:
        return "?"
    return name if len(name) <= MAX_QUOTE else f"{name[:MAX_QUOTE]}..."


def _tagged(version: Version) -> str:
    return version.tag


@dataclass(frozen=True)
class NodeReport:
    """What one Node reports: its name (cut to ``MAX_QUOTE``), its Talos from ``osImage``
    and its kubelet's version, each None when it cannot be read. (The versions of all
    the Nodes, as the status shows them, are ``ichor.api.taloscluster.NodeVersions``.)"""

    name: str
    talos: Version | None
    kubelet: Version | None
    #: One sentence per version that cannot be read.
    unreadable: tuple[str, ...]


def node_report(node: object) -> NodeReport:
    """The versions one Node object reports (any JSON: never raises)."""
    obj = _mapping(node)
    name = _name(obj)
    info = _mapping(_mapping(obj.get("status")).get("nodeInfo"))
    unreadable: list[str] = []
    os_image = info.get("osImage")
    text = _text(os_image)
    match = _OS_IMAGE.fullmatch(text) if text and len(text) <= MAX_VERSION_TEXT else None
    talos = _version(match["version"]) if match is not None else None
    if talos is None:
        unreadable.append(f'Node {name} runs osImage {_quote(os_image)}, not "Talos (vX.Y.Z)"')
    kubelet_version = info.get("kubeletVersion")
    kubelet = _version(_text(kubelet_version))
    if kubelet is None:
        unreadable.append(f"Node {name} reports kubeletVersion {_quote(kubelet_version)}")
    return NodeReport(name=name, talos=talos, kubelet=kubelet, unreadable=tuple(unreadable))


def node_ready(node: object) -> bool:
    """Whether a Node object's Ready condition is True (any JSON: never raises)."""
    return _ready(_mapping(node))


class NodesTally:
    """``nodes_observation`` one Node at a time, so the Nodes of a list read in pages are
    counted page by page and none is kept: what it holds is the distinct versions and
    the first ``MAX_NAMED`` sentences, whatever the number of Nodes."""

    def __init__(self) -> None:
        self.count = 0
        self._talos: dict[Version, str] = {}
        self._kubelet: dict[Version, str] = {}
        self._unreadable: list[str] = []
        self._unreadable_count = 0
        self._not_ready: list[str] = []
        self._not_ready_count = 0

    def add(self, node: object) -> None:
        """Count one Node object (any JSON)."""
        self.count += 1
        obj = _mapping(node)
        if not _ready(obj):
            self._not_ready_count += 1
            if len(self._not_ready) < MAX_NAMED:
                self._not_ready.append(_name(obj))
        found = node_report(node)
        if found.talos is not None:
            self._talos.setdefault(found.talos, _tagged(found.talos))
        if found.kubelet is not None:
            self._kubelet.setdefault(found.kubelet, _tagged(found.kubelet))
        for sentence in found.unreadable:
            self._unreadable_count += 1
            if len(self._unreadable) < MAX_NAMED:
                self._unreadable.append(sentence)

    def observation(self) -> NodesObservation:
        """What the Nodes counted so far run."""
        unreadable = list(self._unreadable)
        if self._unreadable_count > MAX_NAMED:
            rest = self._unreadable_count - MAX_NAMED
            unreadable.append(f"and {rest:,} more versions of Nodes that cannot be read")
        not_ready = list(self._not_ready)
        if self._not_ready_count > MAX_NAMED:
            not_ready.append(f"{self._not_ready_count - MAX_NAMED:,} more")
        return NodesObservation(
            count=self.count,
            talos_versions=tuple(self._talos[v] for v in sorted(self._talos)),
            kubernetes_versions=tuple(self._kubelet[v] for v in sorted(self._kubelet)),
            unreadable=tuple(unreadable),
            not_ready=tuple(not_ready),
        )


def nodes_observation(nodes: Iterable[object]) -> NodesObservation:
    """The versions the Nodes run: distinct values, lowest first, and unreadable Nodes."""
    tally = NodesTally()
    for node in nodes:
        tally.add(node)
    return tally.observation()


def _ready(node: Mapping[str, Any]) -> bool:
    """Whether the Node's ``Ready`` condition is ``True`` (absent or unreadable: not)."""
    conditions = _mapping(node.get("status")).get("conditions")
    if not isinstance(conditions, list):
        return False
    for item in conditions:
        entry = _mapping(item)
        if entry.get("type") == "Ready":
            return entry.get("status") == "True"
    return False


def unreadable_nodes(what: str) -> NodesObservation:
    """The observation of a Node list that could not be read at all."""
    return NodesObservation(
        count=0,
        talos_versions=(),
        kubernetes_versions=(),
        unreadable=(f"the workload cluster's Node list cannot be read: {what}",),
    )


def image_version(image: str) -> str | None:
    """The release in an image reference's tag, without a leading v; None without a tag
    or when the tag is not a version (``quay.io/cilium/cilium:v1.20.4@sha256:...`` ->
    ``1.20.4``)."""
    reference = image.split("@", 1)[0]
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag or not tag:
        return None
    if _version(tag) is None:
        return None
    return tag[1:] if tag.startswith("v") else tag


def helm_chart_version(secret: object) -> str | None:
    """The chart version recorded in a Helm release Secret (``sh.helm.release.v1.*``),
    without a leading v; None when it is not there, not a version, or the release is not
    readable within ``MAX_RELEASE_BYTES``, ``MAX_RELEASE_VALUES`` and
    ``MAX_RELEASE_DEPTH``."""
    encoded = _text(_mapping(_mapping(secret).get("data")).get("release"))
    if not encoded:
        return None
    try:
        raw = base64.b64decode(base64.b64decode(encoded))
    except (binascii.Error, ValueError):
        return None
    if raw[:2] == b"\x1f\x8b":
        inflated = untrusted.gunzip(raw, limit=MAX_RELEASE_BYTES)
        if inflated is None:
            return None
        raw = inflated
    release, problem = untrusted.loads(
        raw,
        max_bytes=MAX_RELEASE_BYTES,
        max_values=MAX_RELEASE_VALUES,
        max_depth=MAX_RELEASE_DEPTH,
    )
    if problem is not None:
        return None
    chart = _mapping(_mapping(_mapping(release).get("chart")).get("metadata"))
    version = _text(chart.get("version"))
    if version is None or _version(version) is None:
        return None
    return version[1:] if version.startswith("v") else version


def _agent_image(daemonset: Mapping[str, Any]) -> str | None:
    spec = _mapping(_mapping(_mapping(daemonset.get("spec")).get("template")).get("spec"))
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return None
    readable = [_mapping(c) for c in containers]
    agent = next((c for c in readable if c.get("name") == CILIUM_AGENT), readable[0])
    return _text(agent.get("image"))


_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?")


def _dns_name(value: object) -> str:
    """A namespace or object name for a sentence: itself when it is a DNS name (what the
    API server accepts), else words of Ichor's own."""
    text = _text(value)
    if text is not None and _DNS_NAME.fullmatch(text):
        return text
    return "(a name that is not a DNS name)"


def _image_problem(image: str | None) -> str:
    """Why the agent image names no release, in Ichor's words (never the image itself)."""
    if image is None or not image.strip():
        return "its agent container names no image"
    reference, digest, _ = image.partition("@")
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag or not tag:
        return "the image is pinned by digest only" if digest else "the image carries no tag"
    return "the image's tag is not a release"


def _cilium_unreadable(*, source: str, image: str | None, helm_releases: tuple[object, ...]) -> str:
    helm = (
        "its deployed Helm release names no chart version that can be read"
        if helm_releases
        else "no deployed Helm release names its chart"
    )
    return (
        f"Cilium is running ({source}) but its release cannot be read: "
        f"{_image_problem(image)} and {helm}"
    )


def cni_observation(
    daemonsets: Iterable[object], helm_releases: Iterable[object] = ()
) -> CNIObservation:
    """The CNI the DaemonSets show; Cilium wins over another CNI, ``kube-system`` over
    other namespaces. ``helm_releases`` are the deployed Helm release Secrets of the
    ``cilium`` release, read when the agent's image tag carries no version. A Cilium
    whose release neither names is seen but unreadable (``unreadable`` says why)."""
    found: list[tuple[int, int, str, Mapping[str, Any]]] = []
    for item in daemonsets:
        daemonset = _mapping(item)
        meta = _mapping(daemonset.get("metadata"))
        kind = CNI_DAEMONSETS.get(_text(meta.get("name")) or "")
        if kind is None:
            continue
        rank = (
            0 if kind == DETECTED_CILIUM else 1,
            0 if meta.get("namespace") == CNI_NAMESPACE else 1,
        )
        found.append((*rank, kind, daemonset))
    if not found:
        return CNIObservation(detected=None, version=None)
    found.sort(key=lambda entry: entry[:2])
    _, _, kind, daemonset = found[0]
    meta = _mapping(daemonset.get("metadata"))
    source = f"DaemonSet {_dns_name(meta.get('namespace'))}/{_dns_name(meta.get('name'))}"
    image = _agent_image(daemonset)
    version = image_version(image) if image else None
    if version is None and kind == DETECTED_CILIUM:
        releases = tuple(helm_releases)
        for secret in releases:
            version = helm_chart_version(secret)
            if version is not None:
                source = f"Helm release Secret {_name(_mapping(secret))}"
                break
        if version is None:
            unreadable = _cilium_unreadable(source=source, image=image, helm_releases=releases)
            return CNIObservation(detected=kind, version=None, source=source, unreadable=unreadable)
    return CNIObservation(detected=kind, version=version, source=source)


def cilium_namespace(daemonsets: Iterable[object]) -> str:
    """The namespace of the ``cilium`` DaemonSet, where its Helm release lives."""
    for item in daemonsets:
        meta = _mapping(_mapping(item).get("metadata"))
        if meta.get("name") == "cilium":
            namespace = _text(meta.get("namespace"))
            return namespace if namespace else CNI_NAMESPACE
    return CNI_NAMESPACE
