"""The operator process: every controller and the admission webhook in one kopf run.

``python -m ichor.operator`` (or ``run()``) registers the TalosCluster controller, the
release check and the webhook handlers into kopf's default registry and runs kopf for
the whole cluster. It decides nothing itself; it only puts the parts together.

Settings come from the environment, so the chart's Deployment sets them:
``ICHOR_OBSERVE_INTERVAL`` and friends (see ``ControllerSettings.from_env``), and for the
webhook ``ICHOR_WEBHOOK_CERT``, ``ICHOR_WEBHOOK_KEY`` (paths), ``ICHOR_WEBHOOK_PORT``
(default 9443) and ``ICHOR_WEBHOOK_ADDR`` (default 127.0.0.1; the chart sets 0.0.0.0),
``ICHOR_WEBHOOK_CLIENT_CA`` (a path: mutual TLS, only a client certificate this CA signed
may call the webhook) and ``ICHOR_WEBHOOK_CLIENT_NAMES`` (comma-separated common names the
client certificate must have),
and ``ICHOR_LIVENESS_ENDPOINT`` (for example ``http://0.0.0.0:8080/healthz``). Without a
certificate the webhook server is not started (a local run of the controller alone).
``ICHOR_METRICS_PORT`` (and ``ICHOR_METRICS_ADDR``, default 0.0.0.0) serves Prometheus
metrics (``ichor.kube.metrics``); unset, none are served. Without ``ICHOR_PEERING`` it runs
standalone as one replica; with it (the name of a ClusterKopfPeering, which the chart
creates when ``replicas`` > 1) kopf's peering lets one replica run the handlers while every
replica serves the webhook, each with a random priority so that two never tie.

kopf names the process in its peering by ``POD_ID`` (the chart sets the Pod's name), else
after its user; a user with no name (a uid without a passwd entry and no ``USER``, as an
arbitrary ``runAsUser`` gives) is named ``uid<N>`` rather than ending the process at start.
"""

from __future__ import annotations

import asyncio
import getpass
import importlib
import logging
import os
import random
from pathlib import Path
from typing import Any

import kopf

from ichor.controller import handlers as cluster_handlers
from ichor.kube import metrics

logger = logging.getLogger("ichor.operator")

#: Modules that register their handlers in the default registry when imported, or expose
#: ``register(registry)``; a module not present in this build is skipped.
OPTIONAL_MODULES = (
    "ichor.controller.releasecheck",
    "ichor.controller.operations",
    "ichor.controller.records",
)
WEBHOOK_MODULE = "ichor.webhook.handlers"


def _load_optional(name: str, registry: kopf.OperatorRegistry) -> bool:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        return False
    register = getattr(module, "register", None)
    if callable(register):
        register(registry)
    return True


def _configure_webhook(registry: kopf.OperatorRegistry) -> None:
    cert, key = os.environ.get("ICHOR_WEBHOOK_CERT"), os.environ.get("ICHOR_WEBHOOK_KEY")
    if not (cert and key):
        logger.warning("no ICHOR_WEBHOOK_CERT/ICHOR_WEBHOOK_KEY: the webhook is not served")
        return
    if not _load_optional(WEBHOOK_MODULE, registry):
        return
    server = importlib.import_module("ichor.webhook.server")

    client_ca = os.environ.get("ICHOR_WEBHOOK_CLIENT_CA") or None
    names = [n for n in (os.environ.get("ICHOR_WEBHOOK_CLIENT_NAMES") or "").split(",") if n]

    async def configure_webhook(settings: kopf.OperatorSettings, **_: Any) -> None:
        server.configure(
            settings,
            port=int(os.environ.get("ICHOR_WEBHOOK_PORT") or 9443),
            certfile=Path(cert),
            pkeyfile=Path(key),
            client_ca=Path(client_ca) if client_ca else None,
            client_names=names,
            addr=os.environ.get("ICHOR_WEBHOOK_ADDR") or "127.0.0.1",
        )

    kopf.on.startup(id="webhook-configure", registry=registry)(configure_webhook)


def build_registry(registry: kopf.OperatorRegistry | None = None) -> kopf.OperatorRegistry:
    """``registry`` (kopf's default one if not given) with every part of this build."""
    registry = registry if registry is not None else kopf.get_default_registry()
    cluster_handlers.register(registry)
    for name in OPTIONAL_MODULES:
        _load_optional(name, registry)
    _configure_webhook(registry)
    return registry


async def main() -> None:
    registry = build_registry()
    if port := os.environ.get("ICHOR_METRICS_PORT"):
        metrics.serve(port=int(port), addr=os.environ.get("ICHOR_METRICS_ADDR") or "0.0.0.0")
    peering = os.environ.get("ICHOR_PEERING") or None
    await kopf.operator(
        registry=registry,
        clusterwide=True,
        standalone=peering is None,
        peering_name=peering,
        priority=random.randint(1, 2**30) if peering else None,
        liveness_endpoint=os.environ.get("ICHOR_LIVENESS_ENDPOINT") or None,
    )


def name_the_user() -> None:
    """Give ``getpass.getuser()`` a name when the uid has none, for kopf's identity.

    kopf calls it at every start unless ``POD_ID`` is set; for a uid without a passwd entry
    and no ``USER``/``LOGNAME`` it raises, and the operator would exit before doing anything.
    """
    if os.environ.get("POD_ID") is not None:
        return
    try:
        getpass.getuser()
    except (KeyError, OSError):  # KeyError up to Python 3.12, OSError from 3.13
        uid = os.getuid()
        os.environ["USER"] = f"uid{uid}"
        logger.info("uid %d has no name and POD_ID is unset: kopf names it uid%d", uid, uid)


def run() -> None:
    logging.basicConfig(
        level=os.environ.get("ICHOR_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    name_the_user()
    asyncio.run(main())


if __name__ == "__main__":
    run()
