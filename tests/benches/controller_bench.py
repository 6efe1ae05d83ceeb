"""How long the controller takes to give 200 TalosClusters their status, and its memory.

Starts its own control plane, creates 200 TalosClusters (all observing the same
"workload": three Talos Nodes and a Cilium DaemonSet) and a release list, then starts the
operator in-process, as after a restart, and waits until every cluster's status carries
its upgrade choices. Then it changes the release list and waits until every cluster
follows. The RSS is this process's (operator and the bench's own client together).
"""

from __future__ import annotations

import asyncio
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import kopf
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.api_client import ApiClient

from ichor.api import kinds
from ichor.controller import handlers
from ichor.controller.clusters import ControllerSettings
from ichor.testing import controlplane

CLUSTERS = 200
CRDS = Path(__file__).resolve().parents[2] / "crds"
MERGE = "application/merge-patch+json"
TARGETS: dict[str, Any] = {
    "checkedAt": "2026-12-03T07:00:00Z",
    "talos": ["v1.14.3", "v1.14.4", "v1.15.0"],
    "kubernetes": ["v1.36.6", "v1.36.7", "v1.37.1"],
}


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _workload(api: ApiClient) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    for n in range(3):
        info = {
            "osImage": "Talos (v1.14.3)", "kubeletVersion": "v1.36.6", "kubeProxyVersion": "",
            "machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.12",
            "containerRuntimeVersion": "containerd://2.1", "operatingSystem": "linux",
            "architecture": "amd64",
        }  # fmt: skip
        name = f"cp-{n}"
        await core.create_node({"metadata": {"name": name}})  # type: ignore[arg-type]
        await core.patch_node_status(name, {"status": {"nodeInfo": info}})
    labels = {"app": "cilium"}
    daemonset = {
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "cilium-agent", "image": "cilium:v1.20.4"}]},
            },
        },
    }
    await apps.create_namespaced_daemon_set("kube-system", daemonset)  # type: ignore[arg-type]


async def _targets(api: ApiClient, targets: dict[str, Any]) -> None:
    custom = client.CustomObjectsApi(api)
    plural = kinds.Plural.ICHOR_INSTALLATIONS
    try:
        await custom.create_cluster_custom_object(
            kinds.GROUP,
            kinds.VERSION,
            plural,
            {
                "apiVersion": kinds.API_VERSION,
                "kind": "IchorInstallation",
                "metadata": {"name": "ichor"},
            },
        )
    except client.exceptions.ApiException as error:
        if error.status != 409:
            raise
    await custom.patch_cluster_custom_object_status(
        kinds.GROUP, kinds.VERSION, plural, "ichor", {"status": {"upgradeTargets": targets}},
        _content_type=MERGE,  # type: ignore[call-arg]
    )  # fmt: skip


async def _clusters(api: ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    gate = asyncio.Semaphore(16)

    async def one(n: int) -> None:
        body = {
            "apiVersion": kinds.API_VERSION,
            "kind": "TalosCluster",
            "metadata": {"name": f"cluster-{n:03d}"},
            "spec": {
                "talosVersion": "v1.14.3",
                "kubernetesVersion": "v1.36.6",
                "versionContract": "v1.14",
            },
        }
        async with gate:
            await custom.create_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, namespace, kinds.Plural.TALOS_CLUSTERS, body
            )

    await asyncio.gather(*(one(n) for n in range(CLUSTERS)))


async def _wait_all(api: ApiClient, namespace: str, *, default: str, within: float) -> float:
    custom = client.CustomObjectsApi(api)
    started = time.monotonic()
    while True:
        listed = await custom.list_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, namespace, kinds.Plural.TALOS_CLUSTERS
        )
        done = sum(
            1
            for item in listed["items"]
            if ((item.get("status") or {}).get("upgradeChoices") or {})
            .get("talos", {})
            .get("default")
            == default
        )
        if done == CLUSTERS:
            return time.monotonic() - started
        if time.monotonic() - started > within:
            raise RuntimeError(f"only {done} of {CLUSTERS} clusters reconciled in {within} s")
        await asyncio.sleep(0.25)


async def _bench(workdir: Path) -> list[str]:
    plane = controlplane.ControlPlane(workdir=workdir).start()
    os.environ["KUBECONFIG"] = str(plane.kubeconfig)
    try:
        plane.kubectl("apply", "--server-side", "-f", str(CRDS))
        for kind in kinds.Kind:
            plane.kubectl("wait", "--for=condition=Established", f"crd/{kinds.crd_name(kind)}")
        plane.kubectl("create", "namespace", "bench")
        configuration = client.Configuration()
        await config.load_kube_config(
            config_file=str(plane.kubeconfig), client_configuration=configuration
        )
        async with ApiClient(configuration=configuration) as api:
            await _workload(api)
            await _targets(api, TARGETS)
            await _clusters(api, "bench")
            rss_before = _rss_mib()

            registry = kopf.OperatorRegistry()
            handlers.register(registry)
            memo = kopf.Memo()
            memo[handlers.SETTINGS] = ControllerSettings()
            stop, ready = asyncio.Event(), asyncio.Event()
            started = time.monotonic()
            task = asyncio.create_task(
                kopf.operator(
                    registry=registry, clusterwide=True, standalone=True, memo=memo,
                    stop_flag=stop, ready_flag=ready,
                )
            )  # fmt: skip
            try:
                await _wait_all(api, "bench", default="v1.14.4", within=300)
                first = time.monotonic() - started
                rss_after = _rss_mib()
                await _targets(api, {**TARGETS, "talos": ["v1.14.3", "v1.14.4", "v1.14.5"]})
                follow = await _wait_all(api, "bench", default="v1.14.5", within=120)
            finally:
                stop.set()
                await asyncio.wait_for(task, timeout=60)
    finally:
        os.environ.pop("KUBECONFIG", None)
        plane.stop()
    return [
        f"controller: {CLUSTERS} TalosClusters reconciled with choices in {first:.1f} s "
        f"from operator start (8 workers)",
        f"controller: a changed release list recomputed all {CLUSTERS} in {follow:.1f} s",
        f"controller: RSS {rss_before:.0f} MiB before the operator, {rss_after:.0f} MiB after "
        f"reconciling {CLUSTERS} clusters (peak {_peak_mib():.0f} MiB, bench client included)",
    ]


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="ichor-bench-") as workdir:
        return asyncio.run(_bench(Path(workdir)))


if __name__ == "__main__":
    for line in run():
        print(line)
