"""The fleet halt is earned, on the real API server with the webhook in the path and the
operator running as the chart's identity.

The attack: a tenant's TalosCluster with auto-patch and no talosconfig started a patch
that failed at once for want of credentials, and that halted the version for every
tenant's clusters for the rest of a 168 h window, with nothing to lift it. Now only an
upgrade that ran on the nodes and failed halts; it halts its own namespace's clusters
unless the namespace is trusted with the fleet; and a person holding update on the
IchorInstallation lifts a halt with ``ichor autopatch unhalt``, named in an Event."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import records
from ichor.api.autopatch import HALTED_ANNOTATION, UNHALT_ANNOTATION
from tests.component.operations.conftest import (  # noqa: F401
    Objects,
    Operator,
    condition,
    eventually,
    objects,
    operator,
    phase,
    workload,
)
from tests.component.operations.test_autopatch import (  # noqa: F401
    Fleet,
    auto_operations,
    auto_patch,
    fleet,
    ready,
    the_reason,
)
from tests.component.operations.test_through_webhook import cilium, webhook  # noqa: F401
from tests.component.tenants import fleet_halt_support as support
from tests.harness import controlplane

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

TALOS = auto_patch(components=["talos"])


async def halts(fleet: Fleet) -> list[dict[str, Any]]:  # noqa: F811
    record = ((await fleet.body()).get("status") or {}).get("autoPatch") or {}
    return list(record.get("halts") or [])


async def started(objects: Objects, cluster: str) -> dict[str, Any]:  # noqa: F811
    (op,) = await eventually(
        lambda: auto_operations(objects, cluster), lambda ops: len(ops) == 1,
        what=f"the Talos patch of {objects.namespace}/{cluster} started",
    )  # fmt: skip
    return op


async def done(objects: Objects) -> None:  # noqa: F811
    """Suspend every cluster of the namespace and remove its operations, so an open window
    starts nothing more there while the namespace goes (a failed cluster is suspended by
    its failure until its operation goes, then by its setting)."""
    clusters: Any = await objects.custom.list_namespaced_custom_object(
        "ichor.dev", "v1alpha1", objects.namespace, "talosclusters"
    )
    names = [c["metadata"]["name"] for c in clusters["items"]]
    for name in names:
        await objects.patch_cluster_spec({"autoPatch": {"suspended": True}}, name=name)
    listed: Any = await objects.custom.list_namespaced_custom_object(
        "ichor.dev", "v1alpha1", objects.namespace, "talosoperations"
    )
    for op in listed["items"]:
        await objects.delete_operation(op["metadata"]["name"])
    for name in names:
        await the_reason(objects, "Suspended", cluster=name)


async def failed(objects: Objects, name: str) -> dict[str, Any]:  # noqa: F811
    return await eventually(lambda: objects.operation(name), lambda b: phase(b) == "Failed",
                            what=f"{name} Failed")  # fmt: skip


async def test_a_misconfigured_cluster_halts_nothing_and_suspends_itself_alone(
    fleet: Fleet, operator: Operator, ready: Any, objects: Objects,  # noqa: F811
    kube_api: ApiClient, control_plane: controlplane.ControlPlane,
) -> None:  # fmt: skip
    """The attack as filed: auto-patch, an open window, no talosconfig."""
    with support.namespace(control_plane, "tenant-b") as other_ns:
        other = Objects(kube_api, other_ns)
        await support.create_cluster(objects, "bad", talosconfig=False, autoPatch=TALOS)
        op = await started(objects, "bad")
        body = await failed(objects, op["metadata"]["name"])
        assert body["status"]["failure"] == "NotStarted"  # no credentials: it never ran
        suspended = await the_reason(objects, "PatchFailed", cluster="bad")
        said = condition(suspended, "AutoPatchReady")["message"]
        assert "halts Talos v1.14.5 for no other cluster" in said
        assert "NotStarted" in said
        await asyncio.sleep(4)  # several looks of the failing cluster: still no halt
        assert await halts(fleet) == []
        assert HALTED_ANNOTATION not in (
            (await objects.operation(op["metadata"]["name"]))["metadata"].get("annotations") or {}
        )
        # another cluster of the same tenant and another tenant's take the version
        await objects.create_cluster("good", autoPatch=TALOS)
        await other.create_cluster("prod", autoPatch=TALOS)
        mine, theirs = await started(objects, "good"), await started(other, "prod")
        assert mine["spec"]["version"] == theirs["spec"]["version"] == "v1.14.5"
        # the failing cluster alone stays suspended, and starts nothing more
        assert len(await auto_operations(objects, "bad")) == 1
        await done(objects)
        await done(other)


async def test_a_job_that_never_started_halts_nothing(
    fleet: Fleet, operator: Operator, ready: Any, objects: Objects,  # noqa: F811
) -> None:  # fmt: skip
    """Its image could not be pulled until the Job's deadline: the upgrade never reached
    the nodes, so the version is not halted (the cluster alone is suspended)."""
    await objects.create_cluster("prod", autoPatch=TALOS)
    op = await started(objects, "prod")
    await support.never_started(objects, op["metadata"]["name"])
    body = await failed(objects, op["metadata"]["name"])
    assert body["status"]["failure"] == "NotStarted"
    assert "upgradeStartedAt" not in body["status"]
    await the_reason(objects, "PatchFailed")
    await asyncio.sleep(3)
    assert await halts(fleet) == []
    await done(objects)


async def test_an_upgrade_that_ran_and_failed_halts_its_namespace_not_another(
    fleet: Fleet, operator: Operator, ready: Any, objects: Objects,  # noqa: F811
    kube_api: ApiClient, control_plane: controlplane.ControlPlane,
) -> None:  # fmt: skip
    with support.namespace(control_plane, "tenant-b") as other_ns:
        other = Objects(kube_api, other_ns)
        await objects.create_cluster("edge", autoPatch=auto_patch(components=["talos"],
                                                                  suspended=True))  # fmt: skip
        await objects.create_cluster("prod", autoPatch=TALOS)
        op = await started(objects, "prod")
        name = op["metadata"]["name"]
        await support.ran_and_failed(objects, name)
        body = await failed(objects, name)
        assert body["status"]["failure"] == "UpgradeFailed"
        assert body["status"]["upgradeStartedAt"]
        (halt,) = await eventually(lambda: halts(fleet), bool, what="the halt recorded")
        assert (halt["version"], halt["cluster"], halt["scope"]) == (
            "v1.14.5", f"{objects.namespace}/prod", "Namespace",
        )  # fmt: skip
        # the operator still writes its own mark on its operation
        await eventually(
            lambda: objects.operation(name),
            lambda b: HALTED_ANNOTATION in (b["metadata"].get("annotations") or {}),
            what="the failed operation marked as halted",
        )
        # another tenant is not held: its cluster takes v1.14.5
        await other.create_cluster("prod", autoPatch=TALOS)
        assert (await started(other, "prod"))["spec"]["version"] == "v1.14.5"
        # the failing tenant's other cluster is: it takes the older patch
        await objects.patch_cluster_spec({"autoPatch": {"suspended": False}}, name="edge")
        assert (await started(objects, "edge"))["spec"]["version"] == "v1.14.4"
        await done(objects)
        await done(other)


async def test_a_trusted_namespace_halts_the_fleet(
    fleet: Fleet, operator: Operator, ready: Any, objects: Objects,  # noqa: F811
    kube_api: ApiClient, control_plane: controlplane.ControlPlane,
) -> None:  # fmt: skip
    await fleet.settings({"maxConcurrentClusters": 5, "fleetHaltNamespaces": [objects.namespace]})
    with support.namespace(control_plane, "tenant-b") as other_ns:
        other = Objects(kube_api, other_ns)
        await objects.create_cluster("prod", autoPatch=TALOS)
        op = await started(objects, "prod")
        await support.ran_and_failed(objects, op["metadata"]["name"])
        (halt,) = await eventually(lambda: halts(fleet), bool, what="the halt recorded")
        assert halt["scope"] == "Fleet"
        await other.create_cluster("prod", autoPatch=TALOS)
        assert (await started(other, "prod"))["spec"]["version"] == "v1.14.4"
        await done(other)
        await done(objects)


def _halt(cluster: str, operation: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return {
        "component": "talos", "version": "v1.14.5", "cluster": cluster,
        "operation": operation, "reason": "the Job failed", "scope": "Fleet",
        "time": now.strftime(stamp), "until": (now + timedelta(hours=6)).strftime(stamp),
    }  # fmt: skip


async def test_unhalt_by_a_holder_of_update_lifts_it_and_the_event_names_them(
    fleet: Fleet, operator: Operator, ready: Any, objects: Objects,  # noqa: F811
    control_plane: controlplane.ControlPlane, user_kubeconfig: Callable[..., Path],
) -> None:  # fmt: skip
    # the halt as the operator records it after a failure (tests above make real ones)
    await fleet.status({"autoPatch": {"halts": [_halt(f"{objects.namespace}/db", "op-db")]}})
    await objects.create_cluster("prod", autoPatch=auto_patch(components=["talos"],
                                                              suspended=True))  # fmt: skip
    roles = [
        *support.installation_role("ichor-test-unhalt", "fleet-admin", ["get", "update"]),
        *support.installation_role("ichor-test-reader", "tenant-a", ["get", "patch"]),
    ]
    with support.granted(control_plane, roles):
        # a tenant who may read (and patch) the installation, but not update it
        refused = await support.ichor(user_kubeconfig("tenant-a"), "autopatch", "unhalt",
                                      "talos", "v1.14.5")  # fmt: skip
        assert refused.code == 1
        assert support.one_sentence(refused.err), refused.err
        assert "needs the RBAC verb `update` on ichorinstallations.ichor.dev/ichor" in refused.err
        assert "forbidden" in refused.err
        stored = await fleet.body()
        assert UNHALT_ANNOTATION not in (stored["metadata"].get("annotations") or {})
        assert "liftedBy" not in (await halts(fleet))[0]
        # a forged record (another person's request, with patch on the installation): the
        # webhook's mutating half writes the records it computed (none), so none is stored
        forged = json.dumps([{"kind": "Unhalt", "user": "root", "detail": "all"}])
        control_plane.kubectl(
            "annotate", "ichorinstallation", "ichor", f"{records.RECORDS}={forged}",
            as_user="tenant-a", check=False,
        )  # fmt: skip
        stored = await fleet.body()
        assert records.RECORDS not in (stored["metadata"].get("annotations") or {})
        await asyncio.sleep(2)
        assert "liftedBy" not in (await halts(fleet))[0]
        # the holder of update lifts it
        lifted = await support.ichor(user_kubeconfig("fleet-admin"), "autopatch", "unhalt",
                                     "talos", "v1.14.5")  # fmt: skip
        assert lifted.code == 0, lifted.err
        assert "Lifted the halt of talos v1.14.5" in lifted.out
        assert "fleet-admin" in lifted.out
    (halt,) = await halts(fleet)
    assert halt["liftedBy"] == "fleet-admin"
    assert halt["liftedAt"]
    stored = await fleet.body()
    annotations = stored["metadata"].get("annotations") or {}
    assert UNHALT_ANNOTATION not in annotations
    assert records.RECORDS not in annotations
    events = await eventually(
        lambda: asyncio.to_thread(support.events_on_installation, control_plane,
                                  "AutoPatchUnhalted"),
        lambda found: any("User fleet-admin lifted" in e["message"] for e in found),
        what="the AutoPatchUnhalted Event naming the user",
    )  # fmt: skip
    (event,) = [e for e in events if "op-db" in e["message"]]
    assert event["type"] == "Warning"
    assert "talos v1.14.5" in event["message"]
    # the version starts again (it was halted for every cluster: v1.14.4 would be taken)
    await objects.patch_cluster_spec({"autoPatch": {"suspended": False}})
    assert (await started(objects, "prod"))["spec"]["version"] == "v1.14.5"
    await done(objects)


async def test_unhalt_with_nothing_halted_writes_nothing(
    fleet: Fleet, operator: Operator, objects: Objects,  # noqa: F811
    control_plane: controlplane.ControlPlane, user_kubeconfig: Callable[..., Path],
) -> None:  # fmt: skip
    roles = support.installation_role("ichor-test-unhalt-2", "fleet-admin", ["get", "update"])
    with support.granted(control_plane, roles):
        ran = await support.ichor(user_kubeconfig("fleet-admin"), "autopatch", "unhalt", "--all")
    assert ran.code == 0, ran.err
    assert "nothing to lift" in ran.out
    stored = await fleet.body()
    assert UNHALT_ANNOTATION not in (stored["metadata"].get("annotations") or {})
