"""The chart installed by helm into the real test API server, and its operator on loopback.

There is no kubelet here, so the chart's Deployment never runs a Pod. The test runs the
operator the chart describes instead: ``python -m ichor.operator`` with the Deployment's
own environment, the serving certificate from the chart's Secret, and the API identity of
the chart's ServiceAccount (a client certificate naming
``system:serviceaccount:<namespace>:<name>``, which RBAC reads like the account's token),
so every call it makes is checked against the chart's ClusterRole. The webhook
configuration reaches it through the values option ``webhook.url`` (the chart's
certificate then names 127.0.0.1), not by patching objects after the install.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ichor.testing import controlplane
from tests.component.chart import helm, readme
from tests.component.webhook import harness

READY_TIMEOUT = 90.0


@dataclass
class Installed:
    plane: controlplane.ControlPlane
    namespace: str
    manifest: list[helm.Object]
    operator: subprocess.Popen[str]
    log: Path
    metrics_url: str
    values_file: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.plane.kubectl(*args, **kwargs)


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


def _operator_env(
    manifest: list[helm.Object], *, tls: Path, kubeconfig: Path, ports: dict[str, int]
) -> dict[str, str]:
    """The Deployment's environment, with loopback addresses and local paths."""
    env = helm.env(manifest)
    env.update(
        ICHOR_WEBHOOK_CERT=str(tls / "tls.crt"),
        ICHOR_WEBHOOK_KEY=str(tls / "tls.key"),
        ICHOR_WEBHOOK_ADDR="127.0.0.1",
        ICHOR_WEBHOOK_PORT=str(ports["webhook"]),
        ICHOR_LIVENESS_ENDPOINT=f"http://127.0.0.1:{ports['healthz']}/healthz",
        ICHOR_METRICS_PORT=str(ports["metrics"]),
        ICHOR_METRICS_ADDR="127.0.0.1",
        KUBECONFIG=str(kubeconfig),
    )
    return controlplane.loopback_env(env)


def start_operator(
    plane: controlplane.ControlPlane,
    manifest: list[helm.Object],
    *,
    namespace: str,
    workdir: Path,
    ports: dict[str, int],
    release: str = helm.RELEASE,
) -> tuple[subprocess.Popen[str], Path]:
    """``python -m ichor.operator`` as the chart's Deployment and ServiceAccount describe it,
    on loopback; returns once its liveness endpoint answers."""
    account = helm.one(manifest, "ServiceAccount")["metadata"]["name"]
    kubeconfig = plane.user_kubeconfig(
        f"system:serviceaccount:{namespace}:{account}",
        groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
    )
    tls = secret_files(plane, namespace, workdir, release=release)
    log = workdir / f"operator-{ports['webhook']}.log"
    with log.open("w") as sink:
        operator = subprocess.Popen(
            [sys.executable, "-m", "ichor.operator"],
            env=_operator_env(manifest, tls=tls, kubeconfig=kubeconfig, ports=ports),
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=workdir,
        )
    try:
        _wait_alive(f"http://127.0.0.1:{ports['healthz']}/healthz", operator, log)
    except BaseException:
        stop_operator(operator)
        raise
    return operator, log


def stop_operator(operator: subprocess.Popen[str]) -> None:
    operator.terminate()
    try:
        operator.wait(30)
    except subprocess.TimeoutExpired:
        operator.kill()
        operator.wait(10)


def _wait_alive(url: str, process: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        if process.poll() is not None:
            raise AssertionError(f"the operator exited {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer in {READY_TIMEOUT} s:\n{log.read_text()}")
        time.sleep(0.3)


def _clear_leftover_installation(plane: controlplane.ControlPlane) -> None:
    """An IchorInstallation another test left (not Helm's) would make the install fail."""
    found = plane.kubectl("get", "ichorinstallation", "ichor", "-o", "json", check=False)
    if found.returncode == 0:
        labels = json.loads(found.stdout)["metadata"].get("labels") or {}
        if labels.get("app.kubernetes.io/managed-by") != "Helm":
            plane.kubectl("delete", "ichorinstallation", "ichor", "--wait=true")


@pytest.fixture(scope="package")
def installed(
    control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    workdir = tmp_path_factory.mktemp("chart")
    namespace = f"ichor-system-{uuid.uuid4().hex[:6]}"
    ports = {name: controlplane.free_port() for name in ("webhook", "healthz", "metrics")}
    _clear_leftover_installation(control_plane)
    values = {
        "webhook": {"url": f"https://127.0.0.1:{ports['webhook']}"},
        # No internet here: the check fails at once on a closed loopback port instead.
        "releaseCheck": {
            "talosRepository": "127.0.0.1:1/siderolabs/installer-base",
            "kubernetesRepository": "127.0.0.1:1/siderolabs/kubelet",
            "chartRepository": "127.0.0.1:1/ichor-dev/charts/ichor",
        },
    }
    values_file = workdir / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    # The README's command, in a namespace of its own and with the loopback values.
    words = readme.command("helm install ")
    assert words[:4] == ["helm", "install", helm.RELEASE, "charts/ichor"], words
    words = [namespace if w == "ichor-system" else w for w in words]
    run_helm(
        control_plane, "install", helm.RELEASE, str(helm.CHART), *words[4:], "-f", str(values_file)
    )
    operator: subprocess.Popen[str] | None = None
    try:
        manifest_text = run_helm(
            control_plane, "get", "manifest", helm.RELEASE, "-n", namespace
        ).stdout
        manifest = [doc for doc in yaml.safe_load_all(manifest_text) if doc]
        operator, log = start_operator(
            control_plane, manifest, namespace=namespace, workdir=workdir, ports=ports
        )
        running = operator
        harness.wait_until_answering(control_plane, alive=lambda: running.poll() is None)
        yield Installed(
            plane=control_plane,
            namespace=namespace,
            manifest=manifest,
            operator=operator,
            log=log,
            metrics_url=f"http://127.0.0.1:{ports['metrics']}/metrics",
            values_file=values_file,
        )
    finally:
        # The operator stops first: its role goes with the release.
        if operator is not None:
            stop_operator(operator)
        try:
            run_helm(control_plane, "uninstall", helm.RELEASE, "-n", namespace, "--wait")
        finally:
            control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
