"""The chart installed by helm into the test API server with loopback values, for every test
that runs the operator the chart describes (in-process here, or its image elsewhere).

There is no kubelet, so the chart's Deployment never runs a Pod: the tests run the
operator themselves with the Deployment's environment, the certificate from the chart's
Secret and the identity of the chart's ServiceAccount. The webhook configuration reaches
it through the values option ``webhook.url`` (the chart's certificate then names
127.0.0.1), not by patching objects after the install.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.component.chart import helm, readme
from tests.harness import account, controlplane
from tests.harness.registry import OFFLINE_REPOSITORIES


@dataclass(frozen=True)
class Release:
    namespace: str
    manifest: list[helm.Object]
    values_file: Path
    name: str = helm.RELEASE
    #: The ``--set`` flags the install had beyond the values file (an upgrade repeats them).
    flags: tuple[str, ...] = ()

    @property
    def service_account(self) -> str:
        name: str = helm.one(self.manifest, "ServiceAccount")["metadata"]["name"]
        return name


def run_helm(plane: controlplane.ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(helm.binary()), "--kubeconfig", str(plane.kubeconfig), *args]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=controlplane.loopback_env(),
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed:\n{result.stderr}")
    return result


def secret_files(
    plane: controlplane.ControlPlane, namespace: str, workdir: Path, *, release: str = helm.RELEASE
) -> Path:
    """The chart's webhook Secret written to files, as the Pod's volume would hold it."""
    name = f"{release}-webhook-tls"
    secret = json.loads(plane.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout)
    directory = workdir / "webhook-tls"
    directory.mkdir(exist_ok=True)
    for key, value in secret["data"].items():
        (directory / key).write_bytes(base64.b64decode(value))
    return directory


def _clear_leftover_installation(plane: controlplane.ControlPlane) -> None:
    """An IchorInstallation another test left (not Helm's) would make the install fail."""
    found = plane.kubectl("get", "ichorinstallation", "ichor", "-o", "json", check=False)
    if found.returncode == 0:
        labels = json.loads(found.stdout)["metadata"].get("labels") or {}
        if labels.get("app.kubernetes.io/managed-by") != "Helm":
            plane.kubectl("delete", "ichorinstallation", "ichor", "--wait=true")


def _hand_reader_role_to(plane: controlplane.ControlPlane, namespace: str) -> None:
    """The chart's ``ichor-tenant-reader``, applied by a test that bound it to a tenant
    (tests/harness/account.py) and not Helm's, would make the install fail: it is marked
    as this release's, so Helm adopts it and removes it at uninstall."""
    found = plane.kubectl("get", "clusterrole", account.TENANT_READER, "-o", "json", check=False)
    if found.returncode != 0:
        return
    labels = json.loads(found.stdout)["metadata"].get("labels") or {}
    if labels.get("app.kubernetes.io/managed-by") == "Helm":
        return
    role = ["clusterrole", account.TENANT_READER]
    plane.kubectl("label", *role, "--overwrite", "app.kubernetes.io/managed-by=Helm")
    plane.kubectl(
        "annotate", *role, "--overwrite",
        f"meta.helm.sh/release-name={helm.RELEASE}", f"meta.helm.sh/release-namespace={namespace}",
    )  # fmt: skip


#: The install page's command that turns on mutual TLS for the webhook (docs/install.md).
MUTUAL_TLS = "helm upgrade ichor charts/ichor"


def client_ca_files(
    plane: controlplane.ControlPlane, namespace: str, workdir: Path, *, release: str = helm.RELEASE
) -> Path:
    """The chart's webhook client CA ConfigMap written to files, as the Pod's volume holds it."""
    name = f"{release}-webhook-client-ca"
    found = json.loads(
        plane.kubectl("get", "configmap", name, "-n", namespace, "-o", "json").stdout
    )
    directory = workdir / "webhook-client"
    directory.mkdir(exist_ok=True)
    for key, value in found["data"].items():
        (directory / key).write_text(value)
    return directory


def mutual_tls_flags(plane: controlplane.ControlPlane) -> list[str]:
    """The install page's mutual-TLS flags, with the test control plane's webhook client CA."""
    flags: list[str] = []
    for flag, value in readme.set_flags(MUTUAL_TLS):
        if flag == "--set-file":
            key, _, _ = value.partition("=")
            value = f"{key}={plane.webhook_client_ca}"
        flags += [flag, value]
    assert "webhook.clientAuth.enabled=true" in flags, flags
    return flags


@contextlib.contextmanager
def installed(
    plane: controlplane.ControlPlane,
    *,
    workdir: Path,
    webhook_port: int,
    mutual_tls: bool = False,
) -> Iterator[Release]:
    """The install page's ``helm install``, in a namespace of its own, with the webhook at
    ``https://127.0.0.1:<webhook_port>``; uninstalled afterwards (stop the operator first:
    its role goes with the release). ``mutual_tls`` adds the page's flags that make the
    webhook require the API server's client certificate (``client_ca_files``)."""
    namespace = f"ichor-system-{uuid.uuid4().hex[:6]}"
    _clear_leftover_installation(plane)
    _hand_reader_role_to(plane, namespace)
    values = {
        "webhook": {"url": f"https://127.0.0.1:{webhook_port}"},
        # No kubelet runs a Job here, and helm waits for its hook Job: the CRD upgrade
        # hook runs on the node (tests/node/test_upgrade_on_node.py).
        "crds": {"upgrade": {"enabled": False}},
        # No internet here: the check fails at once on a closed loopback port instead.
        "releaseCheck": OFFLINE_REPOSITORIES,
    }
    values_file = workdir / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    words = readme.command("helm install ")
    assert words[:4] == ["helm", "install", helm.RELEASE, "charts/ichor"], words
    words = [namespace if w == "ichor-system" else w for w in words]
    flags = mutual_tls_flags(plane) if mutual_tls else []
    run_helm(
        plane, "install", helm.RELEASE, str(helm.CHART), *words[4:], "-f", str(values_file), *flags
    )
    try:
        text = run_helm(plane, "get", "manifest", helm.RELEASE, "-n", namespace).stdout
        manifest = [doc for doc in yaml.safe_load_all(text) if doc]
        yield Release(
            namespace=namespace, manifest=manifest, values_file=values_file, flags=tuple(flags)
        )
    finally:
        try:
            run_helm(plane, "uninstall", helm.RELEASE, "-n", namespace, "--wait")
        finally:
            plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
