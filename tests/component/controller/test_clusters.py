"""The TalosCluster controller against the real API server: status, conditions, choices."""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import replace
from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds
from tests.component.controller.conftest import (
    FAST,
    Objects,
    Operator,
    Workload,
    condition,
    eventually,
)
from tests.harness import controlplane
from tests.support import table
from tests.support.operator import CRDS

pytestmark = pytest.mark.component

# a release of the first minor this build does not know among them
TALOS = ["v1.13.2", "v1.14.3", "v1.14.4", table.unknown_talos(), "1.14.9", "v1.14.5-beta.0"]
KUBERNETES = ["v1.35.2", "v1.36.6", "v1.36.7", "v1.37.1"]
TARGETS = {"checkedAt": "2026-12-03T07:00:00Z", "talos": TALOS, "kubernetes": KUBERNETES}


async def talos_nodes(workload: Workload, *versions: str, kubelet: str = "v1.36.6") -> None:
    for n, version in enumerate(versions):
        await workload.add_node(f"cp-{n}", talos=version, kubelet=kubelet)


def observed(body: dict[str, Any]) -> bool:
    status = body.get("status") or {}
    return status.get("observedGeneration") == body["metadata"]["generation"] and bool(
        condition(body, "Ready")
    )


async def test_observed_versions_and_conditions_appear_within_seconds(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await talos_nodes(workload, "v1.14.3", "v1.14.3", "v1.14.3")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4@sha256:0a1b")
    await objects.set_targets(TARGETS)
    started = time.monotonic()
    await objects.create_cluster("prod")
    body = await eventually(
        lambda: objects.cluster("prod"),
        lambda b: observed(b) and bool((b["status"].get("upgradeChoices") or {}).get("talos")),
        what="observed status",
    )
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"status took {elapsed:.1f} s"
    status = body["status"]
    assert status["talosVersion"] == "v1.14.3"
    assert status["kubernetesVersion"] == "v1.36.6"
    assert status["cni"] == {"detected": "cilium", "detectedVersion": "1.20.4"}
    assert status["nodes"]["count"] == 3
    assert status["nodes"]["differ"] is False
    assert condition(body, "Ready")["status"] == "True"
    assert condition(body, "VersionsCompatible")["status"] == "True"
    assert condition(body, "CiliumUpgradeAvailable")["reason"] == "UpToDate"
    talos = status["upgradeChoices"]["talos"]
    assert talos["patch"] == ["v1.14.4"]
    assert talos["default"] == "v1.14.4"
    assert talos["available"] is True
    assert condition(body, "TalosUpgradeAvailable")["status"] == "True"
    kubernetes = status["upgradeChoices"]["kubernetes"]
    assert kubernetes["patch"] == ["v1.36.7"]
    assert kubernetes.get("nextMinor", []) == []  # Cilium 1.20 runs up to Kubernetes 1.36


async def test_a_node_os_image_change_is_reflected(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await talos_nodes(workload, "v1.14.3", "v1.14.3")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4")
    await objects.set_targets(TARGETS)
    await objects.create_cluster("rolling")
    await eventually(lambda: objects.cluster("rolling"), observed, what="first status")

    await workload.set_node("cp-0", os_image="Talos (v1.14.4)", kubelet="v1.36.6")
    body = await eventually(
        lambda: objects.cluster("rolling"),
        lambda b: (b["status"].get("nodes") or {}).get("differ") is True,
        what="nodes differ",
    )
    assert body["status"]["talosVersion"] == "v1.14.3"  # the lowest
    assert body["status"]["nodes"]["talosVersions"] == ["v1.14.3", "v1.14.4"]
    assert condition(body, "Ready")["reason"] == "NodesDiffer"

    await workload.set_node("cp-1", os_image="Talos (v1.14.4)", kubelet="v1.36.6")
    body = await eventually(
        lambda: objects.cluster("rolling"),
        lambda b: b["status"].get("talosVersion") == "v1.14.4",
        what="all nodes on v1.14.4",
    )
    assert body["status"]["nodes"]["differ"] is False
    assert condition(body, "Ready")["reason"] == "Observed"


SLOW_OBSERVATION = replace(FAST, observe_interval=300.0)


@pytest.mark.parametrize("operator", [SLOW_OBSERVATION], indirect=True)
async def test_choices_follow_a_change_of_upgrade_targets_without_a_resync(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    # The workload is read every 300 s here, so only the release list's change can
    # move the choices within the few seconds this test waits.
    await talos_nodes(workload, "v1.14.3")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4")
    await objects.set_targets({"checkedAt": "2026-12-03T07:00:00Z", "talos": ["v1.14.3"]})
    await objects.create_cluster("follow")
    body = await eventually(lambda: objects.cluster("follow"), observed, what="first status")
    assert condition(body, "TalosUpgradeAvailable")["reason"] == "UpToDate"
    assert condition(body, "KubernetesUpgradeAvailable")["reason"] == "ListUnavailable"

    await objects.set_targets(TARGETS)
    body = await eventually(
        lambda: objects.cluster("follow"),
        lambda b: b["status"]["upgradeChoices"]["talos"].get("default") == "v1.14.4",
        within=5,
        what="choices from the new list",
    )
    assert condition(body, "TalosUpgradeAvailable")["status"] == "True"
    assert body["status"]["upgradeChoices"]["kubernetes"]["default"] == "v1.36.7"

    await objects.set_targets({**TARGETS, "talosError": "registry timeout"})
    body = await eventually(
        lambda: objects.cluster("follow"),
        lambda b: (
            "stale" in (b["status"]["upgradeChoices"]["talos"].get("unavailableReason") or "")
        ),
        within=5,
        what="the stale note",
    )
    assert "unavailableReason" not in body["status"]["upgradeChoices"]["kubernetes"]


async def test_a_non_cilium_cni_skips_the_cilium_rule(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await talos_nodes(workload, "v1.14.3")
    await workload.add_daemonset("kube-flannel", image="ghcr.io/siderolabs/flannel:v0.26.4")
    await objects.set_targets(TARGETS)
    await objects.create_cluster("flannel", cni={"preset": "unmanaged"})
    body = await eventually(
        lambda: objects.cluster("flannel"),
        lambda b: observed(b) and (b["status"].get("cni") or {}).get("detected") == "flannel",
        what="flannel observed",
    )
    assert body["status"]["cni"]["detectedVersion"] == "0.26.4"
    # Only the Talos pairing bounds Kubernetes: 1.37 is offered, which Cilium 1.20 would refuse.
    assert body["status"]["upgradeChoices"]["kubernetes"]["nextMinor"] == ["v1.37.1"]
    assert condition(body, "VersionsCompatible")["status"] == "True"
    assert condition(body, "CiliumUpgradeAvailable")["reason"] == "NotCilium"


async def test_an_unobserved_cni_offers_no_kubernetes(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await talos_nodes(workload, "v1.14.3")
    await objects.set_targets(TARGETS)
    await objects.create_cluster("bare")
    body = await eventually(lambda: objects.cluster("bare"), observed, what="status")
    kubernetes = body["status"]["upgradeChoices"]["kubernetes"]
    assert "default" not in kubernetes
    assert kubernetes.get("patch", []) == []
    offered = condition(body, "KubernetesUpgradeAvailable")
    assert (offered["status"], offered["reason"]) == ("Unknown", "CNINotObserved")
    assert condition(body, "TalosUpgradeAvailable")["status"] == "True"


async def test_an_older_cilium_is_offered_the_embedded_chart(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await talos_nodes(workload, "v1.14.3", kubelet="v1.35.2")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.19.3")
    await objects.set_targets(TARGETS)
    await objects.create_cluster("older-cilium", kubernetesVersion="v1.35.2")
    body = await eventually(lambda: objects.cluster("older-cilium"), observed, what="status")
    offered = condition(body, "CiliumUpgradeAvailable")
    assert (offered["status"], offered["reason"]) == ("True", "ChartNewer")
    assert "1.20.4" in offered["message"]


async def test_an_incompatible_spec_says_which_rule(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await talos_nodes(workload, "v1.14.3", kubelet="v1.31.9")
    await objects.set_targets(TARGETS)
    await objects.create_cluster("odd-pair", kubernetesVersion="v1.31.9")
    body = await eventually(lambda: objects.cluster("odd-pair"), observed, what="status")
    compatible = condition(body, "VersionsCompatible")
    assert (compatible["status"], compatible["reason"]) == ("False", "TalosKubernetesIncompatible")
    assert "v1.31.9" in compatible["message"]


async def test_a_malformed_object_gets_its_condition_and_others_are_served(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:
    """A TalosCluster stored before the CRD checked its versions: reported, left alone."""
    await talos_nodes(workload, "v1.14.3")
    await objects.set_targets(TARGETS)
    loose = (CRDS / f"{kinds.crd_name(kinds.Kind.TALOS_CLUSTER)}.yaml").read_text()
    loose = loose.replace("x-kubernetes-validations:", "x-kubernetes-validations-off:")
    # The API server refuses unknown schema keys, so drop the rules' blocks instead.
    loose = _without_rules(loose)
    kubectl = control_plane.kubectl
    await asyncio.to_thread(
        kubectl, "apply", "--server-side", "--force-conflicts", "-f", "-", input=loose
    )
    try:
        await _eventually_created(objects, "legacy", talosVersion="1.14")
    finally:
        await asyncio.to_thread(
            kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(CRDS)
        )
    body = await eventually(
        lambda: objects.cluster("legacy"),
        lambda b: condition(b, "VersionsCompatible").get("reason") == "InvalidSpec",
        what="InvalidSpec condition",
    )
    message = condition(body, "VersionsCompatible")["message"]
    assert "spec.talosVersion" in message
    assert "1.14" in message
    assert condition(body, "TalosUpgradeAvailable")["reason"] == "InvalidSpec"
    assert body["status"]["talosVersion"] == "v1.14.3"  # what runs is still reported

    await objects.create_cluster("healthy")
    healthy = await eventually(lambda: objects.cluster("healthy"), observed, what="healthy")
    assert condition(healthy, "VersionsCompatible")["status"] == "True"
    written = body["metadata"]["resourceVersion"]
    await asyncio.sleep(2.5)  # two observation intervals
    again = await objects.cluster("legacy")
    assert again["metadata"]["resourceVersion"] == written, "a bad object is rewritten in a loop"


def _without_rules(text: str) -> str:
    """The CRD text without its x-kubernetes-validations-off blocks (a loose schema)."""
    lines = text.splitlines()
    kept: list[str] = []
    skip_indent: int | None = None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if line.strip() and indent <= skip_indent:
                skip_indent = None
            else:
                continue
        if line.strip().startswith("x-kubernetes-validations-off:"):
            skip_indent = indent
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


async def _eventually_created(objects: Objects, name: str, **spec: Any) -> None:
    # The loosened schema takes a moment to be served.
    deadline = time.monotonic() + 15
    while True:
        try:
            await objects.create_cluster(name, **spec)
            return
        except client.exceptions.ApiException as error:
            if error.status != 422 or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_a_workload_behind_a_kubeconfig_secret_and_an_unreachable_one(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    kube_api: ApiClient,
    control_plane: controlplane.ControlPlane,
) -> None:
    await talos_nodes(workload, "v1.14.3")
    await objects.set_targets(TARGETS)
    core = client.CoreV1Api(kube_api)
    dead = controlplane.free_port()
    reachable = control_plane.kubeconfig.read_text()
    unreachable = reachable.replace(control_plane.server, f"https://127.0.0.1:{dead}")
    for name, text in (("reachable", reachable), ("unreachable", unreachable)):
        data = {"kubeconfig": base64.b64encode(text.encode()).decode()}
        await core.create_namespaced_secret(
            objects.namespace,
            {"metadata": {"name": name}, "data": data},  # type: ignore[arg-type]
        )
    await objects.create_cluster("remote", kubeconfigSecretRef={"name": "reachable"})
    await objects.create_cluster("down", kubeconfigSecretRef={"name": "unreachable"})
    await objects.create_cluster("nosecret", kubeconfigSecretRef={"name": "missing"})

    remote = await eventually(lambda: objects.cluster("remote"), observed, what="remote")
    assert condition(remote, "Ready")["status"] == "True"
    assert remote["status"]["talosVersion"] == "v1.14.3"

    down = await eventually(lambda: objects.cluster("down"), observed, what="down")
    ready = condition(down, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "WorkloadUnreachable")
    assert "cannot be reached" in ready["message"]

    missing = await eventually(lambda: objects.cluster("nosecret"), observed, what="nosecret")
    ready = condition(missing, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "KubeconfigUnusable")
    assert "does not exist" in ready["message"]

    # The failing clusters back off; the reachable one keeps being observed.
    await workload.set_node("cp-0", os_image="Talos (v1.14.4)", kubelet="v1.36.6")
    await eventually(
        lambda: objects.cluster("remote"),
        lambda b: b["status"].get("talosVersion") == "v1.14.4",
        what="remote follows its nodes",
    )
    controller = operator.controller
    down_state = controller.clusters[(objects.namespace, "down")]
    assert down_state.failures >= 1


async def test_events_record_what_happened(
    operator: Operator, workload: Workload, objects: Objects, kube_api: ApiClient
) -> None:
    await talos_nodes(workload, "v1.14.3")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4")
    await objects.set_targets(TARGETS)
    await objects.create_cluster("evented")
    await eventually(lambda: objects.cluster("evented"), observed, what="status")
    core = client.CoreV1Api(kube_api)

    async def reasons() -> set[str]:
        found = await core.list_namespaced_event(
            objects.namespace, field_selector="involvedObject.name=evented"
        )
        return {str(event.reason) for event in found.items}

    await eventually(
        reasons, lambda r: {"Observed", "TalosUpgradeAvailable"} <= r, what="first Events"
    )
    # A spec change is handled at once (no webhook runs here to refuse the pair).
    await objects.patch_cluster_spec("evented", {"kubernetesVersion": "v1.31.9"})
    body = await eventually(
        lambda: objects.cluster("evented"),
        lambda b: condition(b, "VersionsCompatible").get("status") == "False",
        within=5,
        what="the incompatible pair",
    )
    assert body["status"]["observedGeneration"] == 2
    await eventually(reasons, lambda r: "VersionsIncompatible" in r, what="the Warning")
    posted = await core.list_namespaced_event(objects.namespace)
    await asyncio.sleep(2.5)  # two observation intervals: nothing changed, nothing posted
    again = await core.list_namespaced_event(objects.namespace)
    assert len(again.items) == len(posted.items)


async def test_a_newer_kubernetes_blocked_by_cilium_is_summarised_in_the_status(
    operator: Operator, workload: Workload, objects: Objects
) -> None:
    await talos_nodes(workload, "v1.14.3", "v1.14.3")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4")
    await objects.set_targets(
        {
            "checkedAt": "2026-12-03T07:00:00Z",
            "talos": ["v1.14.3", "v1.14.4"],
            "kubernetes": ["v1.36.6", "v1.36.7", "v1.37.0", "v1.37.1"],
        }
    )
    await objects.create_cluster("blocked")
    body = await eventually(
        lambda: objects.cluster("blocked"),
        lambda b: observed(b) and bool(condition(b, "UpgradesBlocked")),
        what="UpgradesBlocked",
    )
    blocked = condition(body, "UpgradesBlocked")
    assert blocked["status"] == "True"
    assert blocked["reason"] == "ReleasesNotOffered"
    assert blocked["message"] == (
        "2 recorded newer releases are not offered; nearest: Kubernetes v1.37.1: "
        "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36; a newer Ichor release is needed."
    )
    assert body["status"]["blockedReleases"] == {
        "count": 1,
        "releases": 2,
        "nearest": [
            {
                "component": "kubernetes",
                "version": "v1.37.1",
                "blocker": "Cilium",
                "message": "Kubernetes v1.37.1: Cilium 1.20.4 runs Kubernetes 1.33 to 1.36; "
                "a newer Ichor release is needed",
            }
        ],
    }
    # what is offered is unchanged: the patch only
    assert body["status"]["upgradeChoices"]["kubernetes"]["patch"] == ["v1.36.7"]
    assert condition(body, "KubernetesUpgradeAvailable")["status"] == "True"
