"""The chart installed by helm into the real test API server, and its operator on loopback.

There is no kubelet here, so the chart's Deployment never runs a Pod. The test runs the
operator the chart describes instead (the install is ``release.installed``):
``python -m ichor.operator`` with the Deployment's own environment (the Pod's name filled
in for ``POD_ID``), the serving certificate from the chart's Secret, and the API identity
of the chart's ServiceAccount (a client certificate naming
``system:serviceaccount:<namespace>:<name>``, which RBAC reads like the account's token),
so every call it makes is checked against the chart's ClusterRole. tests/component/image
runs the built image the same way.
"""

from __future__ import annotations

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

from tests.component.chart import helm, release
from tests.component.chart import release as release_module
from tests.component.chart.release import secret_files
from tests.component.webhook import harness
from tests.harness import controlplane

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
    #: The install's flags beyond the values file (the install page's mutual TLS).
    helm_flags: tuple[str, ...] = ()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.plane.kubectl(*args, **kwargs)


def _operator_env(
    manifest: list[helm.Object],
    *,
    pod: str,
    namespace: str,
    tls: Path,
    kubeconfig: Path,
    ports: dict[str, int],
) -> dict[str, str]:
    """The Deployment's environment for the Pod ``pod``, with loopback addresses and local
    paths."""
    env = helm.env(manifest, pod=pod, namespace=namespace)
    if "ICHOR_WEBHOOK_CLIENT_CA" in env:
        env["ICHOR_WEBHOOK_CLIENT_CA"] = str(tls.parent / "webhook-client" / "ca.crt")
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


def pod_name(manifest: list[helm.Object]) -> str:
    """A name as the Deployment's ReplicaSet gives its Pods: ``<deployment>-<hash>-<id>``."""
    deployment = helm.one(manifest, "Deployment")["metadata"]["name"]
    return f"{deployment}-{uuid.uuid4().hex[:10]}-{uuid.uuid4().hex[:5]}"


def start_operator(
    plane: controlplane.ControlPlane,
    manifest: list[helm.Object],
    *,
    namespace: str,
    workdir: Path,
    ports: dict[str, int],
    release: str = helm.RELEASE,
    pod: str | None = None,
) -> tuple[subprocess.Popen[str], Path]:
    """``python -m ichor.operator`` as the chart's Deployment and ServiceAccount describe it
    for the Pod ``pod`` (a name like the ReplicaSet's Pods get when not given), on loopback;
    returns once its liveness endpoint answers."""
    pod = pod or pod_name(manifest)
    account = helm.one(manifest, "ServiceAccount")["metadata"]["name"]
    kubeconfig = plane.user_kubeconfig(
        f"system:serviceaccount:{namespace}:{account}",
        groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
    )
    tls = secret_files(plane, namespace, workdir, release=release)
    if helm.find(manifest, "ConfigMap", f"{release}-webhook-client-ca"):
        release_module.client_ca_files(plane, namespace, workdir, release=release)
    log = workdir / f"operator-{ports['webhook']}.log"
    with log.open("w") as sink:
        operator = subprocess.Popen(
            [sys.executable, "-m", "ichor.operator"],
            env=_operator_env(
                manifest, pod=pod, namespace=namespace, tls=tls, kubeconfig=kubeconfig, ports=ports
            ),
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


@pytest.fixture(scope="package")
def installed(
    control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    workdir = tmp_path_factory.mktemp("chart")
    ports = {name: controlplane.free_port() for name in ("webhook", "healthz", "metrics")}
    with release.installed(
        control_plane, workdir=workdir, webhook_port=ports["webhook"], mutual_tls=True
    ) as rel:
        operator: subprocess.Popen[str] | None = None
        try:
            operator, log = start_operator(
                control_plane, rel.manifest, namespace=rel.namespace, workdir=workdir, ports=ports
            )
            running = operator
            harness.wait_until_answering(control_plane, alive=lambda: running.poll() is None)
            yield Installed(
                plane=control_plane,
                namespace=rel.namespace,
                manifest=rel.manifest,
                operator=operator,
                log=log,
                metrics_url=f"http://127.0.0.1:{ports['metrics']}/metrics",
                values_file=rel.values_file,
                helm_flags=rel.flags,
            )
        finally:
            # The operator stops first: its role goes with the release.
            if operator is not None:
                stop_operator(operator)
