"""A site's policy with the operator running (the TalosCluster controller, auto-patch, the
executors, the recorder) and the webhook in place: a change of the policy recomputes the
clusters' choices and blocked lines without touching them, a held-back Kubernetes minor
moves to the blocked lines with the site's reason, ``status.sitePolicy`` counts the
clusters each entry acts on, auto-patch never starts a denied patch in an open window
(it takes the next one, and records no halt), and the executor refuses at execution a
version denied after its plan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ichor.api import kinds
from tests.component.operations.conftest import (
    MERGE,
    Objects,
    Operator,
    Workload,
    condition,
    eventually,
    phase,
)
from tests.component.operations.test_autopatch import (  # noqa: F401
    Fleet,
    auto_operations,
    auto_patch,
    fleet,
    ready,
    stop,
)
from tests.component.operations.test_through_webhook import cilium, webhook  # noqa: F401
from tests.harness import controlplane

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

NIC = "NIC driver regression on the R650s (INC-1234)"
VALIDATION = "1.37 is not validated on our workloads yet (PLAT-412)"


class Site:
    """The installation's ``spec.policy``, written as a person with update on it does
    (the webhook judges every write of it)."""

    def __init__(self, fleet: Fleet) -> None:  # noqa: F811
        self.fleet = fleet

    async def write(self, policy: dict[str, Any] | None) -> None:
        await self.fleet.custom.patch_cluster_custom_object(
            kinds.GROUP, kinds.VERSION, kinds.Plural.ICHOR_INSTALLATIONS,
            kinds.INSTALLATION_NAME, {"spec": {"policy": policy}},
            _content_type=MERGE,
        )  # fmt: skip

    async def status(self) -> dict[str, Any]:
        body = await self.fleet.body()
        found: dict[str, Any] = (body.get("status") or {}).get("sitePolicy") or {}
        return found


@pytest_asyncio.fixture(loop_scope="session")
async def site(fleet: Fleet) -> AsyncIterator[Site]:  # noqa: F811
    made = Site(fleet)
    try:
        yield made
    finally:
        await made.write(None)


def deny_talos(*versions: str) -> dict[str, Any]:
    return {"deny": [{"name": "nic", "component": "talos", "versions": list(versions),
                      "reason": NIC}]}  # fmt: skip


HOLD_KUBERNETES = {
    "highestMinor": [
        {"name": "k8s-validation", "component": "kubernetes", "minor": "1.36", "reason": VALIDATION}
    ]
}


def kubernetes_line(body: dict[str, Any]) -> dict[str, Any]:
    nearest = ((body.get("status") or {}).get("blockedReleases") or {}).get("nearest") or []
    return next((line for line in nearest if line["component"] == "kubernetes"), {})


async def test_a_held_back_kubernetes_minor_moves_to_the_blocked_lines_with_the_sites_reason(
    fleet: Fleet,  # noqa: F811
    site: Site,
    operator: Operator,
    ready: Workload,  # noqa: F811
    objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:
    """An unmanaged CNI leaves Kubernetes to the Talos pair: v1.37.1 is offered as the
    next minor, until the site holds Kubernetes at 1.36. The cluster is not written in
    between: the policy's change alone recomputes it."""
    await objects.create_cluster("edge", cni={"preset": "unmanaged"})
    offered = await eventually(
        lambda: objects.cluster("edge"),
        lambda b: "v1.37.1" in ((b.get("status") or {}).get("upgradeChoices") or {})
        .get("kubernetes", {}).get("nextMinor", []),
        what="Kubernetes v1.37.1 offered as the next minor",
    )  # fmt: skip
    generation = offered["metadata"]["generation"]
    await site.write(HOLD_KUBERNETES)
    held = await eventually(
        lambda: objects.cluster("edge"),
        lambda b: kubernetes_line(b).get("blocker") == "SitePolicy",
        what="Kubernetes v1.37.1 in the blocked lines, held by the site",
    )
    assert held["metadata"]["generation"] == generation  # the cluster was not written
    assert held["status"]["upgradeChoices"]["kubernetes"]["nextMinor"] == []
    line = kubernetes_line(held)
    assert line["version"] == "v1.37.1"
    assert line["message"].startswith(
        f"Kubernetes v1.37.1: denied by this site: {VALIDATION}; choose Kubernetes 1.36 or older"
    )
    blocked = condition(held, "UpgradesBlocked")
    assert blocked["status"] == "True"
    assert f"denied by this site: {VALIDATION}" in blocked["message"]
    # kubectl get ichorinstallation -o yaml: which entry acts on how many clusters
    counted = await eventually(
        site.status,
        lambda s: any(e["name"] == "k8s-validation" and e["clusters"] >= 1
                      for e in s.get("entries", [])),
        what="status.sitePolicy counting the entry",
    )  # fmt: skip
    body = await fleet.body()
    assert counted["observedGeneration"] == body["metadata"]["generation"]
    assert counted["clusters"] >= counted["entries"][0]["clusters"]
    shown = control_plane.kubectl("get", "ichorinstallation", kinds.INSTALLATION_NAME, "-o", "yaml")
    assert "sitePolicy:" in shown.stdout
    assert "name: k8s-validation" in shown.stdout
    # the policy lifted: offered again, and the count follows
    await site.write(None)
    await eventually(
        lambda: objects.cluster("edge"),
        lambda b: b["status"]["upgradeChoices"]["kubernetes"]["nextMinor"] == ["v1.37.1"],
        what="Kubernetes v1.37.1 offered again",
    )
    await eventually(site.status, lambda s: s.get("entries") == [], what="no entry counted")


