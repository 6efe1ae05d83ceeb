"""The Go webhook of tests/gotools registered on the test API server, as the benchmark does.

It serves HTTPS on loopback with the certificate it is given and, like Ichor's webhook,
requires the API server's client certificate (mutual TLS, its common name checked). The
configuration here is limited to the test's namespace and removed afterwards, so no
other test meets it. What it decides is compared with Ichor in
tests/differential/test_gowebhook_matches_ichor.py; here: that the API server reaches
it and shows its refusals, and what it refuses to serve.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ichor.api import kinds
from tests.differential import admission_cases
from tests.harness import certs, controlplane
from tests.support import gotools, gowebhook, table

READY_TIMEOUT = 30.0


def _cluster(
    name: str, namespace: str, *, talos: str = "v1.14.3", kubernetes: str = "v1.36.6"
) -> str:
    body = admission_cases.cluster(
        talos=talos, kubernetes=kubernetes, name=name, namespace=namespace
    )
    body["metadata"] = {"name": name, "namespace": namespace}
    return json.dumps(body)


@pytest.fixture
def registered(
    control_plane: controlplane.ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> Iterator[gowebhook.GoWebhook]:
    """The Go webhook with mutual TLS, registered for ``namespace`` only."""
    plane = control_plane
    files = certs.write_serving_certificate(tmp_path / "tls")
    name = f"gowebhook-{uuid.uuid4().hex[:6]}"
    with gowebhook.running(
        files=files,
        workdir=tmp_path,
        client_ca=plane.webhook_client_ca,
        client_name=controlplane.WEBHOOK_CLIENT,
    ) as hook:
        config = gowebhook.configuration(hook, name=name, namespaces=[namespace])
        plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(config))
        try:
            # The API server picks a new configuration up within a moment: bounded wait.
            deadline = time.monotonic() + READY_TIMEOUT
            while "(rule UnknownVersion)" not in _create(
                plane, namespace, "probe", talos=table.unknown_talos(), dry_run=True
            ):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"the API server did not call the Go webhook in {READY_TIMEOUT:.0f} s: "
                        + (tmp_path / "gowebhook.log").read_text()
                    )
                time.sleep(0.2)
            yield hook
        finally:
            plane.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found")


def _create(
    plane: controlplane.ControlPlane,
    namespace: str,
    name: str,
    *,
    dry_run: bool = False,
    **versions: str,
) -> str:
    """kubectl create's stderr ("" when it was created)."""
    args = ["create", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    result = plane.kubectl(*args, input=_cluster(name, namespace, **versions), check=False)
    return result.stderr if result.returncode != 0 else ""


def test_the_api_server_shows_the_go_webhooks_refusals_and_passes_the_rest(
    control_plane: controlplane.ControlPlane, registered: gowebhook.GoWebhook, namespace: str
) -> None:
    plane = control_plane
    refused = _create(plane, namespace, "next", talos=table.unknown_talos())
    assert 'admission webhook "taloscluster.gowebhook.ichor.dev" denied the request' in refused
    assert f"TalosCluster {namespace}/next is refused (rule UnknownVersion)" in refused

    assert _create(plane, namespace, "prod") == ""
    plural = f"{kinds.PLURALS[kinds.Kind.TALOS_CLUSTER].value}.{kinds.GROUP}"
    patch = plane.kubectl(
        "patch", plural, "prod", "-n", namespace, "--type=merge",
        "-p", json.dumps({"spec": {"kubernetesVersion": "v1.30.0"}}), check=False,
    )  # fmt: skip
    assert patch.returncode != 0
    assert "(rule Downgrade)" in patch.stderr
    patch = plane.kubectl(
        "patch", plural, "prod", "-n", namespace, "--type=merge",
        "-p", json.dumps({"spec": {"talosVersion": table.unknown_talos(1)}}), check=False,
    )  # fmt: skip
    assert "(rule UnknownVersion)" in patch.stderr


def test_the_configuration_reaches_only_the_namespaces_it_names(
    control_plane: controlplane.ControlPlane, registered: gowebhook.GoWebhook, namespace: str
) -> None:
    plane = control_plane
    other = f"other-{uuid.uuid4().hex[:6]}"
    plane.kubectl("create", "namespace", other)
    try:
        assert _create(plane, other, "next", talos=table.unknown_talos(), dry_run=True) == ""
    finally:
        plane.kubectl("delete", "namespace", other, "--wait=false")


def _post(webhook: gowebhook.GoWebhook, *, client: Path | None) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=str(webhook.files.ca))
    if client is not None:
        context.load_cert_chain(client / "tls.crt", client / "tls.key")
    review = admission_cases.review(admission_cases.cluster())
    request = urllib.request.Request(
        webhook.url, data=json.dumps(review).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())["response"]
        return answer


def _client(authority: certs.Authority, user: str, directory: Path) -> Path:
    directory.mkdir(parents=True)
    authority.issue_client(user=user).write(
        cert_path=directory / "tls.crt", key_path=directory / "tls.key"
    )
    return directory


def test_with_a_client_ca_only_a_certificate_of_that_ca_and_name_is_served(tmp_path: Path) -> None:
    authority, stranger = certs.Authority.create("callers"), certs.Authority.create("strangers")
    (tmp_path / "callers.crt").write_bytes(authority.cert_pem)
    files = certs.write_serving_certificate(tmp_path / "tls")
    with gowebhook.running(
        files=files,
        workdir=tmp_path / "run",
        client_ca=tmp_path / "callers.crt",
        client_name="apiserver",
    ) as hook:
        assert (
            _post(hook, client=_client(authority, "apiserver", tmp_path / "right"))["allowed"]
            is True
        )
        for client in (
            None,
            _client(authority, "someone-else", tmp_path / "wrong-name"),
            _client(stranger, "apiserver", tmp_path / "wrong-ca"),
        ):
            with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
                _post(hook, client=client)
        # Still serving the right caller afterwards.
        assert _post(hook, client=tmp_path / "right")["allowed"] is True


@pytest.mark.parametrize(
    ("listen", "says"),
    [
        ("0.0.0.0:18443", "only a loopback IP address is served"),
        ("10.0.0.1:18443", "only a loopback IP address is served"),
        ("localhost:18443", "only a loopback IP address is served"),
        ("127.0.0.1:0", "the port must be a number from 1 to 65535"),
        ("127.0.0.1", "missing port"),
    ],
)
def test_it_serves_on_a_loopback_address_and_a_given_port_only(
    listen: str, says: str, tmp_path: Path
) -> None:
    files = certs.write_serving_certificate(tmp_path / "tls")
    done = subprocess.run(
        [str(gotools.find("gowebhook")), "-listen", listen, "-cert", str(files.cert),
         "-key", str(files.key), "-table", str(gowebhook.EXPORT)],
        capture_output=True, text=True, timeout=30, env=controlplane.loopback_env(),
    )  # fmt: skip
    assert done.returncode == 1
    assert says in done.stderr
