"""The TalosCluster controller's choice of the account that reads a cluster without a
kubeconfig, and what a change of it does (no API server: the queue is a stand-in)."""

from __future__ import annotations

from typing import Any, cast

from kubernetes.aio.client.api_client import ApiClient

from ichor.api.taloscluster import TalosClusterSpec
from ichor.controller.taloscluster.reconciler import ClusterController, _Cluster
from ichor.kube.accounts import Origin, ServiceAccount, Unnamed
from ichor.settings import ControllerSettings, TenantSettings

SPEC = {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"}


class Queue:
    def __init__(self) -> None:
        self.added: list[tuple[str, str]] = []

    def add(self, key: tuple[str, str]) -> None:
        self.added.append(key)


def _controller(*, required: bool) -> tuple[ClusterController, Queue]:
    controller = ClusterController(
        cast(ApiClient, object()),
        ControllerSettings(),
        TenantSettings(require_service_account=required),
    )
    queue = Queue()
    controller.queue = cast(Any, queue)
    return controller, queue


def _installation(default: str | None) -> dict[str, Any]:
    spec = {"releaseCheck": {"enabled": True}}
    return {"spec": {**spec, "defaultServiceAccountName": default} if default else spec}


def test_the_controller_chooses_with_the_spec_the_fleet_and_its_setting() -> None:
    controller, _ = _controller(required=True)
    spec = TalosClusterSpec.model_validate(SPEC)
    assert isinstance(controller._account("team-a", spec), Unnamed)
    controller.installation_event("ADDED", _installation("fleet"))
    assert controller._account("team-a", spec) == ServiceAccount("team-a", "fleet", Origin.FLEET)
    own = TalosClusterSpec.model_validate({**SPEC, "serviceAccountName": "own"})
    assert controller._account("team-a", own) == ServiceAccount("team-a", "own", Origin.SPEC)
    loose, _ = _controller(required=False)
    assert loose._account("team-a", spec) == ServiceAccount("team-a", "default", Origin.NAMESPACE)


def test_a_new_fleet_default_looks_at_every_cluster_again() -> None:
    """Only the fleet's default changed: each cluster it may read for is reconciled now,
    not at its next observation (minutes away for a failing one)."""
    controller, queue = _controller(required=True)
    controller.installation_event("ADDED", _installation(None))
    controller.clusters[("team-a", "prod")] = _Cluster(body={"spec": SPEC})
    queue.added.clear()
    controller.installation_event("MODIFIED", _installation(None))
    assert queue.added == []
    controller.installation_event("MODIFIED", _installation("fleet"))
    assert queue.added == [("team-a", "prod")]
    controller.installation_event("DELETED", _installation("fleet"))
    assert queue.added == [("team-a", "prod")] * 2
