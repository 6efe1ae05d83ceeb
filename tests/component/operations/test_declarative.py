"""The declarative mode end to end, as a GitOps tool drives it: ``kubectl apply
--server-side`` of a TalosCluster with ``upgradeStrategy: Declarative`` by a user who
may write TalosClusters but holds no override, the webhook in place, the operator as the
chart's ServiceAccount.

A spec bump runs the upgrade to Succeeded with no other command and without the
controller writing the spec (its generation and its field managers say so), and
``kubectl wait --for=condition=Ready`` on the cluster waits for it. A bump the webhook
refuses fails the apply with the rule's sentence; one it admits but the target rule
refuses at the start is a Stalled condition and one Event, never a retry loop. No write
of a user without the verb (spec, annotation, status, a label on their own operation)
gets an incompatible upgrade run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
import yaml

from ichor.api import kinds, records
from ichor.api.talosoperation import STARTED_BY_LABEL
from ichor.controller.taloscluster import wiring as cluster_wiring
from tests.component.operations.conftest import (
    TALOSCONFIG,
    Objects,
    Operator,
    Workload,
    condition,
    eventually,
    phase,
    play_nodes,
    running_job,
)
from tests.component.webhook import harness
from tests.harness import account, binaries, controlplane
from tests.support import kstatus, nodes, rbac, table
from tests.support.kstatus import Ref, Status

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

#: The GitOps tool's identity: writes TalosClusters, holds no override.
BOT = "flux-applier"
HOLDER = "olivia-holder"
MANAGER = "flux-kustomize"
#: An Image Factory schematic ID: a spec field the webhook's version rules do not judge.
SCHEMATIC = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"


@pytest.fixture(scope="module")
def webhook(
    control_plane: controlplane.ControlPlane,
    crds: None,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    with harness.running(
        control_plane, tmp_path_factory.mktemp("declarative-webhook"), operator_account,
        recorder=False,
    ) as running:  # fmt: skip
        yield running


@pytest.fixture
def users(control_plane: controlplane.ControlPlane) -> Iterator[None]:
    role = "ichor-declarative-test-writer"
    holder_role = "ichor-declarative-test-override"
    manifest = yaml.safe_dump_all(
        [
            rbac.cluster_role(
                role,
                [
                    {
                        "apiGroups": ["ichor.dev"],
                        "resources": [
                            "talosclusters",
                            "talosclusters/status",
                            "talosoperations",
                            "talosoperations/status",
                        ],
                        "verbs": ["get", "list", "watch", "create", "update", "patch"],
                    },
                    # the TalosCluster names its talosconfig Secret: the webhook admits
                    # that only for a user who may read it (as Flux's applier, which
                    # applies the Secret too)
                    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                ],
            ),
            rbac.binding(role, [BOT, HOLDER]),
            rbac.override_role(holder_role),
            rbac.binding(holder_role, [HOLDER]),
        ]
    )
    control_plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


@pytest_asyncio.fixture(loop_scope="session")
async def talosconfig(objects: Objects) -> AsyncIterator[None]:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "prod-talosconfig"},
        "stringData": {"talosconfig": TALOSCONFIG},
    }
    await objects.core.create_namespaced_secret(objects.namespace, body)  # type: ignore[arg-type]
    yield


def cluster_manifest(namespace: str, **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": kinds.API_VERSION,
            "kind": "TalosCluster",
            "metadata": {"name": "prod", "namespace": namespace},
            "spec": {
                "talosVersion": "v1.14.3",
                "kubernetesVersion": "v1.36.6",
                "versionContract": "v1.14",
                "upgradeStrategy": "Declarative",
                "talosconfigSecretRef": {"name": "prod-talosconfig"},
                **spec,
            },
        }
    )


def apply(plane: controlplane.ControlPlane, namespace: str, *, user: str = BOT, **spec: Any) -> Any:
    return plane.kubectl(
        "apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-",
        input=cluster_manifest(namespace, **spec), as_user=user, check=False,
    )  # fmt: skip


async def operations(objects: Objects) -> list[dict[str, Any]]:
    listed: Any = await objects.custom.list_namespaced_custom_object(
        kinds.GROUP, kinds.VERSION, objects.namespace, kinds.Plural.TALOS_OPERATIONS
    )
    items: list[dict[str, Any]] = listed["items"]
    return items


async def settled(objects: Objects) -> dict[str, Any]:
    return await eventually(
        objects.cluster,
        lambda c: (
            condition(c, "SpecReached").get("status") == "True"
            and condition(c, "SpecReached").get("observedGeneration") == c["metadata"]["generation"]
        ),
        what="the declarative cluster at its spec",
    )


def spec_managers(body: dict[str, Any]) -> set[str]:
    """Who owns a field of the spec (server-side apply's managedFields)."""
    return {
        entry["manager"]
        for entry in body["metadata"].get("managedFields") or ()
        if "f:spec" in (entry.get("fieldsV1") or {})
    }


async def test_a_spec_bump_applied_server_side_runs_the_upgrade_and_kubectl_wait_waits(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    users: None,
    talosconfig: None,
) -> None:
    plane, namespace = control_plane, objects.namespace
    created = apply(plane, namespace)
    assert created.returncode == 0, created.stderr
    first = await settled(objects)
    assert condition(first, "Ready")["status"] == "True"
    assert await operations(objects) == []

    bumped = apply(plane, namespace, kubernetesVersion="v1.36.7")
    assert bumped.returncode == 0, bumped.stderr
    waiter = await asyncio.create_subprocess_exec(
        str(binaries.find("kubectl")), "--kubeconfig", str(plane.kubeconfig), "-n", namespace,
        "wait", "--for=condition=Ready", "taloscluster/prod", "--timeout=90s",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip

    (started,) = await eventually(
        lambda: operations(objects), lambda found: len(found) == 1, what="the started operation"
    )
    name = started["metadata"]["name"]
    assert started["metadata"]["labels"][STARTED_BY_LABEL] == "declarative"
    assert started["spec"] == {
        "clusterRef": {"name": "prod"},
        "type": "kubernetes",
        "version": "v1.36.7",
        "override": False,
    }
    assert started["metadata"]["ownerReferences"][0]["uid"] == first["metadata"]["uid"]
    _body, job = await running_job(objects, name)
    busy = await objects.cluster()
    assert condition(busy, "Ready")["status"] == "False"
    assert condition(busy, "Reconciling")["status"] == "True"
    (result,) = await asyncio.to_thread(
        kstatus.read,
        plane.kubeconfig,
        [Ref(kinds.GROUP, kinds.VERSION, "talosclusters", namespace, "prod")],
    )
    assert result.status is Status.IN_PROGRESS, result
    await asyncio.sleep(1.0)
    assert waiter.returncode is None, "kubectl wait returned before the upgrade"

    # the Job upgrades the kubelets (its work, played here), then succeeds: the executor
    # calls the operation Succeeded only once every Node reports the target
    for node in list(workload.nodes):
        await workload.core.patch_node_status(
            node,
            {"status": {"nodeInfo": nodes.talos_node_info(talos="v1.14.3", kubelet="v1.36.7")}},
        )
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    done = await eventually(
        lambda: objects.operation(name), lambda b: phase(b) == "Succeeded", what="Succeeded"
    )
    assert condition(done, "Ready")["status"] == "True"
    out, err = await asyncio.wait_for(waiter.communicate(), timeout=90)
    assert waiter.returncode == 0, err.decode()
    assert "condition met" in out.decode()

    after = await settled(objects)
    assert after["status"]["kubernetesVersion"] == "v1.36.7"
    # the controller never wrote the spec: same generation, only the applier manages it
    assert after["metadata"]["generation"] == 2  # created as 1, bumped once
    assert spec_managers(after) == {MANAGER}
    assert after["spec"]["kubernetesVersion"] == "v1.36.7"
    (result,) = await asyncio.to_thread(
        kstatus.read,
        plane.kubeconfig,
        [Ref(kinds.GROUP, kinds.VERSION, "talosclusters", namespace, "prod")],
    )
    assert result.status is Status.CURRENT, result
    assert len(await operations(objects)) == 1  # one operation, never a second
    # re-applying the same manifest (every GitOps sync) changes nothing
    again = apply(plane, namespace, kubernetesVersion="v1.36.7")
    assert again.returncode == 0, again.stderr
    await asyncio.sleep(2.0)
    assert len(await operations(objects)) == 1
    assert (await objects.cluster())["metadata"]["generation"] == 2


async def test_a_bump_the_webhook_refuses_fails_the_server_side_apply_with_its_sentence(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    users: None,
    talosconfig: None,
) -> None:
    plane, namespace = control_plane, objects.namespace
    assert apply(plane, namespace).returncode == 0
    await settled(objects)
    unknown = table.unknown_kubernetes()
    refused = apply(plane, namespace, kubernetesVersion=unknown)
    assert refused.returncode == 1
    assert 'admission webhook "' in refused.stderr, refused.stderr
    assert "denied the request" in refused.stderr
    assert f"kubernetesVersion {unknown}" in refused.stderr or unknown[:-2] in refused.stderr
    # the rule's own sentence, whole: newer than any Kubernetes this Ichor knows
    assert (
        f"denied the request: Kubernetes {unknown} is refused: this Ichor knows Kubernetes "
        f"{table.KNOWN_KUBERNETES} (Talos machinery and its compatibility table), so a newer "
        "Ichor release is needed; no override passes an unknown version."
    ) in refused.stderr, refused.stderr
    stored = await objects.cluster()
    assert stored["spec"]["kubernetesVersion"] == "v1.36.6"
    assert stored["metadata"]["generation"] == 1
    # a downgrade is refused the same way, with its own sentence
    down = apply(plane, namespace, kubernetesVersion="v1.36.5")
    assert down.returncode == 1
    assert "never moves back (no downgrade)" in down.stderr, down.stderr
    assert await operations(objects) == []


async def test_a_target_refused_at_the_start_is_one_stalled_condition_and_one_event(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    users: None,
    talosconfig: None,
) -> None:
    """A pre-release is a spec by form, never an upgrade target (rule Final): the spec
    write passes, the controller's start is refused by the webhook's plan."""
    plane, namespace = control_plane, objects.namespace
    assert apply(plane, namespace).returncode == 0
    await settled(objects)
    bumped = apply(plane, namespace, talosVersion="v1.14.4-beta.0")
    assert bumped.returncode == 0, bumped.stderr
    stalled = await eventually(
        objects.cluster,
        lambda c: condition(c, "Stalled").get("reason") == "Refused",
        what="the refused start as Stalled",
    )
    message = condition(stalled, "Stalled")["message"]
    assert message.startswith("spec.talosVersion is Talos v1.14.4-beta.0, the Nodes run v1.14.3")
    assert "denied the request" in message
    assert condition(stalled, "Stalled")["observedGeneration"] == 2
    assert condition(stalled, "Ready")["status"] == "False"
    assert condition(stalled, "Reconciling") == {}
    (result,) = await asyncio.to_thread(
        kstatus.read,
        plane.kubeconfig,
        [Ref(kinds.GROUP, kinds.VERSION, "talosclusters", namespace, "prod")],
    )
    assert result.status is Status.FAILED, result
    # the API server's words for the denial read as the rule's: remembered for the
    # generation (a refusal that is no rule's is tried again at each check)
    controller = operator.memo[cluster_wiring.CONTROLLER]
    (remembered,) = controller.clusters[(namespace, "prod")].declared.values()
    assert (remembered.reason, remembered.retry) == ("Refused", False)
    # several observations later: still one Event, no operation, no new attempt
    await asyncio.sleep(4.0)
    refusals = [e for e in await objects.events("prod") if e["reason"] == "UpgradeRefused"]
    assert len(refusals) == 1, refusals
    assert refusals[0]["type"] == "Warning"
    assert refusals[0]["message"] == message
    assert await operations(objects) == []

    # the next spec change is judged afresh
    fixed = apply(plane, namespace, talosVersion="v1.14.4")
    assert fixed.returncode == 0, fixed.stderr
    (started,) = await eventually(
        lambda: operations(objects), lambda found: len(found) == 1, what="the fixed start"
    )
    assert started["spec"]["version"] == "v1.14.4"
    cluster = await eventually(
        objects.cluster,
        lambda c: condition(c, "Stalled") == {},
        what="no longer Stalled once the spec changed",
    )
    assert condition(cluster, "Reconciling")["status"] == "True"


async def test_no_write_of_a_user_without_the_verb_runs_an_incompatible_upgrade(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    users: None,
    talosconfig: None,
) -> None:
    """Talos 1.14 runs Kubernetes 1.33 to 1.37: v1.32.x on it is an overridable refusal.
    The declarative mode carries no override at all: the spec write of a holder is
    admitted (and recorded), but the operation the controller starts has none, so the
    plan refuses it. The holder runs it with a TalosOperation of their own."""
    plane, namespace = control_plane, objects.namespace
    for node in list(workload.nodes):
        await workload.core.patch_node_status(
            node,
            {"status": {"nodeInfo": nodes.talos_node_info(talos="v1.14.3", kubelet="v1.31.5")}},
        )
    # A Declarative cluster on the incompatible pair it runs: an adoption marker cannot
    # make one (an adoption stores what runs; a Declarative spec is a desired state, so
    # the webhook refuses the two together), so the holder creates it under the verb
    # (recorded), through the same field manager the applier uses afterwards.
    running = json.loads(cluster_manifest(namespace, kubernetesVersion="v1.31.5"))
    made = plane.kubectl(
        "apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-",
        input=json.dumps(running), as_user=HOLDER, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    await settled(objects)

    # 1. the spec write itself
    spec_write = apply(plane, namespace, kubernetesVersion="v1.32.0")
    assert spec_write.returncode == 1
    assert "can pass this refusal, and user 'flux-applier' does not" in spec_write.stderr
    # 2. with an annotation naming a holder (the webhook's own stamp of an operation)
    forged = json.loads(cluster_manifest(namespace, kubernetesVersion="v1.32.0"))
    forged["metadata"]["annotations"] = {
        records.ADOPTION: "true",
        records.OVERRIDE_BY: HOLDER,
        "ichor.dev/override": "true",
    }
    annotated = plane.kubectl(
        "apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-",
        input=json.dumps(forged), as_user=BOT, check=False,
    )  # fmt: skip
    assert annotated.returncode == 1, annotated.stdout
    # 3. a status write that would move the baseline (what the Nodes run)
    status_write = plane.kubectl(
        "patch", "taloscluster", "prod", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"kubernetesVersion": "v1.33.0"}}),
        as_user=BOT, check=False,
    )  # fmt: skip
    assert status_write.returncode == 1, status_write.stdout
    # 4. their own operation, marked as the controller's and overridden
    own: dict[str, Any] = {
        "apiVersion": kinds.API_VERSION,
        "kind": "TalosOperation",
        "metadata": {
            "name": "sneak",
            "namespace": namespace,
            "labels": {STARTED_BY_LABEL: "declarative"},
        },
        "spec": {"clusterRef": {"name": "prod"}, "type": "kubernetes", "version": "v1.32.0"},
    }
    labelled = plane.kubectl("create", "-f", "-", input=json.dumps(own), as_user=BOT, check=False)
    assert labelled.returncode == 1, labelled.stdout
    own["metadata"].pop("labels")
    own["spec"]["override"] = True
    overridden = plane.kubectl("create", "-f", "-", input=json.dumps(own), as_user=BOT, check=False)
    assert overridden.returncode == 1, overridden.stdout
    stored = await objects.cluster()
    assert stored["spec"]["kubernetesVersion"] == "v1.31.5"
    assert await operations(objects) == []

    # the holder's spec write is admitted (the override recorded with their name) ...
    held = apply(plane, namespace, user=HOLDER, kubernetesVersion="v1.32.0")
    assert held.returncode == 0, held.stderr
    assert "override by" in held.stderr, held.stderr
    # ... yet the controller's start carries no override: the plan refuses it
    stalled = await eventually(
        objects.cluster,
        lambda c: condition(c, "Stalled").get("reason") == "Refused",
        what="the controller's start refused",
    )
    assert "Talos" in condition(stalled, "Stalled")["message"]
    assert await operations(objects) == []
    # and a write of the non-holder after it does not change that: the same manifest
    # again (every GitOps sync; no version moves, so the webhook admits it) ...
    again = apply(plane, namespace, kubernetesVersion="v1.32.0")
    assert again.returncode == 0, again.stderr
    assert "override" not in again.stderr, again.stderr
    assert (await objects.cluster())["metadata"]["generation"] == 2
    assert await operations(objects) == []
    refusals = [e for e in await objects.events("prod") if e["reason"] == "UpgradeRefused"]
    assert len(refusals) == 1, refusals
    # ... nor a bump of another spec field: a new generation, judged afresh, refused again
    other = apply(plane, namespace, kubernetesVersion="v1.32.0", schematic=SCHEMATIC)
    assert other.returncode == 0, other.stderr
    assert "override" not in other.stderr, other.stderr
    rejudged = await eventually(
        objects.cluster,
        lambda c: (
            condition(c, "Stalled").get("reason") == "Refused"
            and condition(c, "Stalled").get("observedGeneration") == 3
        ),
        what="the start of generation 3 refused",
    )
    assert rejudged["spec"]["schematic"] == SCHEMATIC
    assert "denied the request" in condition(rejudged, "Stalled")["message"]
    assert await operations(objects) == []
    refusals = [e for e in await objects.events("prod") if e["reason"] == "UpgradeRefused"]
    assert len(refusals) == 2, refusals  # one per spec generation

    # the documented way for the holder: a TalosOperation of their own, override: true,
    # admitted under their verb; it runs, and its executor does not write the spec
    theirs: dict[str, Any] = {
        "apiVersion": kinds.API_VERSION,
        "kind": "TalosOperation",
        "metadata": {"name": "held", "namespace": namespace},
        "spec": {
            "clusterRef": {"name": "prod"},
            "type": "kubernetes",
            "version": "v1.32.0",
            "override": True,
        },
    }
    made = plane.kubectl("create", "-f", "-", input=json.dumps(theirs), as_user=HOLDER, check=False)
    assert made.returncode == 0, made.stderr
    body, job = await running_job(objects, "held")
    assert condition(body, "Accepted")["reason"] == "Overridden"
    await workload.report(kubelet="v1.32.0")
    await objects.play_job(job["metadata"]["name"], succeeded=True)
    done = await eventually(
        lambda: objects.operation("held"), lambda b: phase(b) == "Succeeded", what="Succeeded"
    )
    assert done["status"]["message"] == (
        "Kubernetes v1.32.0 is installed; TalosCluster prod is Declarative, so its spec is "
        "not written (spec.kubernetesVersion is v1.32.0)"
    )
    reached = await settled(objects)
    assert reached["metadata"]["generation"] == 3
    assert spec_managers(reached) == {MANAGER}
    assert condition(reached, "Ready")["status"] == "True"
    # the holder's is the one operation; none of the controller's ever carried an override
    (only,) = await operations(objects)
    assert only["metadata"]["name"] == "held"
    assert STARTED_BY_LABEL not in (only["metadata"].get("labels") or {})


