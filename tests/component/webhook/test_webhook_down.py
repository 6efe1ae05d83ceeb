"""With the webhook down, the API server refuses writes to our kinds (failurePolicy Fail)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.component.webhook import harness
from tests.component.webhook.conftest import Api
from tests.harness import account, controlplane

pytestmark = pytest.mark.component


@pytest.fixture
def stopped(
    control_plane: controlplane.ControlPlane,
    api: Api,
    tmp_path: Path,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    """A second webhook configuration whose server was started, answered, then stopped."""
    created = api.create(harness.cluster_manifest("prod", api.namespace), user=None)
    assert created.returncode == 0, created.stderr
    second = harness.Webhook(control_plane, tmp_path, operator_account)
    try:
        second.start()
        second.stop_server()
        yield second
    finally:
        second.close()


def test_writes_are_refused_and_nothing_stored_changes_while_the_webhook_is_down(
    api: Api, stopped: harness.Webhook
) -> None:
    before = api.cluster("prod")
    assert before is not None

    update = api.patch_spec("prod", {"kubernetesVersion": "v1.36.7"}, user=None)
    create = api.create(harness.cluster_manifest("second", api.namespace), user=None)
    operation = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"name": "up"},
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"},
    }
    plan = api.create(operation, user=None)

    for result in (update, create, plan):
        assert result.returncode != 0
        assert "failed calling webhook" in result.stderr
        assert f"127.0.0.1:{stopped.port}/" in result.stderr  # the stopped one refused it
    after = api.cluster("prod")
    assert after is not None
    assert after["spec"] == before["spec"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert api.cluster("second") is None
    missing = api.plane.kubectl(
        "get", "talosoperation", "up", "-n", api.namespace, "-o", "json", check=False
    )
    assert "NotFound" in missing.stderr, json.dumps(missing.stdout)


def test_deleting_a_cluster_still_works_while_the_webhook_is_down(
    api: Api, stopped: harness.Webhook
) -> None:
    """DELETE is not matched: clean-up must not need the operator."""
    result = api.plane.kubectl("delete", "taloscluster", "prod", "-n", api.namespace)
    assert result.returncode == 0
