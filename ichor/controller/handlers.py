"""kopf wiring of the TalosCluster controller: thin handlers over ``ClusterController``.

Only low-level ``on.event`` handlers are used: they write nothing to the objects (no
finalizers, no progress annotations), and every decision stays in the controller and the
pure status rules. ``register`` puts the handlers into a registry, so the operator uses
kopf's default registry and a test its own.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import kopf

from ichor.api import kinds
from ichor.controller.clusters import ClusterController, ControllerSettings
from ichor.kube.clients import operator_client

#: The memo key of the running controller (and of settings a caller may pass in).
CONTROLLER = "ichor_cluster_controller"
SETTINGS = "ichor_controller_settings"


async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # The controller posts its own Events; kopf's log-to-Event posting would duplicate
    # them with handler chatter.
    settings.posting.enabled = False
    given = memo.get(SETTINGS)
    controller = ClusterController(
        api=await operator_client(),
        settings=given if isinstance(given, ControllerSettings) else ControllerSettings.from_env(),
    )
    await controller.load_installation()
    controller.start()
    memo[CONTROLLER] = controller


async def stop(memo: kopf.Memo, **_: Any) -> None:
    controller = memo.get(CONTROLLER)
    if isinstance(controller, ClusterController):
        await controller.stop()
        await controller.api.close()


async def cluster_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    controller: ClusterController = memo[CONTROLLER]
    controller.cluster_event(event.get("type"), event["object"])


async def operation_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    controller: ClusterController = memo[CONTROLLER]
    controller.operation_event(event.get("type"), event["object"])


async def installation_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    controller: ClusterController = memo[CONTROLLER]
    controller.installation_event(event.get("type"), event["object"])


def in_cluster_server(environ: Mapping[str, str]) -> str | None:
    """The API server's address as the kubelet gives it to every container
    (``KUBERNETES_SERVICE_HOST``/``_PORT``, which client-go reads too), or None."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not (host and port):
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a Pod its service account, else ``$KUBECONFIG`` (or ``~/.kube/config``).

    kopf's service-account login names the server ``https://kubernetes.default.svc``,
    which needs the cluster's DNS; the operator's own clients use the address the kubelet
    gives, so kopf is given it too and starts even while cluster DNS does not answer.
    """
    info: kopf.ConnectionInfo | None = kopf.login_with_service_account(**kwargs)
    if info is None:
        return kopf.login_with_kubeconfig(**kwargs)
    server = in_cluster_server(os.environ)
    return dataclasses.replace(info, server=server) if server else info


def register(registry: kopf.OperatorRegistry, *, with_login: bool = True) -> None:
    """Put the controller's handlers into ``registry``."""
    # Explicit ids: kopf keys an activity's progress by id, and other modules register
    # functions named start/stop too; with equal ids only one of them would run.
    kopf.on.startup(id="clusters-start", registry=registry)(start)
    kopf.on.cleanup(id="clusters-stop", registry=registry)(stop)
    if with_login:
        kopf.on.login(id="ichor-login", registry=registry)(login)
    kopf.on.event(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.TALOS_CLUSTERS,
        id="clusters-cluster-event",
        registry=registry,
    )(cluster_event)
    kopf.on.event(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.TALOS_OPERATIONS,
        id="clusters-operation-event",
        registry=registry,
    )(operation_event)
    kopf.on.event(
        kinds.GROUP,
        kinds.VERSION,
        kinds.Plural.ICHOR_INSTALLATIONS,
        id="clusters-installation-event",
        registry=registry,
    )(installation_event)
