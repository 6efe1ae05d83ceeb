"""A backend that answers from memory and records what the handlers asked of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ichor.kube import identity
from ichor.webhook import kubeapi
from ichor.webhook.reviews import ClusterRef, Requester


@dataclass
class FakeBackend:
    clusters: dict[ClusterRef, Mapping[str, Any]] = field(default_factory=dict)
    operations: list[Mapping[str, Any]] = field(default_factory=list)
    holders: set[str] = field(default_factory=set)
    fail: bool = False
    operator: str = "system:serviceaccount:ichor-system:ichor"
    reviews: list[tuple[Requester, ClusterRef]] = field(default_factory=list)
    events: list[tuple[ClusterRef, str, str | None]] = field(default_factory=list)

    def _check(self) -> None:
        if self.fail:
            raise kubeapi.ApiUnavailable("the API server did not answer")

    async def own_identity(self) -> identity.Identity:
        self._check()
        return identity.Identity(username=self.operator)

    async def read_cluster(self, ref: ClusterRef) -> Mapping[str, Any] | None:
        self._check()
        return self.clusters.get(ref)

    async def list_operations(self, namespace: str) -> list[Mapping[str, Any]]:
        self._check()
        return [
            op for op in self.operations if (op.get("metadata") or {}).get("namespace") == namespace
        ]

    async def holds_override(self, requester: Requester, ref: ClusterRef) -> bool:
        self._check()
        self.reviews.append((requester, ref))
        return requester.username in self.holders

    async def record_override(self, ref: ClusterRef, *, message: str, uid: str | None) -> None:
        self._check()
        self.events.append((ref, message, uid))


def taloscluster(
    *,
    talos: str = "v1.14.3",
    kubernetes: str = "v1.36.6",
    contract: str = "v1.14",
    cilium: str | None = None,
    namespace: str = "team-a",
    name: str = "prod",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
        "spec": {
            "talosVersion": talos,
            "kubernetesVersion": kubernetes,
            "versionContract": contract,
        },
    }
    if cilium is not None:
        body["status"] = {"cni": {"detected": "cilium", "detectedVersion": cilium}}
    return body


def talosoperation(
    kind: str, version: str | None = None, *, override: bool = False, cluster: str = "prod"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterRef": {"name": cluster}, "type": kind, "override": override}
    if version is not None:
        spec["version"] = version
    return {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"name": "up", "namespace": "team-a"},
        "spec": spec,
    }


def userinfo(name: str = "alice") -> dict[str, Any]:
    return {"username": name, "uid": "u-1", "groups": ["ops"], "extra": {"scopes": ["a"]}}
