"""Each node upgraded to the image it runs, against the real API server.

The executor's read Job is played (``tests/support/talos_reads.py``: what talosctl prints
for the Job's own arguments); everything else is real: the Job the executor builds, the
statuses it writes, the refusals before any upgrade Job. The node tier runs the same
reads for real against the Talos API stand-in.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ichor.controller.talosoperation import jobs
from ichor.upgrade.node_images import PLAIN_SCHEMATIC, NodeImage
from tests.component.operations.conftest import (
    Objects,
    Operator,
    Workload,
    condition,
    eventually,
    phase,
    play_node,
    running_job,
)
from tests.component.operations.test_through_webhook import webhook  # noqa: F401
from tests.component.webhook import harness
from tests.harness import controlplane

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

ISCSI = "1" * 64
NVIDIA = "2" * 64
NEW = "3" * 64
FACTORY = "factory.talos.dev"


def _image(schematic: str | None, *, extensions: tuple[str, ...], **kw: Any) -> NodeImage:
    return NodeImage(
        platform=kw.get("platform", "metal"),
        secure_boot=kw.get("secure_boot", False),
        schematic=schematic,
        factory=kw.get("factory", FACTORY) if schematic else None,
        extensions=extensions,
    )


async def _label(workload: Workload, name: str, **labels: str) -> None:
    await workload.core.patch_node(name, {"metadata": {"labels": labels}})


async def _annotate(workload: Workload, name: str, schematic: str) -> None:
    annotations = {"extensions.talos.dev/schematic": schematic}
    await workload.core.patch_node(name, {"metadata": {"annotations": annotations}})


async def _images(objects: Objects, workload: Workload) -> dict[str, str]:
    """Each node's installer (by address), from its own Job, the nodes played in turn."""
    found = {}
    for node in ["ops-cp-1", "ops-cp-2", "ops-worker-1"]:
        job = await play_node(objects, workload, "up", node, version="v1.14.4")
        ((_, _, args),) = jobs.commands(job)
        found[args[args.index("--nodes") + 1]] = args[args.index("--image") + 1]
    return found


async def _failed(objects: Objects, name: str) -> dict[str, Any]:
    return await eventually(
        lambda: objects.operation(name), lambda b: phase(b) == "Failed", what=f"{name} Failed"
    )


