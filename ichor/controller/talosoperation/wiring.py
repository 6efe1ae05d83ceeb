"""kopf registration of the TalosOperation controller, and nothing else: start and stop
the executor (``executor``) and hand it the watch events of TalosOperations and of the
Jobs it made. The decisions are pure (``lifecycle``, ``jobs``); the API calls are the
executor's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from ichor.api import kinds
from ichor.controller import running
from ichor.controller.talosoperation import jobs
from ichor.controller.talosoperation.executor import OperationController
from ichor.kube.clients import operator_client
from ichor.settings import Settings

#: memo keys: the running controller, and settings a caller may pass in.
CONTROLLER = "ichor_operation_controller"
CREDENTIALS = "ichor_credential_settings"
SETTINGS = "ichor_operation_settings"


async def stop(memo: kopf.Memo, **_: Any) -> None:
    if await running.stop(memo, CONTROLLER, OperationController) is not None:
        # let the closed connections' transports finish closing before the loop ends
        await asyncio.sleep(0.1)


async def operation_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    controller = memo.get(CONTROLLER)
    if isinstance(controller, OperationController):
        controller.operation_event(event["object"])


async def job_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    controller = memo.get(CONTROLLER)
    if isinstance(controller, OperationController):
        controller.job_event(event["object"])


def register(registry: kopf.OperatorRegistry, *, settings: Settings) -> None:
    """Put the executor's handlers into ``registry``; ``settings`` are the operator's, a
    ``SETTINGS`` memo entry wins for the controller's own part."""

    async def start(memo: kopf.Memo, **_: Any) -> None:
        controller = OperationController(
            api=await operator_client(kube=settings.kube),
            settings=running.part(memo, SETTINGS, settings.operations),
            credentials=running.part(memo, CREDENTIALS, settings.credentials),
            tenants=running.part(memo, running.TENANT_SETTINGS, settings.tenants),
        )
        controller.start()
        gate = memo.get(running.HEALTH_GATE)
        if gate is not None:
            controller.health_gate = gate
        memo[CONTROLLER] = controller

    kopf.on.startup(id="operations-start", registry=registry)(start)
    kopf.on.cleanup(id="operations-stop", registry=registry)(stop)
    running.watch(registry, kinds.Plural.TALOS_OPERATIONS, operation_event, id="operation-event")
    kopf.on.event(
        "batch",
        "v1",
        "jobs",
        id="operation-job-event",
        labels={jobs.MANAGED_BY_LABEL: jobs.MANAGED_BY},
        registry=registry,
    )(job_event)
