"""The tenants of the credentials tests: two tenant namespaces and a third holding an
admin's secrets, a tenant user who may create Secrets and TalosClusters and read no
Secret (``mallory``), one who may also read the Secrets of its namespace (``tess``),
and a listener on loopback that records whatever reaches it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from ichor.api import kinds
from tests.harness import controlplane
from tests.support import credential_files

#: What a tenant writes in its namespace: TalosClusters and TalosOperations.
_ICHOR = {
    "apiGroups": [kinds.GROUP],
    "resources": ["talosclusters", "talosoperations"],
    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
}


@dataclass(frozen=True)
class Tenancy:
    plane: controlplane.ControlPlane
    tenant: str  # mallory's and tess's namespace
    other: str  # another tenant's namespace
    vault: str  # an admin's namespace of secrets
    mallory: str  # may create Secrets and TalosClusters, may read no Secret
    tess: str  # may also read the Secrets of the tenant namespace
    #: A string the hostile credentials print; it must appear nowhere.
    canary: str = field(default_factory=lambda: f"CANARY-{uuid.uuid4().hex}")

    def secret(self, name: str, key: str, text: str, *, user: str | None = None) -> None:
        """A Secret in the tenant namespace, created by ``user`` (None: the admin)."""
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": self.tenant},
            "stringData": {key: text},
        }
        self.plane.kubectl("create", "-f", "-", input=json.dumps(body), as_user=user)

    def create_cluster(
        self, name: str, *, user: str | None, dry_run: bool = False, **refs: Any
    ) -> Any:
        body = cluster(name, self.tenant, **refs)
        args = ["create", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
        return self.plane.kubectl(*args, input=json.dumps(body), as_user=user, check=False)

    def patch_cluster(self, name: str, patch: dict[str, Any], *, user: str | None) -> Any:
        return self.plane.kubectl(
            "patch", "taloscluster", name, "-n", self.tenant, "--type=merge",
            "-p", json.dumps(patch), as_user=user, check=False,
        )  # fmt: skip

    def create_operation(self, name: str, cluster_name: str, kind: str, version: str | None,
                         *, user: str) -> Any:  # fmt: skip
        spec: dict[str, Any] = {"clusterRef": {"name": cluster_name}, "type": kind}
        if version is not None:
            spec["version"] = version
        body = {
            "apiVersion": kinds.API_VERSION,
            "kind": kinds.Kind.TALOS_OPERATION.value,
            "metadata": {"name": name, "namespace": self.tenant},
            "spec": spec,
        }
        return self.plane.kubectl(
            "create", "-f", "-", input=json.dumps(body), as_user=user, check=False
        )

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        found = self.plane.kubectl("get", kind, name, "-n", self.tenant, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def jobs(self) -> list[dict[str, Any]]:
        listed = self.plane.kubectl("get", "jobs", "-n", self.tenant, "-o", "json")
        items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
        return items

    def everything_said(self) -> str:
        """Every status and Event of every namespace, as one text."""
        said = []
        for kind in ("talosclusters", "talosoperations", "events"):
            listed = self.plane.kubectl("get", kind, "-A", "-o", "json")
            for item in json.loads(listed.stdout)["items"]:
                said.append(json.dumps(item.get("status") or {}))
                said.append(str(item.get("message") or ""))
        return "\n".join(said)


def cluster(name: str, namespace: str, **refs: Any) -> dict[str, Any]:
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_CLUSTER.value,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
            **refs,
        },
    }


def _role(name: str, namespace: str, rules: list[dict[str, Any]], user: str) -> list[Any]:
    rbac = "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name},
            "subjects": [{"apiGroup": rbac, "kind": "User", "name": user}],
        },
    ]


def tenancy(plane: controlplane.ControlPlane) -> Iterator[Tenancy]:
    """The namespaces and users, removed afterwards (namespaces without waiting)."""
    suffix = uuid.uuid4().hex[:6]
    made = Tenancy(
        plane=plane,
        tenant=f"tenant-a-{suffix}",
        other=f"tenant-b-{suffix}",
        vault=f"vault-{suffix}",
        mallory=f"mallory-{suffix}",
        tess=f"tess-{suffix}",
    )
    for namespace in (made.tenant, made.other, made.vault):
        plane.kubectl("create", "namespace", namespace)
    create_secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}
    read_secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}
    objects = [
        *_role("tenant-writer", made.tenant, [_ICHOR, create_secrets], made.mallory),
        *_role("tenant-reader", made.tenant, [_ICHOR, create_secrets, read_secrets], made.tess),
    ]
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    made.plane.kubectl(
        "create", "secret", "generic", "database", "-n", made.vault,
        f"--from-literal=password={made.canary}-vault",
    )  # fmt: skip
    try:
        yield made
    finally:
        for namespace in (made.tenant, made.other, made.vault):
            plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def admin_kubeconfig(plane: controlplane.ControlPlane, server: str | None = None) -> str:
    """The control plane's admin kubeconfig (inline certificates), at ``server``."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    if server is not None:
        config["clusters"][0]["cluster"]["server"] = server
    return credential_files.text(config)


class Listener:
    """A TCP listener on loopback that records every connection and byte it receives
    and answers nothing."""

    def __init__(self) -> None:
        self.connections = 0
        self.received = bytearray()
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> Listener:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while chunk := await reader.read(65536):
                self.received += chunk
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
