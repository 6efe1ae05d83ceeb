"""What the controllers keyed by TalosCluster hold alike: the operator's client, their
part of the settings, how a workload cluster is read (as whose account, and what a
Secret may set beyond inline credentials), and a work queue of clusters in which one
namespace's clusters share at most ``group_workers``: its slow ones wait for each
other, never the other namespaces' clusters.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from kubernetes.aio.client.api_client import ApiClient

from ichor.controller.queue import WorkQueue
from ichor.settings import CredentialSettings, TenantSettings

Key = tuple[str, str]  # (namespace, TalosCluster name)


class KeyedSettings(Protocol):
    @property
    def workers(self) -> int: ...

    @property
    def group_workers(self) -> int: ...


S = TypeVar("S", bound=KeyedSettings)


def namespace(key: Key) -> str:
    return key[0]


class ClusterKeyed(Generic[S]):
    """A controller that reconciles one TalosCluster's key at a time."""

    def __init__(
        self,
        api: ApiClient,
        settings: S,
        *,
        tenants: TenantSettings | None = None,
        credentials: CredentialSettings | None = None,
    ) -> None:
        self.api = api
        self.settings = settings
        #: As whose account a cluster without a kubeconfig Secret is read.
        self.tenants = tenants or TenantSettings()
        #: What a kubeconfig or talosconfig Secret may set beyond inline credentials
        #: (proxy, insecure TLS).
        self.credentials = credentials or CredentialSettings()
        self.queue: WorkQueue[Key] = WorkQueue(
            self.reconcile,
            workers=settings.workers,
            group=namespace,
            group_workers=settings.group_workers,
        )

    async def reconcile(self, key: Key) -> None:
        raise NotImplementedError
