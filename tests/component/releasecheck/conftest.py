"""The release check in-process against the real API server and the real test registry.

The operator runs with the TalosCluster controller and the release check, like the
deployed one (``ichor.operator``), with a cap of one second on the check's interval so a
test sees several checks. Each test seeds repositories of its own in the session
registry, so tests never see each other's tags.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor import registry
from ichor.api import kinds
from ichor.controller.releasecheck import wiring as releasecheck_wiring
from ichor.controller.releasecheck.check import ReleaseCheck
from ichor.settings import ReleaseCheckSettings, Settings
from tests.component.controller.conftest import (  # noqa: F401  (fixtures used here)
    FAST,
    Objects,
    Operator,
    objects,
    workload,
)
from tests.component.registry.conftest import (  # noqa: F401  (fixtures used here)
    fault_proxy,
    fault_proxy_session,
)
from tests.harness import registry as test_registry
from tests.support import operator as support

CHECK_EVERY_SECOND = ReleaseCheckSettings(
    retry_failed=1.0,
    jitter=0.0,
    retry_write=1.0,
    max_interval=1.0,
    running_version="0.1.0",
    limits=registry.Limits(total_timeout=10.0, request_timeout=5.0, max_retries=1),
)


class CheckingOperator(Operator):
    """The controller's test operator with the release check registered as well."""

    def __init__(self, settings: ReleaseCheckSettings) -> None:
        super().__init__(FAST)
        releasecheck_wiring.register(self.registry, settings=Settings.from_env())
        self.memo[releasecheck_wiring.SETTINGS] = settings

    @property
    def check(self) -> ReleaseCheck:
        found = self.memo[releasecheck_wiring.RELEASE_CHECK]
        assert isinstance(found, ReleaseCheck)
        return found


@pytest_asyncio.fixture(loop_scope="session")
async def checking_operator(
    crds: None,
    operator_kubeconfig: Path,
    request: pytest.FixtureRequest,
) -> AsyncIterator[CheckingOperator]:
    running = CheckingOperator(getattr(request, "param", CHECK_EVERY_SECOND))
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


@dataclass(frozen=True)
class Repositories:
    """Three repositories of one test in the session registry, and their references."""

    registry: test_registry.LocalRegistry
    prefix: str

    def name(self, what: str) -> str:
        return f"{self.prefix}/{what}"

    def reference(self, what: str) -> str:
        return self.registry.reference(self.name(what))

    async def seed(self, what: str, tags: list[str]) -> None:
        await self.registry.aseed(self.name(what), tags)

    def spec(self, **overrides: Any) -> dict[str, Any]:
        return {
            "talosRepository": self.reference("installer-base"),
            "kubernetesRepository": self.reference("kubelet"),
            "chartRepository": self.reference("charts/ichor"),
            "interval": "1m",
            **overrides,
        }


@pytest.fixture
def repositories(running_registry: test_registry.LocalRegistry) -> Repositories:
    """Names of this test's own (the session registry is restarted if the test stops it)."""
    return Repositories(running_registry, f"rc-{uuid.uuid4().hex[:8]}")


class Installation:
    """The IchorInstallation singleton and the Events about it."""

    def __init__(self, api: ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    async def apply(
        self, release_check: dict[str, Any], status: dict[str, Any] | None = None
    ) -> None:
        await support.apply_installation(self.custom, release_check, status)

    async def get(self) -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await self.custom.get_cluster_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                kinds.Plural.ICHOR_INSTALLATIONS,
                kinds.INSTALLATION_NAME,
            ),
        )
        return found

    async def events(self) -> list[tuple[str, str, str]]:
        """(type, reason, message) of the Events about the object, oldest first."""
        uid = (await self.get())["metadata"]["uid"]
        found = await self.core.list_namespaced_event(
            "default", field_selector=f"involvedObject.uid={uid}"
        )
        items = sorted(found.items, key=lambda e: (e.first_timestamp, e.metadata.name))
        return [(str(e.type), str(e.reason), str(e.message)) for e in items]


@pytest_asyncio.fixture(loop_scope="session")
async def installation(
    crds: None,
    kube_api: ApiClient,
    objects: Objects,  # noqa: F811  (deletes the singleton afterwards)
) -> AsyncIterator[Installation]:
    yield Installation(kube_api)
