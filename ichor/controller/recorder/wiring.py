"""kopf registration of the recorder, and nothing else: start and stop it (``recorder``)
and hand it the watch events of TalosClusters, TalosOperations and the IchorInstallation.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import kopf

from ichor.api import kinds
from ichor.controller import running
from ichor.controller.recorder.recorder import Recorder
from ichor.kube.clients import operator_client, own_client
from ichor.settings import Settings

#: memo keys: the running recorder, and a kubeconfig to use instead of the operator's
#: own credentials (a test that runs the webhook alone passes the operator's account).
RECORDER = "ichor_recorder"
KUBECONFIG = "ichor_recorder_kubeconfig"


async def stop(memo: kopf.Memo, **_: Any) -> None:
    await running.stop(memo, RECORDER, Recorder)


def recording(plural: kinds.Plural) -> Callable[..., Coroutine[Any, Any, None]]:
    """The handler of the watch events of ``plural``: each but a deletion to the recorder."""

    async def event_of(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        recorder = memo.get(RECORDER)
        if isinstance(recorder, Recorder) and event.get("type") != "DELETED":
            recorder.event(plural, event["object"])

    return event_of


def register(registry: kopf.OperatorRegistry, *, settings: Settings) -> None:
    """Put the recorder's handlers into ``registry`` (the operator and the webhook tests);
    ``settings`` say how to reach the cluster, a ``KUBECONFIG`` memo entry wins."""

    async def start(memo: kopf.Memo, **_: Any) -> None:
        kubeconfig = memo.get(KUBECONFIG)
        if isinstance(kubeconfig, Path):
            api = await own_client(kubeconfig)
        else:
            api = await operator_client(kube=settings.kube)
        recorder = Recorder(api)
        recorder.start()
        memo[RECORDER] = recorder

    kopf.on.startup(id="records-start", registry=registry)(start)
    kopf.on.cleanup(id="records-stop", registry=registry)(stop)

    def record(plural: kinds.Plural, id_: str) -> None:
        running.watch(registry, plural, recording(plural), id=id_)

    # each kind named at its call: the chart's RBAC test reads the watches from the code
    record(kinds.Plural.TALOS_CLUSTERS, "records-cluster-event")
    record(kinds.Plural.TALOS_OPERATIONS, "records-operation-event")
    record(kinds.Plural.ICHOR_INSTALLATIONS, "records-installation-event")
