"""The CRDs as the API server serves them: form rules, printer columns, short names."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from tests.component.controller.conftest import (
    Objects,
    Operator,
    Workload,
    condition,
    eventually,
)
from tests.harness import controlplane

pytestmark = pytest.mark.component


def manifest(kind: str, name: str, spec: dict[str, Any]) -> str:
    return json.dumps(
        {"apiVersion": "ichor.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    )


CLUSTER = {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"}
WINDOW = {"schedule": "0 2 * * 6", "duration": "4h", "timeZone": "Europe/Berlin"}


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({**CLUSTER, "talosVersion": "1.14.3"}, "talosVersion 1.14.3 is not a version"),
        ({**CLUSTER, "talosVersion": "v1.14"}, "expected the full form vX.Y.Z"),
        ({**CLUSTER, "kubernetesVersion": "v1.36.06"}, "kubernetesVersion v1.36.06 is not"),
        ({**CLUSTER, "versionContract": "v1.14.0"}, "versionContract v1.14.0 is not a contract"),
        ({**CLUSTER, "cni": {"preset": "weave"}}, "Unsupported value"),
        ({**CLUSTER, "schematic": "abc"}, "schematic must be an Image Factory schematic ID"),
        *[
            ({**CLUSTER, "autoPatch": auto_patch}, words)
            for auto_patch, words in [
                (
                    {"windows": [{**WINDOW, "schedule": "@daily"}]},
                    'schedule "@daily" is not a five-field cron',
                ),
                (
                    {"windows": [{**WINDOW, "schedule": "0 2 * *"}]},
                    'schedule "0 2 * *" is not a five-field',
                ),
                (
                    {"windows": [{**WINDOW, "schedule": "0 2 * * * *"}]},
                    'schedule "0 2 * * * *" is not',
                ),
                (
                    {"windows": [{**WINDOW, "duration": "0m"}]},
                    'duration "0m" must be longer than 0',
                ),
                (
                    {"windows": [{**WINDOW, "duration": "0h0m"}]},
                    'duration "0h0m" must be longer than 0',
                ),
                (
                    {"windows": [{**WINDOW, "duration": "169h"}]},
                    'duration "169h" must be longer than 0 and at most 168h',
                ),
                ({"windows": [{**WINDOW, "duration": "1d"}]}, 'duration "1d" must be'),
                (
                    {"windows": [{**WINDOW, "timeZone": "Europe Berlin"}]},
                    'timeZone "Europe Berlin" is not an IANA',
                ),
                (
                    {"windows": [{**WINDOW, "timeZone": "../etc/passwd"}]},
                    'timeZone "../etc/passwd" is not',
                ),
                ({"windows": [{"schedule": "0 2 * * *"}]}, "duration: Required value"),
                ({"minReleaseAge": "3 days"}, 'minReleaseAge "3 days" is not a duration'),
                ({"components": ["talos", "etcd"]}, "Unsupported value"),
                ({"components": ["talos", "talos"]}, "Duplicate value"),
                ({"windows": [WINDOW] * 17}, "must have at most 16 items"),
                # a check over Secrets: its verdict would be an oracle on their values
                (
                    {
                        "healthChecks": [
                            {
                                "name": "oracle",
                                "apiVersion": "v1",
                                "resource": "secrets",
                                "namespace": "kube-system",
                                "expression": "objects.size() > 0",
                            }
                        ]
                    },
                    "resource secrets is refused",
                ),
                (
                    {
                        "healthChecks": [
                            {
                                "name": "oracle",
                                "apiVersion": "example.com/v1",
                                "resource": "secrets",
                                "expression": "true",
                            }
                        ]
                    },
                    "resource secrets is refused",
                ),
                (
                    {
                        "healthChecks": [
                            {
                                "name": "sub",
                                "apiVersion": "v1",
                                "resource": "secrets/token",
                                "expression": "true",
                            }
                        ]
                    },
                    "resource in body should match",
                ),
            ]
        ],
    ],
)
def test_a_malformed_cluster_is_refused_by_form(
    crds: None,
    control_plane: controlplane.ControlPlane,
    namespace: str,
    spec: dict[str, Any],
    words: str,
) -> None:
    result = control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", input=manifest("TalosCluster", "x", spec), check=False
    )
    assert result.returncode != 0
    assert words in result.stderr


def test_a_well_formed_cluster_is_accepted_with_defaults(
    crds: None, control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    spec = {**CLUSTER, "talosVersion": "v1.14.3-beta.1", "kubeconfigSecretRef": {"name": "k"}}
    control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", input=manifest("TalosCluster", "x", spec)
    )
    got = json.loads(control_plane.kubectl("get", "tc", "x", "-n", namespace, "-o", "json").stdout)
    assert got["spec"]["cni"] == {"preset": "cilium"}
    assert got["spec"]["kubeconfigSecretRef"] == {"name": "k", "key": "kubeconfig"}


def test_auto_patch_settings_are_stored_as_written_with_the_zone_defaulted(
    crds: None, control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    auto_patch = {
        "components": ["talos", "kubernetes", "cilium"],
        "windows": [WINDOW, {"schedule": "*/30 22-23,0-3 * * sat,sun", "duration": "1h30m"}],
        "minReleaseAge": "0m",
        "suspended": False,
    }
    spec = {**CLUSTER, "autoPatch": auto_patch}
    control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", input=manifest("TalosCluster", "ap", spec)
    )
    got = json.loads(control_plane.kubectl("get", "tc", "ap", "-n", namespace, "-o", "json").stdout)
    assert got["spec"]["autoPatch"]["windows"][1]["timeZone"] == "UTC"
    assert got["spec"]["autoPatch"]["components"] == ["talos", "kubernetes", "cilium"]


@pytest.mark.parametrize(
    ("auto_patch", "words"),
    [
        ({"maxConcurrentClusters": 0}, "should be greater than or equal to 1"),
        ({"windows": [{**WINDOW, "duration": "0m"}]}, 'duration "0m" must be longer than 0'),
        ({"windows": [{**WINDOW, "schedule": "every night"}]}, 'schedule "every night" is not'),
        (
            {
                "healthChecks": [
                    {
                        "name": "oracle",
                        "apiVersion": "v1",
                        "resource": "secrets",
                        "expression": "true",
                    }
                ]
            },
            "resource secrets is refused",
        ),
    ],
)
def test_the_fleet_auto_patch_settings_are_refused_by_form(
    crds: None, control_plane: controlplane.ControlPlane, auto_patch: dict[str, Any], words: str
) -> None:
    refused = control_plane.kubectl(
        "apply", "--dry-run=server", "-f", "-",
        input=manifest("IchorInstallation", "ichor", {"autoPatch": auto_patch}), check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert words in refused.stderr


def test_the_installation_is_a_singleton_with_defaults(
    crds: None, control_plane: controlplane.ControlPlane
) -> None:
    refused = control_plane.kubectl(
        "apply", "-f", "-", input=manifest("IchorInstallation", "other", {}), check=False
    )
    assert refused.returncode != 0
    assert "singleton and must be named ichor" in refused.stderr
    bad = control_plane.kubectl(
        "apply",
        "-f",
        "-",
        input=manifest("IchorInstallation", "ichor", {"releaseCheck": {"interval": "10s"}}),
        check=False,
    )
    assert "must be a duration of at least 1m" in bad.stderr
    control_plane.kubectl("apply", "-f", "-", input=manifest("IchorInstallation", "ichor", {}))
    try:
        got = json.loads(control_plane.kubectl("get", "ichorinst", "ichor", "-o", "json").stdout)
        assert got["spec"]["releaseCheck"] == {
            "enabled": True,
            "interval": "6h",
            "talosRepository": "ghcr.io/siderolabs/installer-base",
            "kubernetesRepository": "ghcr.io/siderolabs/kubelet",
        }
    finally:
        control_plane.kubectl("delete", "ichorinstallation", "ichor", "--wait=false")


OPERATION = {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"}


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({**OPERATION, "version": "1.14.4"}, "version 1.14.4 is not a version"),
        ({"clusterRef": {"name": "prod"}, "type": "kubernetes"}, "needs a version"),
        ({**OPERATION, "type": "cni"}, "a cni operation takes no version"),
        ({**OPERATION, "type": "etcd"}, "Unsupported value"),
    ],
)
def test_a_malformed_operation_is_refused_by_form(
    crds: None,
    control_plane: controlplane.ControlPlane,
    namespace: str,
    spec: dict[str, Any],
    words: str,
) -> None:
    result = control_plane.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=manifest("TalosOperation", "op", spec),
        check=False,
    )
    assert result.returncode != 0
    assert words in result.stderr


def test_an_operation_spec_is_immutable_and_its_columns_answer_what_it_does(
    crds: None, control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    kubectl = control_plane.kubectl
    kubectl("apply", "-n", namespace, "-f", "-", input=manifest("TalosOperation", "op", OPERATION))
    changed = kubectl(
        "patch", "-n", namespace, "talosoperation", "op", "--type=merge",
        "-p", '{"spec": {"version": "v1.14.5"}}', check=False,
    )  # fmt: skip
    assert changed.returncode != 0
    assert "spec of a TalosOperation is immutable" in changed.stderr
    kubectl(
        "patch", "-n", namespace, "tops", "op", "--subresource=status", "--type=merge",
        "-p", '{"status": {"phase": "Running", "jobName": "op-talos-1"}}',
    )  # fmt: skip
    table = kubectl("get", "-n", namespace, "talosoperations", "-o", "wide").stdout
    header, row = table.splitlines()[:2]
    assert re.split(r"\s{2,}", header.strip()) == [
        "NAME", "CLUSTER", "TYPE", "VERSION", "PHASE", "OVERRIDE", "JOB", "MESSAGE", "AGE",
    ]  # fmt: skip
    assert row.split()[:7] == ["op", "prod", "talos", "v1.14.4", "Running", "false", "op-talos-1"]
    # The category lists every kind of Ichor.
    listed = kubectl("get", "ichor", "-n", namespace, "-o", "name").stdout
    assert "talosoperation.ichor.dev/op" in listed


async def test_printer_columns_show_what_runs_and_what_it_can_upgrade_to(
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:
    await workload.add_node("cp-0", talos="v1.14.3", kubelet="v1.36.6")
    await workload.add_daemonset("cilium", image="quay.io/cilium/cilium:v1.20.4")
    await objects.set_targets(
        {"talos": ["v1.14.3", "v1.14.4"], "kubernetes": ["v1.36.6", "v1.36.7"]}
    )
    await objects.create_cluster("prod")
    await eventually(
        lambda: objects.cluster("prod"),
        lambda b: (
            condition(b, "Ready").get("status") == "True"
            and bool(b["status"]["upgradeChoices"]["kubernetes"].get("default"))
        ),
        what="status with choices",
    )
    result = await asyncio.to_thread(
        control_plane.kubectl, "get", "talosclusters", "-n", objects.namespace, "-o", "wide"
    )
    header, row = result.stdout.splitlines()[:2]
    assert re.split(r"\s{2,}", header.strip()) == [
        "NAME", "TALOS", "KUBERNETES", "CILIUM", "TALOS-UPGRADE", "KUBERNETES-UPGRADE",
        "READY", "COMPATIBLE", "NODES-DIFFER", "CNI", "SPEC-TALOS", "SPEC-KUBERNETES",
        "IMAGES", "NEXT-WINDOW", "ACCOUNT", "AGE",
    ]  # fmt: skip
    assert row.split()[:12] == [
        "prod", "v1.14.3", "v1.36.6", "1.20.4", "v1.14.4", "v1.36.7",
        "True", "True", "false", "cilium", "v1.14.3", "v1.36.6",
    ]  # fmt: skip
    short = await asyncio.to_thread(
        control_plane.kubectl, "get", "tc", "-n", objects.namespace, "-o", "name"
    )
    assert short.stdout.strip() == "taloscluster.ichor.dev/prod"