async def test_a_hand_made_operation_newer_than_the_spec_succeeds_and_never_writes_it(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    users: None,
    talosconfig: None,
) -> None:
    """An operation a person creates on a Declarative cluster runs as usual, but its
    executor never writes the spec, even when it moves the Nodes past it: the spec stays
    the desired state (the copy in git), and the cluster shows the Nodes ahead."""
    plane, namespace = control_plane, objects.namespace
    assert apply(plane, namespace).returncode == 0
    first = await settled(objects)
    await objects.create_operation("by-hand", "talos", "v1.14.4")
    await running_job(objects, "by-hand")
    done = await play_nodes(
        objects,
        workload,
        "by-hand",
        version="v1.14.4",
        nodes=["ops-cp-1", "ops-cp-2", "ops-worker-1"],
    )
    assert phase(done) == "Succeeded"
    assert done["status"]["message"] == (
        "Talos v1.14.4 is installed; TalosCluster prod is Declarative, so its spec is not "
        "written (spec.talosVersion is v1.14.3)"
    )
    ahead = await eventually(
        objects.cluster,
        lambda c: condition(c, "Stalled").get("reason") == "NodesAhead",
        what="the Nodes ahead of the spec, Stalled",
    )
    assert ahead["spec"]["talosVersion"] == "v1.14.3"
    assert ahead["metadata"]["generation"] == first["metadata"]["generation"] == 1
    assert spec_managers(ahead) == {MANAGER}
    assert condition(ahead, "SpecReached")["reason"] == "NodesAhead"
    assert condition(ahead, "Ready")["status"] == "False"
    assert condition(ahead, "Reconciling") == {}
    assert "never downgrades" in condition(ahead, "Stalled")["message"]
    events = await eventually(
        lambda: objects.events("prod"),
        lambda found: any(e["reason"] == "SpecNotReached" for e in found),
        what="the SpecNotReached Event",
    )
    (warning,) = [e for e in events if e["reason"] == "SpecNotReached"]
    assert warning["message"] == condition(ahead, "Stalled")["message"]
    # nothing starts to bring the Nodes back: the one operation is the person's
    assert [o["metadata"]["name"] for o in await operations(objects)] == ["by-hand"]


