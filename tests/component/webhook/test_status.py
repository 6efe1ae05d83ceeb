"""Status belongs to the operator: a status write by anyone else is refused by the webhook.

Every rule reads ``status`` as what the operator observed (the CNI it detected and its
release) or decided (an operation's phase, the release lists). These tests try to write
it as users whose roles grant the status subresource (``patch`` on
``talosclusters/status``; ``resources: ["*"]`` in ``ichor.dev``), as a dry run, and then
try the exploit a forged status opens: hiding Cilium to start a Kubernetes minor it does
not run, with no override.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from ichor.api import kinds
from tests.component.webhook import harness
from tests.component.webhook.conftest import Api
from tests.harness import controlplane
from tests.support import rbac

pytestmark = pytest.mark.component

#: May patch the status subresource of clusters, and nothing else.
STATUS_WRITER = "sam"
#: ``resources: ["*"]`` and ``verbs: ["*"]`` in ichor.dev: every kind, subresource and verb.
WILDCARD = "ursula"
STATUS_ROLE = "ichor-webhook-test-status-writer"
WILDCARD_ROLE = "ichor-webhook-test-wildcard"
REFUSED = "only the operator"


@pytest.fixture(scope="module")
def writers(control_plane: controlplane.ControlPlane) -> Iterator[None]:
    manifest = yaml.safe_dump_all(
        [
            rbac.cluster_role(
                STATUS_ROLE,
                [
                    {
                        "apiGroups": [kinds.GROUP],
                        "resources": ["talosclusters", "talosclusters/status"],
                        "verbs": ["get", "list", "patch", "update"],
                    }
                ],
            ),
            rbac.cluster_role(
                WILDCARD_ROLE,
                [{"apiGroups": [kinds.GROUP], "resources": ["*"], "verbs": ["*"]}],
            ),
            rbac.binding(STATUS_ROLE, [STATUS_WRITER]),
            rbac.binding(WILDCARD_ROLE, [WILDCARD]),
        ]
    )
    control_plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


def _patch_status(
    api: Api,
    resource: str,
    name: str,
    status: Mapping[str, Any],
    *,
    user: str | None,
    dry_run: bool = False,
    namespaced: bool = True,
) -> subprocess.CompletedProcess[str]:
    args = ["patch", resource, name, "--subresource=status", "--type=merge"]
    args += ["-p", json.dumps({"status": status})]
    if namespaced:
        args += ["-n", api.namespace]
    if dry_run:
        args.append("--dry-run=server")
    return api.plane.kubectl(*args, as_user=user, check=False)


def _cluster_with_cilium(api: Api, name: str = "prod") -> None:
    created = api.create(harness.cluster_manifest(name, api.namespace), user=None)
    assert created.returncode == 0, created.stderr
    api.set_cilium(name, "1.20.4")  # as the operator observed it


def _cni(api: Api, name: str = "prod") -> dict[str, object]:
    cluster = api.cluster(name)
    assert cluster is not None
    cni: dict[str, object] = (cluster.get("status") or {}).get("cni") or {}
    return cni


@pytest.mark.parametrize("user", [STATUS_WRITER, WILDCARD])
@pytest.mark.parametrize("dry_run", [False, True], ids=["write", "dry-run"])
def test_a_user_granted_the_status_subresource_cannot_write_it(
    api: Api, writers: None, user: str, dry_run: bool
) -> None:
    _cluster_with_cilium(api)
    # RBAC lets the user through: the refusal is the webhook's, not the authorizer's.
    can = api.plane.kubectl(
        "auth", "can-i", "patch", "talosclusters.ichor.dev/prod", "--subresource=status",
        "-n", api.namespace, as_user=user, check=False,
    )  # fmt: skip
    assert can.stdout.strip() == "yes", can.stderr
    forged = {"cni": {"detected": "flannel", "detectedVersion": "0.26.1"}}
    result = _patch_status(api, "taloscluster", "prod", forged, user=user, dry_run=dry_run)
    assert result.returncode != 0, result.stdout
    assert "admission webhook" in result.stderr, result.stderr
    assert REFUSED in result.stderr, result.stderr
    assert f"user {user!r}" in result.stderr, result.stderr
    assert _cni(api) == {"detected": "cilium", "detectedVersion": "1.20.4"}


def test_the_status_of_operations_and_the_installation_is_the_operators_too(
    api: Api, writers: None
) -> None:
    _cluster_with_cilium(api)
    operation = {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_OPERATION.value,
        "metadata": {"name": "up", "namespace": api.namespace},
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"},
    }
    created = api.create(operation, user=None)
    assert created.returncode == 0, created.stderr
    done = {"phase": "Succeeded", "message": "Talos v1.14.4 is installed"}
    refused = _patch_status(api, "talosoperation", "up", done, user=WILDCARD)
    assert refused.returncode != 0
    assert REFUSED in refused.stderr, refused.stderr
    assert "TalosOperation" in refused.stderr, refused.stderr

    installation = {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.ICHOR_INSTALLATION.value,
        "metadata": {"name": kinds.INSTALLATION_NAME},
        "spec": {"releaseCheck": {"enabled": False}},
    }
    existing = api.plane.kubectl("get", "ichorinstallation", kinds.INSTALLATION_NAME, check=False)
    if existing.returncode != 0:
        api.plane.kubectl("create", "-f", "-", input=json.dumps(installation))
    try:
        targets = {"upgradeTargets": {"talos": ["v1.14.9"], "checkedAt": "2026-11-05T10:00:00Z"}}
        forged = _patch_status(
            api, "ichorinstallation", kinds.INSTALLATION_NAME, targets, user=WILDCARD,
            namespaced=False,
        )  # fmt: skip
        assert forged.returncode != 0
        assert REFUSED in forged.stderr, forged.stderr
        assert "IchorInstallation ichor" in forged.stderr, forged.stderr
    finally:
        if existing.returncode != 0:
            api.plane.kubectl("delete", "ichorinstallation", kinds.INSTALLATION_NAME, check=False)


def test_the_operators_own_account_writes_status_and_the_admin_does_not(
    api: Api, webhook: harness.Webhook
) -> None:
    """The webhook runs as the chart's ServiceAccount: that account writes status; the
    admin (system:masters, every RBAC verb) is refused like anyone else."""
    _cluster_with_cilium(api)
    moved = {"cni": {"detected": "cilium", "detectedVersion": "1.20.5"}}
    admin = _patch_status(api, "taloscluster", "prod", moved, user=None)
    assert admin.returncode != 0, admin.stdout
    assert REFUSED in admin.stderr, admin.stderr
    assert webhook.operator.username in admin.stderr
    assert _cni(api)["detectedVersion"] == "1.20.4"
    written = webhook.operator.patch_status(
        server=api.plane.server, ca_file=api.plane.ca_file, plural="talosclusters",
        name="prod", namespace=api.namespace, status=moved,
    )  # fmt: skip
    assert written["status"]["cni"]["detectedVersion"] == "1.20.5"
    assert _cni(api)["detectedVersion"] == "1.20.5"


def test_a_forged_status_does_not_open_a_kubernetes_minor_cilium_does_not_run(
    api: Api, writers: None
) -> None:
    """The probe's exploit: hide Cilium 1.20.4, then start Kubernetes v1.37.2 unoverridden."""
    _cluster_with_cilium(api)
    hidden = _patch_status(
        api, "taloscluster", "prod", {"cni": {"detected": "flannel"}}, user=WILDCARD
    )
    assert hidden.returncode != 0
    operation = {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_OPERATION.value,
        "metadata": {"name": f"k8s-{uuid.uuid4().hex[:5]}", "namespace": api.namespace},
        "spec": {"clusterRef": {"name": "prod"}, "type": "kubernetes", "version": "v1.37.2"},
    }
    started = api.create(operation, user=WILDCARD)
    assert started.returncode != 0, started.stdout
    assert "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36" in started.stderr, started.stderr


def test_a_role_with_every_verb_on_talosclusters_holds_override(api: Api, writers: None) -> None:
    """What docs/rules.md warns: ``verbs: ["*"]`` includes the custom verb."""
    answer = api.plane.kubectl(
        "auth", "can-i", "override", "talosclusters.ichor.dev/prod", "-n", api.namespace,
        as_user=WILDCARD, check=False,
    )  # fmt: skip
    assert answer.stdout.strip() == "yes", answer.stderr
