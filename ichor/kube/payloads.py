"""TypedDicts of the raw Kubernetes payloads Ichor reads (only the fields it reads).

Objects arrive as JSON dicts (from kopf, or from the client's
``*_without_preload_content`` calls); these types say which keys the code relies on,
and every key is optional because a real object may lack any of them.
"""

from __future__ import annotations

from typing import TypedDict


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    labels: dict[str, str]
    annotations: dict[str, str]
    creationTimestamp: str


class NodeSystemInfo(TypedDict, total=False):
    osImage: str
    kubeletVersion: str
    kernelVersion: str
    containerRuntimeVersion: str


class NodeStatus(TypedDict, total=False):
    nodeInfo: NodeSystemInfo


class Node(TypedDict, total=False):
    metadata: ObjectMeta
    status: NodeStatus


class NodeList(TypedDict, total=False):
    items: list[Node]


class Container(TypedDict, total=False):
    name: str
    image: str


class PodSpec(TypedDict, total=False):
    containers: list[Container]
    initContainers: list[Container]


class PodTemplate(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec


class DaemonSetSpec(TypedDict, total=False):
    template: PodTemplate


class DaemonSet(TypedDict, total=False):
    metadata: ObjectMeta
    spec: DaemonSetSpec


class Secret(TypedDict, total=False):
    metadata: ObjectMeta
    type: str
    data: dict[str, str]


class SecretList(TypedDict, total=False):
    items: list[Secret]


class ObjectReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    namespace: str
    uid: str
    resourceVersion: str
