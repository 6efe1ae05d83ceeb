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

import base64
import json
import socket
import ssl
import tempfile
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.component.chart import helm
from tests.harness import certs, controlplane, netns, node
from tests.node.conftest import RELEASE, OnNode, run_helm, wait_available

#: The node tier's session fixtures (node start, image build) are charged to the first
#: test that asks for them.
pytestmark = pytest.mark.timeout(1200)


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
    # a TalosCluster the CRD's schema accepts and only the operator's webhook refuses
    # (Talos 1.14 does not run Kubernetes 1.31), asked by a user who may create
    # TalosClusters but not override: the refusal is in the webhook's own words
    space = f"webhook-{uuid.uuid4().hex[:6]}"
    on_node.kubectl("create", "namespace", space)
    on_node.kubectl(
        "create", "role", "create-clusters", "-n", space,
        "--verb=create,get", "--resource=talosclusters.ichor.dev",
    )  # fmt: skip
    on_node.kubectl(
        "create", "rolebinding", "nadia", "-n", space, "--role=create-clusters", "--user=nadia"
    )
    refused = on_node.kubectl(
        "create", "-n", space, "-f", "-", "--as", "nadia", check=False,
        input=json.dumps(
            {
                "apiVersion": "ichor.dev/v1alpha1",
                "kind": "TalosCluster",
                "metadata": {"name": "refused"},
                "spec": {
                    "talosVersion": "v1.14.3",
                    "kubernetesVersion": "v1.31.9",
                    "versionContract": "v1.14",
                },
            }
        ),
    )  # fmt: skip
    assert refused.returncode != 0
    assert 'admission webhook "taloscluster.ichor.dev" denied' in refused.stderr, refused.stderr
    assert "Talos 1.14 runs Kubernetes 1.33 to 1.37" in refused.stderr, refused.stderr
    assert on_node.kubectl("get", "taloscluster", "refused", "-n", space, check=False).returncode
    on_node.kubectl("delete", "namespace", space, "--wait=false")


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


def _released(on_node: OnNode, kinds: str, *extra: str) -> list[str]:
    listed = json.loads(
        on_node.kubectl(
            "get", kinds, *extra, "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "json"
        ).stdout
    )["items"]  # fmt: skip
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in listed)


def test_helm_uninstall_leaves_the_crds_and_what_they_hold(on_node: OnNode) -> None:
    """As the README says: everything the chart rendered goes, the CRDs and the objects
    of their kinds stay. The release is installed again afterwards for the later tests."""
    kept = f"kept-{uuid.uuid4().hex[:6]}"
    on_node.kubectl("create", "namespace", kept)
    on_node.kubectl(
        "apply", "-n", kept, "-f", "-",
        input=json.dumps(
            {
                "apiVersion": "ichor.dev/v1alpha1",
                "kind": "TalosCluster",
                "metadata": {"name": "kept"},
                "spec": {
                    "talosVersion": "v1.13.9",
                    "kubernetesVersion": "v1.35.5",
                    "versionContract": "v1.13",
                },
            }
        ),
    )  # fmt: skip
    namespaced = "deployments,services,secrets,serviceaccounts,configmaps,networkpolicies"
    cluster_wide = "clusterroles,clusterrolebindings,validatingwebhookconfigurations"
    assert _released(on_node, namespaced, "-n", on_node.namespace), "nothing to remove"
    assert _released(on_node, cluster_wide)

    run_helm(on_node.cluster, "uninstall", RELEASE, "-n", on_node.namespace, "--wait")
    try:
        assert _released(on_node, namespaced, "-n", on_node.namespace) == []
        assert _released(on_node, cluster_wide) == []
        gone = on_node.kubectl("get", "ichorinstallation", "ichor", check=False)
        assert gone.returncode != 0
        assert "NotFound" in gone.stderr
        for crd in ("talosclusters", "talosoperations", "ichorinstallations"):
            on_node.kubectl("get", "crd", f"{crd}.ichor.dev")
        on_node.kubectl("get", "taloscluster", "kept", "-n", kept)
        on_node.kubectl("get", "namespace", on_node.namespace)
    finally:
        on_node.kubectl("delete", "namespace", kept, "--wait=false", check=False)
        run_helm(
            on_node.cluster, "install", RELEASE, str(helm.CHART), "-n", on_node.namespace,
            "-f", str(on_node.values_file),
        )  # fmt: skip
        wait_available(on_node.cluster, on_node.namespace)


REQUEST = b"POST /taloscluster HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


def test_the_webhook_refuses_a_caller_without_the_api_servers_certificate(
    on_node: OnNode,
) -> None:
    """The chart's mutual TLS holds at the Pod's address: a caller that trusts the
    webhook's CA but presents no client certificate, or one another CA signed, is
    refused in the handshake."""
    pod = on_node.pod()
    address = pod["status"]["podIP"]
    secret = json.loads(
        on_node.kubectl(
            "get", "secret", f"{RELEASE}-webhook-tls", "-n", on_node.namespace, "-o", "json"
        ).stdout
    )
    ca = base64.b64decode(secret["data"]["ca.crt"])
    namespace = on_node.cluster.namespace
    assert namespace is not None
    stranger = certs.Authority.create("stranger").issue_client(user=controlplane.WEBHOOK_CLIENT)
    scratch = Path(tempfile.mkdtemp(prefix="ichor-webhook-caller-"))
    (scratch / "ca.crt").write_bytes(ca)
    stranger.write(cert_path=scratch / "c.crt", key_path=scratch / "c.key")

    def call(with_client: tuple[Path, Path] | None) -> str:
        context = ssl.create_default_context(cafile=str(scratch / "ca.crt"))
        context.check_hostname = False
        if with_client is not None:
            context.load_cert_chain(*with_client)
        try:
            with (
                socket.create_connection((address, 9443), timeout=10) as raw,
                context.wrap_socket(raw) as tls,
            ):
                tls.sendall(
                    b"POST /taloscluster HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
                )
                return tls.recv(200).decode(errors="replace") or "closed"
        except (ssl.SSLError, ConnectionError) as error:
            return f"refused: {error}"

    def both() -> tuple[str, str, str]:
        api = on_node.cluster
        return (
            call(None),
            call((scratch / "c.crt", scratch / "c.key")),
            call((api.webhook_client_cert, api.webhook_client_key)),
        )

    no_certificate, other_ca, api_server = netns.in_thread(namespace.path, both)
    assert no_certificate.startswith("refused") or no_certificate == "closed", no_certificate
    assert other_ca.startswith("refused") or other_ca == "closed", other_ca
    assert api_server.startswith("HTTP/1.1"), api_server
