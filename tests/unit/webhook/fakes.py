"""A backend that answers from memory and records what the handlers asked of it."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ichor.kube import identity
from ichor.webhook import judgement, kubeapi
from ichor.webhook.reviews import NamespacedName, Requester


@dataclass
class FakeBackend:
    clusters: dict[NamespacedName, Mapping[str, Any]] = field(default_factory=dict)
    operations: list[Mapping[str, Any]] = field(default_factory=list)
    holders: set[str] = field(default_factory=set)
    fail: bool = False
    operator: str = "system:serviceaccount:ichor-system:ichor"
    reviews: list[tuple[Requester, NamespacedName]] = field(default_factory=list)
    #: Who may ``get`` each Secret (by ``namespace/name``); None: every user may read
    #: every Secret. ``secret_reviews`` records what was asked.
    secret_readers: dict[str, set[str]] | None = None
    secret_reviews: list[tuple[Requester, NamespacedName]] = field(default_factory=list)
    #: Events the webhook wrote: it has no call that writes one (the operator posts the
    #: Events of what it admitted once the object is stored), so this stays empty.
    events: list[tuple[NamespacedName, str, str | None]] = field(default_factory=list)
    #: The IchorInstallation (None: there is none); ``installation_reads`` counts reads.
    installation: Mapping[str, Any] | None = None
    installation_reads: int = 0

    def _check(self) -> None:
        if self.fail:
            raise kubeapi.ApiUnavailable("the API server did not answer")

    async def own_identity(self) -> identity.Identity:
        self._check()
        return identity.Identity(username=self.operator)

    async def read_cluster(self, ref: NamespacedName) -> Mapping[str, Any] | None:
        self._check()
        return self.clusters.get(ref)

    async def list_operations(self, namespace: str) -> list[Mapping[str, Any]]:
        self._check()
        return [
            op for op in self.operations if (op.get("metadata") or {}).get("namespace") == namespace
        ]

    async def holds_override(self, requester: Requester, ref: NamespacedName) -> bool:
        self._check()
        self.reviews.append((requester, ref))
        return requester.username in self.holders

    async def read_installation(self) -> Mapping[str, Any] | None:
        self._check()
        self.installation_reads += 1
        return self.installation

    async def may_read_secret(self, requester: Requester, ref: NamespacedName) -> bool:
        self._check()
        self.secret_reviews.append((requester, ref))
        if self.secret_readers is None:
            return True
        return requester.username in self.secret_readers.get(str(ref), set())


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


async def stamped(
    new: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None,
    userinfo: Mapping[str, Any],
    operation: str,
    backend: FakeBackend,
    kind: str = "TalosCluster",
) -> dict[str, Any]:
    """``new`` as the webhook's mutating half leaves it: judged with a twin of ``backend``
    (so the calls of that half are not counted), its stamp set into the annotations."""
    twin = dataclasses.replace(backend, reviews=[], secret_reviews=[])
    judge = judgement.judge_cluster if kind == "TalosCluster" else judgement.judge_operation
    judged = await judge(new=new, old=old, userinfo=userinfo, operation=operation, backend=twin)
    body = copy.deepcopy(dict(new))
    if judged.stamp is not None:
        annotations = body.setdefault("metadata", {}).setdefault("annotations", {})
        for key, value in judged.stamp.annotations().items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        if not annotations:
            body["metadata"].pop("annotations")
    return body
