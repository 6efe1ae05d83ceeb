"""Through the real API server: a review the endpoint does not claim is refused, never
allowed, whatever a ValidatingWebhookConfiguration sends it.

kopf allows a review for which it finds no handler. A configuration that sends writes to
the wrong path (a TalosCluster write to ``/talosoperation``, a DELETE or a status write
to a path that does not judge them) must therefore get a refusal from the endpoint
itself, and nothing is stored.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.component.webhook import harness
from tests.component.webhook.conftest import Api
from tests.harness import controlplane

pytestmark = pytest.mark.component

PROPAGATION = 30.0


def _hook(name: str, url: str, resources: list[str], operations: list[str], ca: str) -> Any:
    return {
        "name": f"{name}.misrouted.ichor.dev",
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": [
            {
                "apiGroups": ["ichor.dev"],
                "apiVersions": ["*"],
                "operations": operations,
                "resources": resources,
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": 5,
        "admissionReviewVersions": ["v1"],
        # only this test's namespace: other tests' writes never meet it
        "namespaceSelector": {"matchLabels": {"ichor-test-misrouted": "yes"}},
    }


@pytest.fixture
def misrouted(
    control_plane: controlplane.ControlPlane, webhook: harness.Webhook, api: Api
) -> Iterator[str]:
    """A second configuration that sends writes to paths that do not judge them."""
    base = webhook.server.url
    ca = webhook.configuration()["webhooks"][0]["clientConfig"]["caBundle"]
    name = f"{webhook.name}-misrouted"
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            _hook("cluster-at-operation", f"{base}/talosoperation", ["talosclusters"],
                  ["CREATE"], ca),
            _hook("status-at-operation", f"{base}/talosoperation", ["talosclusters/status"],
                  ["UPDATE"], ca),
            _hook("delete-at-cluster", f"{base}/taloscluster", ["talosclusters"],
                  ["DELETE"], ca),
        ],
    }  # fmt: skip
    api.plane.kubectl("label", "namespace", api.namespace, "ichor-test-misrouted=yes")
    created = api.create(harness.cluster_manifest("kept", api.namespace), user=None)
    assert created.returncode == 0, created.stderr
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(configuration))
    try:
        yield name
    finally:
        control_plane.kubectl(
            "delete", "validatingwebhookconfiguration", name, "--ignore-not-found"
        )


def _until_refused(attempt: Any, words: str) -> str:
    """Retry ``attempt`` until the API server refuses it with ``words`` (the new
    configuration takes a moment to be used); fail with what it last said."""
    deadline = time.monotonic() + PROPAGATION
    while True:
        result = attempt()
        if result.returncode != 0 and words in result.stderr:
            return str(result.stderr)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not refused with {words!r} within {PROPAGATION} s: "
                f"rc={result.returncode} {result.stdout} {result.stderr}"
            )
        time.sleep(0.5)


def test_a_write_sent_to_a_path_that_does_not_judge_it_is_refused(api: Api, misrouted: str) -> None:
    index = iter(range(1_000))

    def create() -> Any:
        body = harness.cluster_manifest(f"fresh-{next(index)}", api.namespace)
        return api.create(body, user=None)

    said = _until_refused(create, "not talosclusters.ichor.dev")
    assert "/talosoperation judges talosoperations.ichor.dev" in said
    assert "nothing was changed" in said
    listed = api.plane.kubectl("get", "talosclusters", "-n", api.namespace, "-o", "json").stdout
    names = {item["metadata"]["name"] for item in json.loads(listed)["items"]}
    assert names == {"kept"}


def test_a_status_write_and_a_delete_no_path_claims_are_refused(api: Api, misrouted: str) -> None:
    before = api.cluster("kept")
    assert before is not None
    status = {"status": {"cni": {"detected": "flannel", "detectedVersion": "0.26.4"}}}

    def patch_status() -> Any:
        return api.plane.kubectl(
            "patch", "taloscluster", "kept", "-n", api.namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps(status), check=False,
        )  # fmt: skip

    def delete() -> Any:
        return api.plane.kubectl(
            "delete", "taloscluster", "kept", "-n", api.namespace, "--wait=false", check=False
        )

    said = _until_refused(patch_status, "not talosclusters.ichor.dev")
    assert "nothing was changed" in said
    said = _until_refused(delete, "not DELETE")
    assert "/taloscluster judges talosclusters.ichor.dev/v1alpha1 on CREATE and UPDATE" in said
    after = api.cluster("kept")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert (after.get("status") or {}).get("cni") != status["status"]["cni"]
