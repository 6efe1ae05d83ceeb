"""The operator process: every controller and the admission webhook in one kopf run.

``python -m ichor.operator`` (or ``run()``) reads the settings once (``Settings.from_env``),
registers every part into kopf's default registry (``build_registry``) and runs kopf for
the whole cluster. It decides nothing itself. Without a certificate the webhook is not
served; with ``ICHOR_PEERING`` one replica runs the handlers and every replica serves the
webhook. After SIGTERM the process ends within ``EXIT_TIMEOUT`` seconds.

More in docs/design/notes.md, "ichor/operator.py".
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import random
import signal
from typing import Any

import kopf

from ichor.controller.recorder import wiring as recorder_wiring
from ichor.controller.releasecheck import wiring as releasecheck_wiring
from ichor.controller.taloscluster import wiring as cluster_wiring
from ichor.controller.talosoperation import wiring as operation_wiring
from ichor.kube import allocator, metrics
from ichor.settings import Settings
from ichor.webhook import readiness as readiness_endpoint
from ichor.webhook import wiring as webhook_wiring

logger = logging.getLogger("ichor.operator")

#: Seconds from SIGTERM to the end of the process, at most: kopf kills it then (its own
#: default is ten minutes). Under the 30 s the chart gives the Pod
#: (``terminationGracePeriodSeconds``), so the kubelet never has to.
EXIT_TIMEOUT = 20.0


async def bound_the_exit(settings: kopf.OperatorSettings, **_: Any) -> None:
    """kopf's last resort after SIGTERM: SIGKILL once ``EXIT_TIMEOUT`` has passed."""
    settings.process.ultimate_exiting_timeout = EXIT_TIMEOUT


def build_registry(
    registry: kopf.OperatorRegistry | None = None,
    *,
    settings: Settings,
    readiness: readiness_endpoint.Readiness | None = None,
) -> kopf.OperatorRegistry:
    """``registry`` (kopf's default one if not given) with every part of the operator,
    each handed its part of ``settings``; the webhook tells ``readiness`` when it serves."""
    registry = registry if registry is not None else kopf.get_default_registry()
    kopf.on.startup(id="operator-exit", registry=registry)(bound_the_exit)
    cluster_wiring.register(registry, settings=settings)
    releasecheck_wiring.register(registry, settings=settings)
    operation_wiring.register(registry, settings=settings)
    recorder_wiring.register(registry, settings=settings)
    webhook_wiring.register(registry, settings=settings, readiness=readiness)
    return registry


async def main(settings: Settings) -> None:
    readiness = readiness_endpoint.Readiness(webhook=settings.webhook.served)
    registry = build_registry(settings=settings, readiness=readiness)
    if settings.metrics.port is not None:
        metrics.serve(port=settings.metrics.port, addr=settings.metrics.addr)
    probe: asyncio.Task[None] | None = None
    if settings.readiness_endpoint:
        probe = asyncio.create_task(
            readiness_endpoint.serve(settings.readiness_endpoint, readiness)
        )
    # the chart's preStop: drain before SIGTERM (a signal, so nothing on the network can)
    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, readiness.drain)
    peering = settings.peering
    try:
        await kopf.operator(
            registry=registry,
            clusterwide=True,
            standalone=peering is None,
            peering_name=peering,
            priority=random.randint(1, 2**30) if peering else None,
            liveness_endpoint=settings.liveness_endpoint,
        )
    finally:
        if probe is not None:
            probe.cancel()
            await asyncio.gather(probe, return_exceptions=True)


def name_the_user(settings: Settings) -> None:
    """Give ``getpass.getuser()`` a name when the uid has none, for kopf's identity.

    kopf calls it at every start unless ``POD_ID`` is set; for a uid without a passwd entry
    and no ``USER``/``LOGNAME`` it raises, and the operator would exit before doing anything.
    The name is written into the environment, where ``getpass`` (and so kopf) looks.
    """
    if settings.pod_id is not None:
        return
    try:
        getpass.getuser()
    except (KeyError, OSError):  # KeyError up to Python 3.12, OSError from 3.13
        uid = os.getuid()
        os.environ["USER"] = f"uid{uid}"
        logger.info("uid %d has no name and POD_ID is unset: kopf names it uid%d", uid, uid)


def run() -> None:
    """Read the settings (the one reading of the environment) and run with them."""
    settings = Settings.from_env()
    if settings.log_format == "json":
        # kopf's JSON lines: message, severity, timestamp, and the object a line is about
        kopf.configure(log_format=kopf.LogFormat.JSON, log_prefix=False)
        logging.getLogger().setLevel(settings.log_level)
    else:
        logging.basicConfig(
            level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    name_the_user(settings)
    allocator.keep_large_buffers_mapped(environment_sets=settings.malloc_mmap_threshold is not None)
    asyncio.run(main(settings))


if __name__ == "__main__":
    run()