async def test_a_started_operation_that_fails_stalls_the_cluster_once_and_is_not_started_again(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    users: None,
    talosconfig: None,
) -> None:
    plane, namespace = control_plane, objects.namespace
    assert apply(plane, namespace).returncode == 0
    await settled(objects)
    bumped = apply(plane, namespace, kubernetesVersion="v1.36.7")
    assert bumped.returncode == 0, bumped.stderr
    (started,) = await eventually(
        lambda: operations(objects), lambda found: len(found) == 1, what="the started operation"
    )
    name = started["metadata"]["name"]
    _body, job = await running_job(objects, name)
    await objects.play_job(job["metadata"]["name"], succeeded=False)
    failed = await eventually(
        lambda: objects.operation(name), lambda b: phase(b) == "Failed", what="Failed"
    )
    stalled = await eventually(
        objects.cluster,
        lambda c: condition(c, "Stalled").get("reason") == "Failed",
        what="the cluster Stalled by the failed operation",
    )
    message = condition(stalled, "Stalled")["message"]
    assert message == (
        f"TalosOperation {name} for spec.kubernetesVersion is Kubernetes v1.36.7, the Nodes "
        f"run v1.36.6 failed: {failed['status']['message']}; change the spec, or create a "
        f"TalosOperation, to try again"
    )
    assert condition(stalled, "Stalled")["observedGeneration"] == 2
    assert condition(stalled, "SpecReached")["reason"] == "Failed"
    assert condition(stalled, "Ready")["status"] == "False"
    assert condition(stalled, "Reconciling") == {}
    (result,) = await asyncio.to_thread(
        kstatus.read,
        plane.kubeconfig,
        [Ref(kinds.GROUP, kinds.VERSION, "talosclusters", namespace, "prod")],
    )
    assert result.status is Status.FAILED, result
    await objects.saw_events("prod", "SpecNotReached")

    # a later observation (one kubelet moved, as a half-done upgrade leaves it) judges the
    # same spec again: still the failure, no second operation, no second Event
    await workload.report(kubelet="v1.36.7", only=sorted(workload.nodes)[0])
    later = await eventually(
        objects.cluster,
        lambda c: (
            (c["status"].get("nodes") or {}).get("kubernetesVersions") == ["v1.36.6", "v1.36.7"]
        ),
        what="the half-done upgrade observed",
    )
    assert condition(later, "Stalled")["reason"] == "Failed"
    assert [o["metadata"]["name"] for o in await operations(objects)] == [name]
    warnings = [e for e in await objects.events("prod") if e["reason"] == "SpecNotReached"]
    assert len(warnings) == 1, warnings
    assert warnings[0]["type"] == "Warning"
    assert warnings[0]["message"] == message


