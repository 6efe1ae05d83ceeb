"""Credentials are data, and no confused deputy, on the real API server with
the webhook and the operator running as the chart's identity.

A tenant who may write Secrets stores a kubeconfig whose user runs a command (``exec``)
or sends a file of the operator's disk (``tokenFile``) to an address of its choosing: the
command never runs, nothing reaches the address, and the cluster's status names the
refused field; an operation on such a cluster creates no Job. A tenant who may read no
Secret names an admin's Secret in a TalosCluster: the webhook refuses the write, as that
user, naming the step.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from tests.component.operations.conftest import FAST_CLUSTERS, Operator
from tests.component.tenants import credentials_support as support
from tests.component.tenants.credentials_support import Listener, Tenancy
from tests.component.webhook import harness
from tests.harness import account, controlplane
from tests.support import credential_files as files
from tests.support.operator import eventually

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

SCHEMATIC = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"


@pytest.fixture(scope="module")
def webhook(
    control_plane: controlplane.ControlPlane,
    crds: None,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    with harness.running(
        control_plane, tmp_path_factory.mktemp("credentials-webhook"), operator_account,
        recorder=False,
    ) as running:  # fmt: skip
        yield running


@pytest.fixture(scope="module")
def tenants(control_plane: controlplane.ControlPlane, crds: None) -> Iterator[Tenancy]:
    yield from support.tenancy(control_plane)


@pytest_asyncio.fixture(loop_scope="session")
async def operator(crds: None, operator_kubeconfig: Path) -> AsyncIterator[Operator]:
    """The TalosCluster controller and the executor, as the chart's ServiceAccount."""
    running = await Operator().start()
    try:
        yield running
    finally:
        await running.stop()


