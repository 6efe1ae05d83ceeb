"""The operator's marks are the operator's, on the real API server with the webhook in the
path: a tenant who may patch TalosOperations cannot add, change or remove
``ichor.dev/auto-patch-halted`` or ``ichor.dev/started-by``, nor the owner references of
an operation the operator started, nor forge an operator start; neither can someone
impersonating the operator's name without its groups. The operator's own writes pass."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ichor.api import kinds
from ichor.api.autopatch import HALTED_ANNOTATION, RESUME_ANNOTATION
from ichor.api.talosoperation import ATTEMPT_ANNOTATION, STARTED_BY_LABEL
from tests.component.operations.test_through_webhook import webhook  # noqa: F401
from tests.component.tenants import fleet_halt_support as support
from tests.component.webhook import harness
from tests.harness import account, controlplane

pytestmark = pytest.mark.component

TENANT = "tenant-nadia"
OPERATION = "auto-patch-prod-talos-v1-14-5-0123abcd"


@pytest.fixture
def tenant(
    control_plane: controlplane.ControlPlane,
    namespace: str,
    webhook: harness.Webhook,  # noqa: F811
    operator_account: account.Account,
) -> Iterator[str]:
    """A namespace with a TalosCluster and an operation the operator started in it (made
    as the operator's identity: its label, its annotations, its owner), and a tenant who
    may write TalosClusters and TalosOperations there."""
    cluster = harness.cluster_manifest("prod", namespace)
    made = control_plane.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(cluster))
    uid = json.loads(made.stdout)["metadata"]["uid"]
    started = {
        "apiVersion": kinds.API_VERSION, "kind": "TalosOperation",
        "metadata": {
            "name": OPERATION, "namespace": namespace,
            "labels": {STARTED_BY_LABEL: "auto-patch"},
            "annotations": {ATTEMPT_ANNOTATION: "1"},
            "ownerReferences": [{"apiVersion": kinds.API_VERSION, "kind": "TalosCluster",
                                 "name": "prod", "uid": uid}],
        },
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.5",
                 "override": False},
    }  # fmt: skip
    control_plane.kubectl(
        *operator_account.kubectl_as(), "create", "-f", "-", input=json.dumps(started)
    )
    with support.granted(control_plane, support.tenant_role("ichor-test-marks", namespace, TENANT)):
        yield namespace


def stored(plane: controlplane.ControlPlane, namespace: str) -> dict[str, Any]:
    got = plane.kubectl("get", "talosoperation", OPERATION, "-n", namespace, "-o", "json")
    found: dict[str, Any] = json.loads(got.stdout)
    return found


def refused(result: Any, *needles: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "denied the request" in result.stderr, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_a_tenant_cannot_touch_the_operators_marks_or_owners(
    control_plane: controlplane.ControlPlane, tenant: str, operator_account: account.Account
) -> None:
    plane, ns = control_plane, tenant
    on_op = ["talosoperation", OPERATION, "-n", ns]
    # the halt mark: added (it would say the halt is recorded: the fleet is never held)
    refused(
        plane.kubectl("annotate", *on_op, f"{HALTED_ANNOTATION}=2026-06-01T06:00:00Z",
                      as_user=TENANT, check=False),
        HALTED_ANNOTATION, f"user {TENANT!r}", "added, changed or removed only by the operator",
    )  # fmt: skip
    # the operator writes it (its own bookkeeping), and the tenant cannot change or drop it
    plane.kubectl(*operator_account.kubectl_as(), "annotate", *on_op,
                  f"{HALTED_ANNOTATION}=2026-06-01T06:00:00Z")  # fmt: skip
    refused(
        plane.kubectl("annotate", "--overwrite", *on_op, f"{HALTED_ANNOTATION}=2099-01-01",
                      as_user=TENANT, check=False),
        HALTED_ANNOTATION,
    )  # fmt: skip
    refused(plane.kubectl("annotate", *on_op, f"{HALTED_ANNOTATION}-", as_user=TENANT,
                          check=False), HALTED_ANNOTATION)  # fmt: skip
    # the started-by label: removed (the failure would no longer count as auto-patch's)
    refused(plane.kubectl("label", *on_op, f"{STARTED_BY_LABEL}-", as_user=TENANT, check=False),
            STARTED_BY_LABEL)  # fmt: skip
    # the owner references: the cluster's ownership is what makes it the cluster's run
    refused(
        plane.kubectl("patch", *on_op, "--type=merge", "-p",
                      json.dumps({"metadata": {"ownerReferences": None}}), as_user=TENANT,
                      check=False),
        "owner references",
    )  # fmt: skip
    after = stored(plane, ns)
    assert after["metadata"]["labels"][STARTED_BY_LABEL] == "auto-patch"
    assert after["metadata"]["annotations"][HALTED_ANNOTATION] == "2026-06-01T06:00:00Z"
    assert after["metadata"]["ownerReferences"][0]["kind"] == "TalosCluster"
    # what is the tenant's stays theirs: a note of their own on the operation
    plane.kubectl("annotate", *on_op, "example.com/note=looked at it", as_user=TENANT)


def test_a_forged_operator_start_is_refused(
    control_plane: controlplane.ControlPlane, tenant: str
) -> None:
    forged = {
        "apiVersion": kinds.API_VERSION, "kind": "TalosOperation",
        "metadata": {"name": "forged", "namespace": tenant,
                     "labels": {STARTED_BY_LABEL: "auto-patch"}},
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"},
    }  # fmt: skip
    made = control_plane.kubectl("create", "-f", "-", input=json.dumps(forged), as_user=TENANT,
                                 check=False)  # fmt: skip
    refused(made, STARTED_BY_LABEL, "is set only by the operator")
    # a halt mark on a fresh operation is a forgery too
    forged["metadata"] = {"name": "forged", "namespace": tenant,
                          "annotations": {HALTED_ANNOTATION: "2099-01-01"}}  # fmt: skip
    refused(control_plane.kubectl("create", "-f", "-", input=json.dumps(forged), as_user=TENANT,
                                  check=False), HALTED_ANNOTATION)  # fmt: skip


def test_the_operators_name_without_its_groups_is_not_the_operator(
    control_plane: controlplane.ControlPlane, tenant: str, operator_account: account.Account
) -> None:
    """The admin impersonates the operator's username with other groups: the webhook
    judges the whole identity, so the write is a person's and refused."""
    result = control_plane.kubectl(
        "annotate", "talosoperation", OPERATION, "-n", tenant, f"{HALTED_ANNOTATION}=x",
        as_user=operator_account.username, as_groups=["system:authenticated"], check=False,
    )  # fmt: skip
    refused(result, HALTED_ANNOTATION, f"user {operator_account.username!r}")
    status = control_plane.kubectl(
        "patch", "talosoperation", OPERATION, "-n", tenant, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"phase": "Failed"}}),
        as_user=operator_account.username, as_groups=["system:authenticated"], check=False,
    )  # fmt: skip
    assert status.returncode != 0
    assert "status" in status.stderr