async def test_switching_to_declarative_drops_auto_patch_and_warns_that_it_is_ignored(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
    users: None,
    talosconfig: None,
) -> None:
    """A cluster auto-patched in the Operations mode moves to Declarative: auto-patch's
    condition and record go from its status (nothing stays at the old generation), and
    every apply that still sets spec.autoPatch passes with a warning that it is ignored."""
    plane, namespace = control_plane, objects.namespace
    auto_patch = {
        "components": ["talos"],
        "windows": [{"schedule": "0 3 * * *", "duration": "1h"}],
        "minReleaseAge": "0m",
    }
    made = apply(plane, namespace, upgradeStrategy="Operations", autoPatch=auto_patch)
    assert made.returncode == 0, made.stderr
    assert "autoPatch" not in made.stderr, made.stderr
    patched = await eventually(
        objects.cluster,
        lambda c: condition(c, "AutoPatchReady") != {} and "autoPatch" in c["status"],
        what="auto-patch's condition and record in the Operations mode",
    )
    assert condition(patched, "AutoPatchReady")["observedGeneration"] == 1

    switched = apply(plane, namespace, autoPatch=auto_patch)
    assert switched.returncode == 0, switched.stderr
    assert "Warning: spec.autoPatch is ignored" in switched.stderr, switched.stderr
    declarative = await settled(objects)
    assert declarative["metadata"]["generation"] == 2
    assert condition(declarative, "AutoPatchReady") == {}
    assert "autoPatch" not in declarative["status"]
    assert {c["observedGeneration"] for c in declarative["status"]["conditions"]} == {2}
