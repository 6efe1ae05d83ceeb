"""The chart installed with the install page's mutual-TLS flags: the operator the chart
describes answers only the API server's client certificate, and a caller without it
changes nothing.

The package's install (conftest) uses the install page's ``helm upgrade ... clientAuth``
flags with the test control plane's webhook client CA, so every write the other chart tests
make already went through mutual TLS. Here a forged review is posted straight to the
operator's port, as someone who can reach it but is not the API server would.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from tests.component.chart import helm
from tests.component.chart.conftest import Installed
from tests.harness import certs, controlplane

pytestmark = pytest.mark.component


def _endpoint(installed: Installed, workdir: Path) -> tuple[str, Path]:
    url: str = yaml.safe_load(installed.values_file.read_text())["webhook"]["url"]
    secret = json.loads(
        installed.kubectl(
            "get", "secret", f"{helm.RELEASE}-webhook-tls", "-n", installed.namespace, "-o", "json"
        ).stdout
    )
    ca = workdir / "serving-ca.crt"
    ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
    return url, ca


def _forged(namespace: str) -> dict[str, Any]:
    """An UPDATE by a member of system:masters that would pass a refusal under the verb."""
    cluster = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {"name": "forged", "namespace": namespace, "uid": str(uuid.uuid4())},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.31.9",
            "versionContract": "v1.14",
        },
    }
    old = json.loads(json.dumps(cluster))
    old["spec"]["kubernetesVersion"] = "v1.31.4"
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
            "resource": {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"},
            "namespace": namespace,
            "name": "forged",
            "operation": "UPDATE",
            "userInfo": {"username": "mallory", "groups": ["system:masters"]},
            "object": cluster,
            "oldObject": old,
            "dryRun": False,
        },
    }


def _decisions(installed: Installed) -> dict[str, float]:
    with urllib.request.urlopen(installed.metrics_url, timeout=5) as response:
        text = response.read().decode()
    found = re.findall(r'^ichor_webhook_decisions_total\{result="(\w+)"\} (\S+)$', text, re.M)
    return {result: float(value) for result, value in found}


def _events(installed: Installed) -> list[dict[str, Any]]:
    listed = installed.kubectl(
        "get", "events", "-A", "-o", "json", "--field-selector=involvedObject.name=forged"
    )
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


async def _post(url: str, context: ssl.SSLContext, body: dict[str, Any]) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/taloscluster", json=body, ssl=context) as response,
    ):
        assert response.status == 200
        return await response.json()


def test_the_chart_turns_on_mutual_tls_with_the_install_pages_flags(installed: Installed) -> None:
    configmap = helm.one(installed.manifest, "ConfigMap", f"{helm.RELEASE}-webhook-client-ca")
    assert configmap["data"]["ca.crt"] == installed.plane.webhook_client_ca.read_text()
    stored = json.loads(
        installed.kubectl(
            "get", "configmap", configmap["metadata"]["name"], "-n", installed.namespace,
            "-o", "json",
        ).stdout
    )  # fmt: skip
    assert stored["data"] == configmap["data"]
    env = helm.env(installed.manifest)
    assert env["ICHOR_WEBHOOK_CLIENT_NAMES"] == controlplane.WEBHOOK_CLIENT
    assert "mutual TLS" in installed.log_text()


async def test_a_caller_without_the_api_servers_certificate_is_refused_and_changes_nothing(
    installed: Installed, tmp_path: Path
) -> None:
    url, serving_ca = _endpoint(installed, tmp_path)
    before = (_decisions(installed), _events(installed), installed.log_text().count("overrode"))

    # no client certificate; one the cluster's user CA signed (the admin's); one of a CA
    # of the caller's own making
    stranger = certs.Authority.create("stranger-ca").issue_client(user="kube-apiserver")
    stranger.write(cert_path=tmp_path / "stranger.crt", key_path=tmp_path / "stranger.key")
    callers = {
        "no certificate": ssl.create_default_context(cafile=str(serving_ca)),
        "the admin's certificate": ssl.create_default_context(cafile=str(serving_ca)),
        "a stranger's CA": ssl.create_default_context(cafile=str(serving_ca)),
    }
    plane = installed.plane
    callers["the admin's certificate"].load_cert_chain(
        plane.pki / "admin.crt", plane.pki / "admin.key"
    )
    callers["a stranger's CA"].load_cert_chain(tmp_path / "stranger.crt", tmp_path / "stranger.key")
    for who, context in callers.items():
        try:
            answer = await _post(url, context, _forged(installed.namespace))
        except (aiohttp.ClientError, ssl.SSLError, ConnectionError):
            continue
        pytest.fail(f"{who}: the operator read a review and answered {answer}")

    after = (_decisions(installed), _events(installed), installed.log_text().count("overrode"))
    assert after == before
    assert _events(installed) == []

    # the API server's certificate is answered (a harmless dry run), so it was the
    # certificate that made the difference, not a closed port
    api_server = plane.webhook_caller_context(serving_ca=serving_ca)
    harmless = _forged(installed.namespace)
    harmless["request"]["dryRun"] = True
    harmless["request"]["object"]["spec"]["kubernetesVersion"] = "v1.36.6"
    harmless["request"]["oldObject"]["spec"]["kubernetesVersion"] = "v1.36.6"
    answer = await _post(url, api_server, harmless)
    assert answer["response"] == {"uid": harmless["request"]["uid"], "allowed": True}