def test_a_cluster_takes_the_persons_keys_and_none_of_the_operators(
    control_plane: controlplane.ControlPlane, tenant: str
) -> None:
    on_cluster = ["taloscluster", "prod", "-n", tenant]
    control_plane.kubectl("annotate", *on_cluster, f"{RESUME_ANNOTATION}=x", as_user=TENANT)
    refused(
        control_plane.kubectl("annotate", *on_cluster, f"{HALTED_ANNOTATION}=x", as_user=TENANT,
                              check=False),
        HALTED_ANNOTATION,
    )  # fmt: skip
    refused(
        control_plane.kubectl("label", *on_cluster, "ichor.dev/tenant=a", as_user=TENANT,
                              check=False),
        "ichor.dev/tenant", "reserved",
    )  # fmt: skip


def test_the_installations_webhook_sees_only_writes_of_its_reserved_keys(
    control_plane: controlplane.ControlPlane,
    webhook: harness.Webhook,  # noqa: F811
    tmp_path: Path,
    operator_account: account.Account,
) -> None:
    """With a second configuration whose server is down, the chart's own update of the
    installation (its labels, as every chart upgrade moves them) still passes: the match
    condition sends the API server's review only for a write that carries an ichor.dev
    key, so an upgrade from an Ichor whose pods lack this path never meets it. A write of
    a reserved key waits for the webhook, and is refused while it is down."""
    found = control_plane.kubectl("get", "ichorinstallation", kinds.INSTALLATION_NAME,
                                  check=False)  # fmt: skip
    if found.returncode != 0:
        body = {"apiVersion": kinds.API_VERSION, "kind": "IchorInstallation",
                "metadata": {"name": kinds.INSTALLATION_NAME},
                "spec": {"releaseCheck": {"enabled": False}}}  # fmt: skip
        control_plane.kubectl("create", "-f", "-", input=json.dumps(body))
    down = harness.Webhook(control_plane, tmp_path, operator_account)
    try:
        down.start()
        down.stop_server()
        on = ["ichorinstallation", kinds.INSTALLATION_NAME]
        chart = control_plane.kubectl("label", "--overwrite", *on, "helm.sh/chart=ichor-9.9.9")
        assert chart.returncode == 0
        asked = control_plane.kubectl("annotate", *on, "ichor.dev/unhalt=all", check=False)
        assert asked.returncode != 0
        assert "failed calling webhook" in asked.stderr
        assert f"127.0.0.1:{down.port}/" in asked.stderr
    finally:
        down.close()
        control_plane.kubectl("label", "ichorinstallation", kinds.INSTALLATION_NAME,
                              "helm.sh/chart-", check=False)  # fmt: skip
