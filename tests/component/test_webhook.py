"""The API server calls a kopf validating webhook on loopback over TLS.

kopf runs in-process (``kopf.operator`` in a thread) with its ``WebhookServer`` on a
certificate made here, and manages the ValidatingWebhookConfiguration itself, as the
operator will. ``kubectl create --dry-run=server`` must show the webhook's denial and
its warnings, and the webhook must see the impersonated user.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest

from tests.component import throwaway
from tests.harness import certs, controlplane
from tests.support import operator as support

pytestmark = pytest.mark.component

GROUP = "webhook.ichor-test.dev"
CONFIGURATION = f"{throwaway.PLURAL}.{GROUP}"
HUGE_REFUSAL = "huge widgets are refused by the test webhook"
LARGE_WARNING = "large widgets are slow to start"
INTERN = "intern"
INTERN_REFUSAL = "interns may only create small widgets"
_READY_TIMEOUT = 60.0


def _registry(plane: controlplane.ControlPlane) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(
            server=plane.server,
            ca_path=str(plane.ca_file),
            certificate_path=str(plane.pki / "admin.crt"),
            private_key_path=str(plane.pki / "admin.key"),
        )

    @kopf.on.validate(
        GROUP,
        throwaway.VERSION,
        throwaway.PLURAL,
        id="size",
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    def check_size(spec: kopf.Spec, userinfo: kopf.UserInfo, warnings: list[str], **_: Any) -> None:
        size = spec.get("size")
        if size == "huge":
            raise kopf.AdmissionError(HUGE_REFUSAL)
        if userinfo.get("username") == INTERN and size != "small":
            raise kopf.AdmissionError(INTERN_REFUSAL)
        if size == "large":
            warnings.append(LARGE_WARNING)

    return registry


def _denies_huge(plane: controlplane.ControlPlane) -> bool:
    body = throwaway.widget(group=GROUP, name="probe", namespace="default", spec={"size": "huge"})
    result = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False
    )
    return HUGE_REFUSAL in result.stderr


@pytest.fixture(scope="module")
def webhook(
    control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """kopf serving the widget webhook; yields the managed configuration's name."""
    throwaway.install(control_plane, GROUP)
    pki: Path = tmp_path_factory.mktemp("webhook")
    authority = certs.Authority.create("ichor-test-webhook-ca")
    authority.issue_server(hosts=["127.0.0.1"]).write(
        cert_path=pki / "tls.crt", key_path=pki / "tls.key"
    )
    settings = kopf.OperatorSettings()
    settings.admission.server = kopf.WebhookServer(
        addr="127.0.0.1",
        port=controlplane.free_port(),
        host="127.0.0.1",
        certfile=str(pki / "tls.crt"),
        pkeyfile=str(pki / "tls.key"),
        cadata=authority.cert_pem,
    )
    settings.admission.managed = CONFIGURATION
    registry = _registry(control_plane)
    running = support.KopfThread(registry, settings=settings, name="kopf-webhook")
    running.start()
    try:
        deadline = time.monotonic() + _READY_TIMEOUT
        # Ready means kopf is up; the API server learns the configuration a moment later.
        while not (running.ready_flag.is_set() and _denies_huge(control_plane)):
            if not running.alive:
                pytest.fail(f"kopf stopped while starting: {running.errors!r}")
            if time.monotonic() > deadline:
                pytest.fail(f"the API server did not call the webhook within {_READY_TIMEOUT} s")
            time.sleep(0.2)
        yield CONFIGURATION
    finally:
        running.stop()


def test_kopf_manages_the_webhook_configuration_with_its_ca(
    control_plane: controlplane.ControlPlane, webhook: str
) -> None:
    configuration = json.loads(
        control_plane.kubectl("get", "validatingwebhookconfiguration", webhook, "-o", "json").stdout
    )
    (hook,) = configuration["webhooks"]
    assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:")
    assert hook["clientConfig"]["caBundle"]
    assert hook["sideEffects"] == "None"
    assert hook["failurePolicy"] == "Fail"


@pytest.mark.parametrize(
    ("size", "allowed", "message"),
    [
        pytest.param("small", True, None, id="allowed"),
        pytest.param("large", True, f"Warning: {LARGE_WARNING}", id="allowed-with-warning"),
        pytest.param("huge", False, f"denied the request: {HUGE_REFUSAL}", id="denied"),
    ],
)
def test_server_side_dry_run_shows_the_webhook_answer(
    control_plane: controlplane.ControlPlane,
    webhook: str,
    namespace: str,
    size: str,
    allowed: bool,
    message: str | None,
) -> None:
    body = throwaway.widget(group=GROUP, name="w", namespace=namespace, spec={"size": size})
    result = control_plane.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(body), check=False
    )
    assert (result.returncode == 0) is allowed, result.stderr
    if allowed:
        assert "created (server dry run)" in result.stdout
    if message is None:
        assert "Warning" not in result.stderr
    else:
        assert message in result.stderr
    # A dry run persists nothing, allowed or not.
    missing = control_plane.kubectl("get", f"widgets.{GROUP}", "w", "-n", namespace, check=False)
    assert "NotFound" in missing.stderr


@pytest.mark.parametrize(("size", "allowed"), [("small", True), ("large", False)])
def test_webhook_sees_the_impersonated_user(
    control_plane: controlplane.ControlPlane, webhook: str, namespace: str, size: str, allowed: bool
) -> None:
    control_plane.kubectl(
        "create", "role", "widget-maker", "-n", namespace, "--verb=create",
        f"--resource=widgets.{GROUP}",
    )  # fmt: skip
    control_plane.kubectl(
        "create", "rolebinding", "widget-maker", "-n", namespace, "--role=widget-maker",
        f"--user={INTERN}",
    )  # fmt: skip
    body = throwaway.widget(group=GROUP, name="w", namespace=namespace, spec={"size": size})
    result = control_plane.kubectl(
        "create", "-f", "-", input=json.dumps(body), as_user=INTERN, check=False
    )
    assert (result.returncode == 0) is allowed, result.stderr
    if not allowed:
        assert INTERN_REFUSAL in result.stderr
