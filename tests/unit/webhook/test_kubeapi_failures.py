"""Every failed API call of the webhook leaves the write undecided (``ApiUnavailable``),
also those aiohttp raises that are no OSError (a server that hung up, a cut body)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from kubernetes.aio.client.api_client import ApiClient

from ichor.settings import KubeSettings
from ichor.webhook import kubeapi
from ichor.webhook.reviews import NamespacedName

CLUSTER = NamespacedName(namespace="fleet", name="prod")


class Failing(kubeapi.KubeBackend):
    """The real calls over a client whose every request fails with ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(kube=KubeSettings())
        self.error = error

    async def _api(self) -> ApiClient:
        api = ApiClient()

        async def call_api(*_: Any, **__: Any) -> Any:
            raise self.error

        api.call_api = call_api  # type: ignore[method-assign]
        return api


@pytest.mark.parametrize(
    "error",
    [
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientPayloadError("the body was cut"),
        TimeoutError(),
        ConnectionRefusedError(),
    ],
    ids=["disconnected", "payload", "timeout", "refused"],
)
async def test_a_failed_read_or_list_is_unavailable_not_an_error(error: BaseException) -> None:
    backend = Failing(error)
    with pytest.raises(kubeapi.ApiUnavailable, match="reading TalosCluster"):
        await backend.read_cluster(CLUSTER)
    with pytest.raises(kubeapi.ApiUnavailable, match="listing the TalosOperations"):
        await backend.list_operations("fleet")
