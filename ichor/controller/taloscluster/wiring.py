"""kopf wiring of the TalosCluster controller: thin handlers over ``ClusterController``.

Only low-level ``on.event`` handlers are used: they write nothing to the objects (no
finalizers, no progress annotations), and every decision stays in the controller and the
pure status rules. ``register`` puts the handlers into a registry, so the operator uses
kopf's default registry and a test its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import kopf

from ichor.api import kinds
from ichor.controller import running
from ichor.controller.taloscluster.reconciler import ClusterController
from ichor.kube.clients import operator_client
from ichor.settings import KubeSettings, Settings

#: The memo key of the running controller (and of settings a caller may pass in).
CONTROLLER = "ichor_cluster_controller"
#: The executor's memo key (``talosoperation.wiring.CONTROLLER``).
OPERATION_CONTROLLER = "ichor_operation_controller"
CREDENTIALS = "ichor_credential_settings"
SETTINGS = "ichor_controller_settings"


async def stop(memo: kopf.Memo, **_: Any) -> None:
    await running.stop(memo, CONTROLLER, ClusterController)


async def cluster_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    controller: ClusterController = memo[CONTROLLER]
    controller.cluster_event(event.get("type"), event["object"])


async def operation_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    controller: ClusterController = memo[CONTROLLER]
    controller.operation_event(event.get("type"), event["object"])


async def installation_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    controller: ClusterController = memo[CONTROLLER]
    controller.installation_event(event.get("type"), event["object"])


def login(*, kube: KubeSettings, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a Pod its service account, else ``$KUBECONFIG`` (or ``~/.kube/config``).

    kopf's service-account login names the server ``https://kubernetes.default.svc``,
    which needs the cluster's DNS; the operator's own clients use the address the kubelet
    gives, so kopf is given it too and starts even while cluster DNS does not answer.
    """
    info: kopf.ConnectionInfo | None = kopf.login_with_service_account(**kwargs)
    if info is None:
        return kopf.login_with_kubeconfig(**kwargs)
    server = kube.in_cluster_server
    return dataclasses.replace(info, server=server) if server else info


def register(
    registry: kopf.OperatorRegistry, *, settings: Settings, with_login: bool = True
) -> None:
    """Put the controller's handlers into ``registry``; ``settings`` are the operator's, a
    ``SETTINGS`` memo entry wins for the controller's own part."""

    async def start(memo: kopf.Memo, **kwargs: Any) -> None:
        # The controller posts its own Events; kopf's log-to-Event posting would duplicate
        # them with handler chatter.
        operator_settings: kopf.OperatorSettings = kwargs["settings"]
        operator_settings.posting.enabled = False
        controller = ClusterController(
            api=await operator_client(kube=settings.kube),
            settings=running.part(memo, SETTINGS, settings.clusters),
            credentials=running.part(memo, CREDENTIALS, settings.credentials),
            tenants=running.part(memo, running.TENANT_SETTINGS, settings.tenants),
        )
        await controller.load_installation()
        controller.start()
        memo[CONTROLLER] = controller
        # the executor runs the cluster's health checks between nodes: hand them over
        # (whichever of the two starts second connects them)
        memo[running.HEALTH_GATE] = controller.health_gate
        executor = memo.get(OPERATION_CONTROLLER)
        if executor is not None:
            executor.health_gate = controller.health_gate

    def login_(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return login(kube=settings.kube, **kwargs)

    # Explicit ids: kopf keys an activity's progress by id, and other modules register
    # functions named start/stop too; with equal ids only one of them would run.
    kopf.on.startup(id="clusters-start", registry=registry)(start)
    kopf.on.cleanup(id="clusters-stop", registry=registry)(stop)
    if with_login:
        kopf.on.login(id="ichor-login", registry=registry)(login_)
    # each kind named at its call: the chart's RBAC test reads the watches from the code
    running.watch(registry, kinds.Plural.TALOS_CLUSTERS, cluster_event, id="clusters-cluster-event")
    running.watch(
        registry, kinds.Plural.TALOS_OPERATIONS, operation_event, id="clusters-operation-event"
    )
    running.watch(
        registry,
        kinds.Plural.ICHOR_INSTALLATIONS,
        installation_event,
        id="clusters-installation-event",
    )
