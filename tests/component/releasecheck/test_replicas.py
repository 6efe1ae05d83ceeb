"""Two replicas: a check another replica has done is neither repeated nor overwritten.

The checks here are driven by hand (no kopf), each with the object as a lagging watch
would have shown it, against the real API server and registry.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes.aio.client.api_client import ApiClient

from ichor.controller.releasecheck.check import ReleaseCheck
from tests.component.releasecheck.conftest import CHECK_EVERY_SECOND, Installation, Repositories

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

LATER = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
THEIRS = {"checkedAt": LATER, "talos": ["v9.9.9"], "kubernetes": ["v9.9.9"]}


async def replica(kube_api: ApiClient, body: dict[str, Any]) -> ReleaseCheck:
    check = ReleaseCheck(api=kube_api, settings=replace(CHECK_EVERY_SECOND, max_interval=None))
    check.installation_event("ADDED", body)
    return check


async def test_a_check_done_by_another_replica_is_not_repeated(
    kube_api: ApiClient, installation: Installation, repositories: Repositories
) -> None:
    await repositories.seed("installer-base", ["v1.14.3"])
    await installation.apply(repositories.spec())
    lagging = await installation.get()  # no status yet: due at once
    await installation.apply(repositories.spec(), status={"upgradeTargets": THEIRS})
    body = await installation.get()
    await installation.apply(  # as the other replica records it: this generation checked
        repositories.spec(), status={"observedGeneration": body["metadata"]["generation"]}
    )
    check = await replica(kube_api, lagging)
    try:
        assert check.delay(datetime.now(UTC)) == 0  # the watch's copy says: due
        assert await check._still_due() is False  # the object says: done an hour from now
        assert check.checks == 0
    finally:
        await check.lister.close()


async def test_a_check_that_lost_the_race_drops_its_result(
    kube_api: ApiClient, installation: Installation, repositories: Repositories
) -> None:
    await repositories.seed("installer-base", ["v1.14.3"])
    await repositories.seed("kubelet", ["v1.36.6"])
    await installation.apply(repositories.spec())
    lagging = await installation.get()
    # the other replica wrote while this one was listing
    await installation.apply(repositories.spec(), status={"upgradeTargets": THEIRS})
    check = await replica(kube_api, lagging)
    try:
        await check.check()  # its write fails on the resourceVersion; the re-read is newer
    finally:
        await check.lister.close()
    assert check.checks == 1
    status = (await installation.get())["status"]
    assert status["upgradeTargets"] == THEIRS
    assert "latestRelease" not in status
    assert await installation.events() == []


async def test_a_conflict_with_an_older_check_is_recomputed_and_written(
    kube_api: ApiClient, installation: Installation, repositories: Repositories
) -> None:
    await repositories.seed("installer-base", ["v1.14.3"])
    await installation.apply(repositories.spec())
    lagging = await installation.get()
    earlier = {"checkedAt": "2026-01-01T00:00:00Z", "talos": ["v1.0.0"], "cilium": ["1.20.5"]}
    await installation.apply(repositories.spec(), status={"upgradeTargets": earlier})
    check = await replica(kube_api, lagging)
    try:
        await check.check()
    finally:
        await check.lister.close()
    targets = (await installation.get())["status"]["upgradeTargets"]
    assert targets["talos"] == ["v1.14.3"]
    assert "cilium" not in targets  # merged into the fresh status, not the stale one