async def test_an_adopted_cluster_with_extensions_upgrades_each_node_with_its_own_image(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """No spec.schematic: each node keeps its schematic, platform, SecureBoot and
    factory; the cluster's status groups them, and nothing is named as a change."""
    operator.reads.images.update(
        {
            "10.0.0.1": _image(ISCSI, extensions=("iscsi-tools",)),
            "10.0.0.2": _image(ISCSI, extensions=("iscsi-tools",), secure_boot=True),
            "10.0.0.11": _image(NVIDIA, extensions=("nvidia",), platform="aws"),
        }
    )
    await _annotate(workload, "ops-cp-1", ISCSI)
    await objects.create_cluster()
    await objects.create_operation("up", "talos", "v1.14.4")
    body, job = await running_job(objects, "up")
    recorded = body["status"]["nodes"]
    assert [n["name"] for n in recorded["order"]] == ["ops-cp-1", "ops-cp-2", "ops-worker-1"]
    assert len(recorded["images"]) == 3
    assert "changes" not in recorded
    # the read Job is gone once what it read is recorded: one Job, the first node's
    assert [j["metadata"]["name"] for j in await objects.jobs()] == [job["metadata"]["name"]]
    started = [e for e in await objects.events("up") if e["reason"] == "Started"]
    assert "each with its own installer (3 images)" in started[0]["message"]
    assert await _images(objects, workload) == {
        "10.0.0.1": f"{FACTORY}/metal-installer/{ISCSI}:v1.14.4",
        "10.0.0.2": f"{FACTORY}/metal-installer-secureboot/{ISCSI}:v1.14.4",
        "10.0.0.11": f"{FACTORY}/aws-installer/{NVIDIA}:v1.14.4",
    }
    cluster = await eventually(
        objects.cluster,
        lambda c: bool((c.get("status") or {}).get("nodeImages")),
        what="status.nodeImages",
    )
    images = cluster["status"]["nodeImages"]
    assert images["summary"] == "3 images"
    assert images["differ"] is True
    assert {g["platform"] for g in images["groups"]} == {"metal", "aws"}
    assert any(g.get("secureBoot") for g in images["groups"])
    await eventually(
        lambda: objects.operation("up"), lambda b: phase(b) == "Succeeded", what="Succeeded"
    )
    # the cluster's controller carries the read's record over its own status writes
    after = await objects.cluster()
    assert after["status"]["nodeImages"]["groups"] == images["groups"]


async def test_a_spec_that_would_drop_a_nodes_extensions_is_refused_before_any_job(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    """spec.schematic is the plain schematic (what an older Ichor used for every node):
    the workers run iscsi-tools, which it is known not to carry."""
    operator.reads.images.update(
        {
            "10.0.0.1": _image(PLAIN_SCHEMATIC, extensions=()),
            "10.0.0.2": _image(PLAIN_SCHEMATIC, extensions=()),
            "10.0.0.11": _image(ISCSI, extensions=("iscsi-tools",)),
        }
    )
    await objects.create_cluster(schematic=PLAIN_SCHEMATIC)
    await objects.create_operation("up", "talos", "v1.14.4", override=True)
    body = await _failed(objects, "up")
    message = body["status"]["message"]
    assert message.startswith(
        f"TalosOperation {objects.namespace}/up (talos to v1.14.4) is refused before any node "
        "is upgraded: each node is upgraded to the image it runs, and Node ops-worker-1: would "
        f"lose iscsi-tools to spec.schematic {PLAIN_SCHEMATIC[:12]}"
    ), message
    assert "spec.nodeSchematics" in message
    assert condition(body, "Accepted")["reason"] == "NodeImageRefused"
    # not a compatibility refusal: override: true passed nothing
    assert body["status"]["failure"] == "Refused"
    assert "upgradeStartedAt" not in body["status"]
    assert await objects.jobs() == []
    assert "Refused" in await objects.reasons("up")


@pytest.mark.parametrize("case", ["silent", "disagrees"])
async def test_a_node_whose_schematic_cannot_be_read_is_refused(
    operator: Operator, workload: Workload, objects: Objects, case: str
) -> None:
    if case == "silent":
        operator.reads.silent["10.0.0.11"] = (
            "rpc error: code = Unavailable desc = connection refused"
        )
    else:
        operator.reads.images["10.0.0.11"] = _image(ISCSI, extensions=("iscsi-tools",))
        await _annotate(workload, "ops-worker-1", NVIDIA)
    await objects.create_cluster()
    await objects.create_operation("up", "talos", "v1.14.4")
    body = await _failed(objects, "up")
    message = body["status"]["message"]
    assert "Node ops-worker-1: " in message, message
    if case == "silent":
        assert "cannot be read through the Talos API" in message
        assert "connection refused" in message
    else:
        assert f"names {NVIDIA[:12]}, the Talos API {ISCSI[:12]}" in message
    assert await objects.jobs() == []
    cluster = await objects.cluster()
    (sentence,) = cluster["status"]["nodeImages"]["unreadable"]
    assert sentence.startswith("Node ops-worker-1")


def _plan(
    control_plane: controlplane.ControlPlane, namespace: str, name: str, version: str = "v1.14.4"
) -> str:
    """The plan of a Talos operation: its server-side dry run; what the webhook says."""
    body = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": version},
    }
    result = control_plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


async def test_a_deliberate_schematic_change_by_label_selector_is_named_and_carried_out(
    webhook: harness.Webhook,  # noqa: F811
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:
    operator.reads.images.update(
        {
            "10.0.0.1": _image(ISCSI, extensions=("iscsi-tools",)),
            "10.0.0.2": _image(ISCSI, extensions=("iscsi-tools",)),
            "10.0.0.11": _image(ISCSI, extensions=("iscsi-tools",)),
        }
    )
    await _label(workload, "ops-worker-1", gpu="true")
    await objects.create_cluster(
        nodeSchematics=[{"selector": {"matchLabels": {"gpu": "true"}}, "schematic": NEW}]
    )
    # the plan says which nodes change before anything runs
    said = _plan(control_plane, objects.namespace, "plan")
    assert (
        f"spec.nodeSchematics[0] changes the nodes labelled gpu=true to schematic {NEW[:12]}"
    ) in said, said
    await objects.create_operation("up", "talos", "v1.14.4")
    body, _job = await running_job(objects, "up")
    (change,) = body["status"]["nodes"]["changes"]
    assert change == (
        f"Node ops-worker-1: schematic {ISCSI[:12]} (iscsi-tools) -> {NEW[:12]} "
        "(named by spec.nodeSchematics[0])"
    )
    assert await _images(objects, workload) == {
        "10.0.0.1": f"{FACTORY}/metal-installer/{ISCSI}:v1.14.4",
        "10.0.0.2": f"{FACTORY}/metal-installer/{ISCSI}:v1.14.4",
        "10.0.0.11": f"{FACTORY}/metal-installer/{NEW}:v1.14.4",
    }
    started = [e for e in await objects.events("up") if e["reason"] == "Started"]
    assert change in started[0]["message"]
    # once a read is recorded, the plan of a cluster-wide schematic names each change
    # and each node it would refuse, from what the nodes were found running
    await objects.patch_cluster_spec({"schematic": PLAIN_SCHEMATIC, "nodeSchematics": None})
    await eventually(
        objects.cluster,
        lambda c: bool((c.get("status") or {}).get("nodeImages")),
        what="status.nodeImages",
    )
    said = _plan(control_plane, objects.namespace, "plan-2", version="v1.14.5")
    assert "would be refused: Nodes ops-cp-1, ops-cp-2 and ops-worker-1: would lose" in said, said
