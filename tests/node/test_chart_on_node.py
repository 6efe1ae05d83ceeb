"""The chart as a user installs it, on the real node: the operator runs in its Pod.

``helm install`` with the README's command and the image built from the Dockerfile; the
Deployment becomes Available; the container runs as the chart says (its process is
non-root, cannot write its root filesystem, holds no capability); the API server calls
the webhook through the chart's Service with the chart's certificate; the probes pass
(Ready, no restart); metrics answer at the Pod's address; ``helm upgrade`` keeps the
certificate and the webhook keeps answering; ``helm uninstall`` leaves the CRDs (and
what they hold), as the README says, and nothing else of the release.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.component.chart import helm, readme
from tests.harness import netns, node
from tests.node.conftest import NodeImages, record

RELEASE = helm.RELEASE


@dataclass
class OnNode:
    cluster: node.Node
    namespace: str
    values_file: Path

    def kubectl(self, *args: str, **kwargs: Any) -> Any:
        return self.cluster.kubectl(*args, **kwargs)

    def pod(self) -> dict[str, Any]:
        pods = json.loads(
            self.kubectl(
                "get", "pods", "-n", self.namespace, "-l",
                "app.kubernetes.io/name=ichor", "-o", "json",
            ).stdout
        )["items"]  # fmt: skip
        running = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        assert len(running) == 1, [p["metadata"]["name"] for p in pods]
        pod: dict[str, Any] = running[0]
        return pod

    def exec(self, *command: str, check: bool = True) -> Any:
        name = self.pod()["metadata"]["name"]
        return self.kubectl(
            "exec", "-n", self.namespace, name, "-c", "operator", "--", *command, check=check
        )


def run_helm(cluster: node.Node, *args: str) -> str:
    result = helm.run("--kubeconfig", str(cluster.kubeconfig), *args, check=False)
    if result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def wait_available(cluster: node.Node, namespace: str, *, within: float = 180) -> float:
    started = time.monotonic()
    result = cluster.kubectl(
        "rollout", "status", f"deployment/{RELEASE}", "-n", namespace, f"--timeout={int(within)}s",
        check=False, timeout=within + 30,
    )  # fmt: skip
    if result.returncode != 0:
        pods = cluster.kubectl("describe", "pods", "-n", namespace, check=False).stdout
        logs = cluster.kubectl(
            "logs", "-n", namespace, f"deployment/{RELEASE}", "--all-containers", check=False
        )
        raise AssertionError(
            f"the Deployment did not become Available: {result.stderr}\n{pods}\n{logs.stdout}"
        )
    return time.monotonic() - started


def install_values(images: NodeImages, operator_image: str) -> dict[str, Any]:
    repository, _, tag = operator_image.rpartition(":")
    return {
        "image": {"repository": repository, "tag": tag},
        # no registry outside: the check fails at once on a closed port of the Pod
        "releaseCheck": {
            "registryHost": "127.0.0.1:1",
            "talosRepository": "127.0.0.1:1/siderolabs/installer-base",
            "kubernetesRepository": "127.0.0.1:1/siderolabs/kubelet",
            "chartRepository": "127.0.0.1:1/ichor-dev/charts/ichor",
        },
        "executor": {"helmImage": images.helm, "talosctlImage": images.talosctl},
    }


@pytest.fixture(scope="module")
def on_node(
    one_node: node.Node,
    node_images: NodeImages,
    operator_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OnNode]:
    namespace = f"ichor-system-{uuid.uuid4().hex[:6]}"
    values_file = tmp_path_factory.mktemp("chart-on-node") / "values.yaml"
    values_file.write_text(yaml.safe_dump(install_values(node_images, operator_image)))
    words = readme.command("helm install ")
    assert words[:4] == ["helm", "install", RELEASE, "charts/ichor"], words
    words = [namespace if w == "ichor-system" else w for w in words]
    run_helm(one_node, "install", RELEASE, str(helm.CHART), *words[4:], "-f", str(values_file))
    record("chart Available", f"{wait_available(one_node, namespace):.1f} s")
    yield OnNode(cluster=one_node, namespace=namespace, values_file=values_file)
    run_helm(one_node, "uninstall", RELEASE, "-n", namespace, "--wait")


def test_the_operator_runs_in_its_pod_as_the_chart_says(on_node: OnNode) -> None:
    pod = on_node.pod()
    status = pod["status"]
    (container,) = status["containerStatuses"]
    assert container["ready"] is True
    assert container["restartCount"] == 0
    assert container["image"].startswith(f"{node.NODE_IP}:"), "the image built here, not a pull"
    ids = on_node.exec("python", "-c", "import os; print(os.getuid(), os.getgid())").stdout
    assert ids.split() == ["65532", "65532"]
    caps = on_node.exec("python", "-c", "print(open('/proc/self/status').read())").stdout
    effective = next(line for line in caps.splitlines() if line.startswith("CapEff:"))
    assert int(effective.split()[1], 16) == 0, effective
    bounding = next(line for line in caps.splitlines() if line.startswith("CapBnd:"))
    assert int(bounding.split()[1], 16) == 0, bounding
    write = on_node.exec(
        "python", "-c", "open('/opt/ichor/written', 'w')", check=False
    )  # the root filesystem is read-only
    assert write.returncode != 0
    assert "Read-only file system" in write.stderr
    # /tmp is the chart's emptyDir, writable
    on_node.exec("python", "-c", "open('/tmp/written', 'w').write('x')")


def test_the_api_server_calls_the_webhook_through_the_service(on_node: OnNode) -> None:
    configuration = json.loads(
        on_node.kubectl(
            "get", "validatingwebhookconfiguration", f"{RELEASE}-webhook", "-o", "json"
        ).stdout
    )
    for webhook in configuration["webhooks"]:
        assert "url" not in webhook["clientConfig"]
        assert webhook["clientConfig"]["service"]["namespace"] == on_node.namespace
    # a TalosCluster the webhook refuses (a Talos version that does not parse): only the
    # operator's webhook says this, so the API server reached it
    refused = on_node.kubectl(
        "apply", "-n", "default", "-f", "-", check=False,
        input=json.dumps(
            {
                "apiVersion": "ichor.dev/v1alpha1",
                "kind": "TalosCluster",
                "metadata": {"name": f"refused-{uuid.uuid4().hex[:6]}"},
                "spec": {"talosconfigSecretRef": {"name": "none"}, "talosVersion": "v1.999.0"},
            }
        ),
    )  # fmt: skip
    assert refused.returncode != 0
    assert "admission webhook" in refused.stderr, refused.stderr
    assert "taloscluster.ichor.dev" in refused.stderr, refused.stderr


def test_probes_pass_and_metrics_answer_at_the_pods_address(on_node: OnNode) -> None:
    pod = on_node.pod()
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    address = pod["status"]["podIP"]
    assert address.startswith("10.244.0.")
    namespace = on_node.cluster.namespace
    assert namespace is not None

    def scrape() -> str:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            f"http://{address}:8081/metrics", timeout=10
        ) as response:
            body: bytes = response.read()
            return body.decode()

    text = netns.in_thread(namespace.path, scrape)
    assert "ichor_" in text, text[:500]


def _tls(on_node: OnNode) -> tuple[str, str]:
    secret = json.loads(
        on_node.kubectl(
            "get", "secret", f"{RELEASE}-webhook-tls", "-n", on_node.namespace, "-o", "json"
        ).stdout
    )
    configuration = json.loads(
        on_node.kubectl(
            "get", "validatingwebhookconfiguration", f"{RELEASE}-webhook", "-o", "json"
        ).stdout
    )
    return secret["data"]["tls.crt"], configuration["webhooks"][0]["clientConfig"]["caBundle"]


def test_helm_upgrade_keeps_the_certificate_and_the_webhook_answers(on_node: OnNode) -> None:
    before = _tls(on_node)
    run_helm(
        on_node.cluster, "upgrade", RELEASE, str(helm.CHART), "-n", on_node.namespace,
        "-f", str(on_node.values_file), "--set", "logLevel=DEBUG",
    )  # fmt: skip
    wait_available(on_node.cluster, on_node.namespace)
    assert _tls(on_node) == before
    test_the_api_server_calls_the_webhook_through_the_service(on_node)