async def test_auto_patch_never_starts_a_denied_patch_in_an_open_window(
    fleet: Fleet,  # noqa: F811
    site: Site,
    operator: Operator,
    ready: Workload,  # noqa: F811
    objects: Objects,
) -> None:
    """The newest patch of the running minor is v1.14.5, which the site denies: in an open
    window auto-patch takes v1.14.4, the next one the choices offer, never v1.14.5, and a
    denied version needs no halt (none is recorded)."""
    await site.write(deny_talos("v1.14.5"))
    await objects.create_cluster(autoPatch=auto_patch(components=["talos"]))
    (started,) = await eventually(
        lambda: auto_operations(objects), lambda ops: len(ops) == 1, what="a Talos patch started"
    )
    assert started["spec"]["version"] == "v1.14.4"
    # the start may come before the reconcile's status write: wait for the choices
    body = await eventually(
        objects.cluster,
        lambda b: bool(((b.get("status") or {}).get("upgradeChoices") or {}).get("talos")),
        what="the cluster's Talos choices written",
    )
    talos = body["status"]["upgradeChoices"]["talos"]
    assert "v1.14.5" not in talos["patch"]
    assert talos["default"] == "v1.14.4"
    halts = (((await fleet.body()).get("status") or {}).get("autoPatch") or {}).get("halts")
    assert not halts
    await stop(objects, "prod")
    await objects.delete_operation(started["metadata"]["name"])
    assert all(o["spec"].get("version") != "v1.14.5" for o in await auto_operations(objects))


async def test_the_executor_refuses_a_version_denied_after_its_plan(
    fleet: Fleet,  # noqa: F811
    site: Site,
    operator: Operator,
    ready: Workload,  # noqa: F811
    objects: Objects,
) -> None:
    """The plan admitted Talos v1.14.5 (no policy then); the site denies it before the
    executor gets to it: refused at execution, in the site's words, and no Job runs."""
    await objects.create_cluster()
    await operator.stop()
    try:
        await objects.create_operation("later", "talos", "v1.14.5")
        await site.write(deny_talos("v1.14.5"))
    finally:
        await operator.start()
    refused = await eventually(
        lambda: objects.operation("later"), lambda b: phase(b) == "Failed", what="refused"
    )
    accepted = condition(refused, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "SitePolicy")
    assert accepted["message"].startswith("Refused at execution (SitePolicy): Talos v1.14.5")
    assert NIC in accepted["message"]
    assert refused["status"].get("failure") == "Refused"
    assert await objects.jobs() == []
    await objects.delete_operation("later")
