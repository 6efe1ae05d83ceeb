"""`helm install` with more than one replica: kopf's peering CRD, the ClusterKopfPeering the
operator is told to use (a post-install hook, since its CRD comes with the same release)
and the PodDisruptionBudget are all accepted by the real API server.

A second release of its own, without the cluster-wide singletons the first one holds
(``ichor-override``, the IchorInstallation); uninstalled at once, because its webhook
configuration points at a Service no Pod serves here.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import yaml

from ichor.testing import controlplane
from tests.component.chart import helm

pytestmark = pytest.mark.component


def _helm(plane: controlplane.ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(helm.binary()), "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=controlplane.loopback_env(),
    )
    assert result.returncode == 0, result.stderr
    return result


def test_replicas_install_peering_and_a_disruption_budget(
    control_plane: controlplane.ControlPlane,
) -> None:
    namespace = f"ichor-replicas-{uuid.uuid4().hex[:6]}"
    release = f"ichor-ha-{uuid.uuid4().hex[:4]}"
    values = ["--set", "replicas=2", "--set", "override.create=false"]
    values += ["--set", "installation.create=false"]
    _helm(
        control_plane, "install", release, str(helm.CHART), "-n", namespace,
        "--create-namespace", *values,
    )  # fmt: skip
    try:
        manifest = yaml.safe_load_all(
            _helm(control_plane, "get", "manifest", release, "-n", namespace).stdout
        )
        objects = [o for o in manifest if o]
        env = helm.env(objects)
        peering = json.loads(
            control_plane.kubectl(
                "get", "clusterkopfpeering.kopf.dev", env["ICHOR_PEERING"], "-o", "json"
            ).stdout
        )
        assert peering["metadata"]["name"] == release
        pdb = json.loads(
            control_plane.kubectl("get", "pdb", release, "-n", namespace, "-o", "json").stdout
        )
        assert pdb["spec"]["minAvailable"] == 1
        deployment = json.loads(
            control_plane.kubectl(
                "get", "deployment", release, "-n", namespace, "-o", "json"
            ).stdout
        )
        assert deployment["spec"]["replicas"] == 2
    finally:
        _helm(control_plane, "uninstall", release, "-n", namespace, "--wait")
        control_plane.kubectl(
            "delete", "clusterkopfpeering.kopf.dev", release, "--ignore-not-found"
        )
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
