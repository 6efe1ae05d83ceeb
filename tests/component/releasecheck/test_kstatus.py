"""The IchorInstallation as the tools that wait on objects read it (the real kstatus):
Current once a check listed every repository, InProgress (not Failed: the next check
retries) while one listing fails, and Current again once it recovers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ichor.api import kinds
from tests.component.controller.conftest import condition, eventually
from tests.component.releasecheck.conftest import CheckingOperator, Installation, Repositories
from tests.component.releasecheck.test_release_check import seeded, targets
from tests.harness import controlplane
from tests.support import kstatus
from tests.support.kstatus import Ref, Status

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

REF = Ref(
    kinds.GROUP,
    kinds.VERSION,
    kinds.Plural.ICHOR_INSTALLATIONS.value,
    "",
    kinds.INSTALLATION_NAME,
)


async def _kstatus(plane: controlplane.ControlPlane) -> kstatus.Result:
    (result,) = await asyncio.to_thread(kstatus.read, plane.kubeconfig, [REF])
    return result


def _judged(body: dict[str, Any]) -> bool:
    """The operator's status speaks of the stored generation (not of an earlier spec, as
    an installation another test left behind would)."""
    generation = body["metadata"]["generation"]
    status = body.get("status") or {}
    return status.get("observedGeneration") == generation and all(
        c.get("observedGeneration") == generation for c in status.get("conditions") or []
    )


def _shape(body: dict[str, Any]) -> None:
    generation = body["metadata"]["generation"]
    for found in body["status"]["conditions"]:
        assert found["type"] not in ("Reconciling", "Stalled") or found["status"] == "True"
        assert found["observedGeneration"] == generation, found


async def test_kstatus_reads_the_installation_current_in_progress_and_current_again(
    checking_operator: CheckingOperator,
    installation: Installation,
    repositories: Repositories,
    control_plane: controlplane.ControlPlane,
) -> None:
    await seeded(repositories)
    await installation.apply(repositories.spec())
    body = await eventually(
        installation.get,
        lambda b: _judged(b) and "kubernetes" in targets(b) and "kubernetesError" not in targets(b),
        what="lists",
    )
    ready = condition(body, "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Listed")
    assert ready["message"] == condition(body, "ReleasesListed")["message"]
    _shape(body)
    listed = await eventually(
        lambda: _kstatus(control_plane), lambda r: r.status is Status.CURRENT, what="Current"
    )
    assert (listed.status, listed.message) == (Status.CURRENT, "Resource is Ready"), listed

    missing = repositories.reference("no-such-kubelet")
    await installation.apply(repositories.spec(kubernetesRepository=missing))
    body = await eventually(
        installation.get,
        lambda b: _judged(b) and "kubernetesError" in targets(b),
        what="the failed listing",
    )
    _shape(body)
    failing = await _kstatus(control_plane)
    assert failing.status is Status.IN_PROGRESS, failing
    assert "no-such-kubelet" in failing.message
    assert failing.condition("Stalled") is None

    await installation.apply(repositories.spec())
    await eventually(
        installation.get, lambda b: "kubernetesError" not in targets(b), what="recovered"
    )
    again = await eventually(
        lambda: _kstatus(control_plane), lambda r: r.status is Status.CURRENT, what="Current"
    )
    assert again.message == "Resource is Ready"