def _condition(body: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for found in ((body or {}).get("status") or {}).get("conditions") or ():
        if found.get("type") == kind:
            return dict(found)
    return {}


async def _refused_kubeconfig(tenants: Tenancy, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        return tenants.get("taloscluster", name)

    body = await eventually(
        probe,
        lambda b: _condition(b, "Ready").get("reason") == "KubeconfigUnusable",
        what=f"TalosCluster {name} Ready=False KubeconfigUnusable",
    )
    return _condition(body, "Ready")


async def _failed(tenants: Tenancy, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        return tenants.get("talosoperation", name)

    body = await eventually(
        probe,
        lambda b: ((b or {}).get("status") or {}).get("phase") == "Failed",
        what=f"TalosOperation {name} Failed",
    )
    assert body is not None
    return body


def _exec_kubeconfig(plane: controlplane.ControlPlane, command: str) -> str:
    config = json.loads(json.dumps(files.kubeconfig(plane.server, ca=plane.ca_file.read_bytes())))
    config["users"][0]["user"] = files.exec_user(command)
    return files.text(config)


async def test_an_exec_kubeconfig_runs_nothing_in_the_operator_or_a_job(
    webhook: harness.Webhook,
    operator: Operator,
    tenants: Tenancy,
    control_plane: controlplane.ControlPlane,
    tmp_path: Path,
) -> None:
    """The attack: within 6 s the operator ran ``/bin/sh`` as its own child, and its
    stderr (the start of the operator's private key) came back in the Ready condition."""
    marker = tmp_path / "exec-ran"
    command = f"touch {marker}; echo {tenants.canary}-stderr >&2; exit 1"
    tenants.secret(
        "exec", "kubeconfig", _exec_kubeconfig(control_plane, command), user=tenants.tess
    )
    tenants.secret("talos", "talosconfig", files.text(files.talosconfig()), user=tenants.tess)
    created = tenants.create_cluster(
        "exec",
        user=tenants.tess,
        kubeconfigSecretRef={"name": "exec"},
        talosconfigSecretRef={"name": "talos"},
    )
    assert created.returncode == 0, created.stderr

    ready = await _refused_kubeconfig(tenants, "exec")
    assert ready["status"] == "False"
    assert (
        f"the kubeconfig in key 'kubeconfig' of Secret {tenants.tenant}/exec is refused: "
        "users[0].user.exec runs a command"
    ) in ready["message"]

    # the executor's two paths: a Talos operation reads the Nodes with the kubeconfig, a
    # Cilium operation mounts it into helm's Job
    for name, kind, version in (("up-talos", "talos", "v1.14.4"), ("up-cilium", "cni", None)):
        made = tenants.create_operation(name, "exec", kind, version, user=tenants.tess)
        assert made.returncode == 0, made.stderr
        failed = await _failed(tenants, name)
        assert _condition(failed, "Accepted")["reason"] == "CredentialsUnusable", failed
        assert "users[0].user.exec runs a command" in failed["status"]["message"]
    assert tenants.jobs() == []
    assert not marker.exists()
    assert tenants.canary not in tenants.everything_said()


async def test_a_token_file_sends_nothing_to_the_address_the_tenant_chose(
    webhook: harness.Webhook, operator: Operator, tenants: Tenancy, tmp_path: Path
) -> None:
    """The attack: the operator sent a file of its own disk as a bearer token to a
    server of the tenant's choosing."""
    listener = await Listener().start()
    try:
        token = tmp_path / "operator-token"
        token.write_text(f"{tenants.canary}-token")
        config = files.with_user(
            files.kubeconfig(f"https://127.0.0.1:{listener.port}", cert=False),
            tokenFile=str(token),
        )
        tenants.secret("token-file", "kubeconfig", files.text(config), user=tenants.tess)
        created = tenants.create_cluster(
            "token-file", user=tenants.tess, kubeconfigSecretRef={"name": "token-file"}
        )
        assert created.returncode == 0, created.stderr

        async def probe() -> dict[str, Any] | None:
            return tenants.get("taloscluster", "token-file")

        seen = await eventually(
            probe,
            lambda b: (
                listener.connections > 0
                or _condition(b, "Ready").get("reason") == "KubeconfigUnusable"
            ),
            what="a connection to the listener, or the refusal in the status",
        )
        assert listener.connections == 0, bytes(listener.received[:64])
        assert "users[0].user.tokenFile reads a file" in _condition(seen, "Ready")["message"]
        # several observations (each failure is tried again after the backoff)
        await asyncio.sleep(3 * FAST_CLUSTERS.backoff_max)
        assert listener.connections == 0
        assert bytes(listener.received) == b""
    finally:
        await listener.stop()
    assert tenants.canary not in tenants.everything_said()


async def test_a_talosconfig_with_a_path_is_refused_before_any_job(
    webhook: harness.Webhook,
    operator: Operator,
    tenants: Tenancy,
    control_plane: controlplane.ControlPlane,
) -> None:
    talosconfig = files.talosconfig()
    talosconfig["contexts"]["prod"]["ca"] = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    tenants.secret("path-talos", "talosconfig", files.text(talosconfig), user=tenants.tess)
    tenants.secret(
        "path-kube", "kubeconfig", support.admin_kubeconfig(control_plane), user=tenants.tess
    )
    created = tenants.create_cluster(
        "path",
        user=tenants.tess,
        kubeconfigSecretRef={"name": "path-kube"},
        talosconfigSecretRef={"name": "path-talos"},
    )
    assert created.returncode == 0, created.stderr
    made = tenants.create_operation("up-path", "path", "talos", "v1.14.4", user=tenants.tess)
    assert made.returncode == 0, made.stderr
    failed = await _failed(tenants, "up-path")
    assert _condition(failed, "Accepted")["reason"] == "CredentialsUnusable"
    message = failed["status"]["message"]
    assert (
        f"the talosconfig in key 'talosconfig' of Secret {tenants.tenant}/path-talos is "
        "refused: contexts.prod.ca is not base64"
    ) in message
    assert "no Job was created" in message
    assert "/var/run/secrets" not in message
    assert [j for j in tenants.jobs() if "up-path" in json.dumps(j["metadata"])] == []


async def test_a_secret_the_writer_may_not_read_is_refused_at_the_webhook(
    webhook: harness.Webhook, tenants: Tenancy, control_plane: controlplane.ControlPlane
) -> None:
    """The attack: a user who may read no Secret named an admin's kubeconfig Secret of
    its own namespace, and the operator used it for them."""
    tenants.secret("admin-kubeconfig", "kubeconfig", support.admin_kubeconfig(control_plane))
    namespace, mallory = tenants.tenant, tenants.mallory
    can_i = control_plane.kubectl(
        "auth", "can-i", "get", "secret/admin-kubeconfig", "-n", namespace,
        as_user=mallory, check=False,
    )  # fmt: skip
    assert can_i.stdout.strip() == "no"
    for field in ("kubeconfigSecretRef", "talosconfigSecretRef"):
        for dry_run in (True, False):
            refused = tenants.create_cluster(
                "deputy", user=mallory, dry_run=dry_run, **{field: {"name": "admin-kubeconfig"}}
            )
            assert refused.returncode != 0
            assert (
                f"TalosCluster {namespace}/deputy is refused: spec.{field} names Secret "
                f"{namespace}/admin-kubeconfig, which user '{mallory}' may not read"
            ) in refused.stderr, refused.stderr
            assert f"kubectl auth can-i get secret/admin-kubeconfig -n {namespace}" in (
                refused.stderr
            )
    assert tenants.get("taloscluster", "deputy") is None

    # a user who may read it is admitted, dry run or not
    for dry_run in (True, False):
        admitted = tenants.create_cluster(
            "deputy", user=tenants.tess, dry_run=dry_run,
            kubeconfigSecretRef={"name": "admin-kubeconfig"},
        )  # fmt: skip
        assert admitted.returncode == 0, admitted.stderr

    # mallory may still update it where the references stay as they are
    kept = tenants.patch_cluster("deputy", {"spec": {"schematic": SCHEMATIC}}, user=mallory)
    assert kept.returncode == 0, kept.stderr
    # but any change of a reference is judged again: another key, another field
    for patch in (
        {"spec": {"kubeconfigSecretRef": {"name": "admin-kubeconfig", "key": "other"}}},
        {"spec": {"talosconfigSecretRef": {"name": "admin-kubeconfig"}}},
    ):
        moved = tenants.patch_cluster("deputy", patch, user=mallory)
        assert moved.returncode != 0
        assert "which user" in moved.stderr, moved.stderr
    stored = tenants.get("taloscluster", "deputy")
    assert stored is not None
    assert stored["spec"]["kubeconfigSecretRef"] == {
        "name": "admin-kubeconfig",
        "key": "kubeconfig",
    }
    assert "talosconfigSecretRef" not in stored["spec"]
    assert stored["spec"]["schematic"] == SCHEMATIC


async def test_a_forged_review_is_judged_as_the_user_it_names(
    webhook: harness.Webhook, tenants: Tenancy, control_plane: controlplane.ControlPlane
) -> None:
    """The review's userInfo is the only identity the webhook knows (only the API server
    may call it): the SubjectAccessReview is asked for exactly that user."""
    tenants.secret("forged-target", "kubeconfig", support.admin_kubeconfig(control_plane))
    body = support.cluster("forged", tenants.tenant, kubeconfigSecretRef={"name": "forged-target"})
    context: ssl.SSLContext = control_plane.webhook_caller_context(serving_ca=webhook.files.ca)
    answers = {}
    for user in (tenants.tess, tenants.mallory):
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"forged-{user}",
                "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
                "resource": {
                    "group": "ichor.dev",
                    "version": "v1alpha1",
                    "resource": "talosclusters",
                },
                "namespace": tenants.tenant,
                "name": "forged",
                "operation": "CREATE",
                "userInfo": {"username": user, "groups": ["system:authenticated"]},
                "object": body,
                "dryRun": True,
            },
        }
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{webhook.server.url}/taloscluster", json=review, ssl=context) as reply,
        ):
            assert reply.status == 200
            answers[user] = (await reply.json())["response"]
    assert answers[tenants.tess]["allowed"] is True, answers[tenants.tess]
    assert answers[tenants.mallory]["allowed"] is False
    assert "which user" in answers[tenants.mallory]["status"]["message"]
