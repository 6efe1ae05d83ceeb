"""Reads on a tenant's behalf run as the tenant's account, on the real API server
with the operator as the chart's ServiceAccount (the chart's ClusterRole).

A TalosCluster without a kubeconfig Secret is read in the operator's own cluster. Before,
the operator read it with its own cluster-wide rights: an auto-patch health check over
another namespace's Pods answered one bit per look, and a password was recovered from a
Pod's environment. Each test here attacks or checks one part of what replaced that: every
read carries the TalosCluster's ServiceAccount (its spec's, the fleet's, the namespace's
default, or none when one is required), and a refusal names the account and the missing
permission in the operator's own words.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import pytest_asyncio
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.settings import TenantSettings
from tests.component.tenants.impersonation_support import (
    Operator,
    Tenants,
    Workload,
    condition,
)
from tests.harness import account, controlplane
from tests.support import credential_files
from tests.support.operator import eventually

#: A talosconfig with inline keys only, which the executor reads before any Job.
TALOSCONFIG = credential_files.text(credential_files.talosconfig())

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

REQUIRED = TenantSettings(require_service_account=True)
NOT_REQUIRED = TenantSettings(require_service_account=False)


@pytest_asyncio.fixture(loop_scope="session")
async def tenants(
    kube_api: ApiClient, control_plane: controlplane.ControlPlane, crds: None
) -> AsyncIterator[Tenants]:
    made = Tenants(kube_api, control_plane)
    workload = Workload(kube_api)
    await workload.create()
    try:
        yield made
    finally:
        await made.clean()
        await workload.clean()


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    tenants: Tenants, operator_kubeconfig: Any, request: pytest.FixtureRequest
) -> AsyncIterator[Operator]:
    """The operator in-process as the chart's account; ``@pytest.mark.parametrize(
    "operator", [TenantSettings(...)], indirect=True)`` sets its tenant settings (default:
    a named account is required, as the chart installs it)."""
    running = await Operator(getattr(request, "param", REQUIRED)).start()
    try:
        yield running
    finally:
        await running.stop()


async def _ready(tenants: Tenants, namespace: str, name: str, reason: str) -> dict[str, Any]:
    return await eventually(
        lambda: tenants.cluster(namespace, name),
        lambda b: condition(b, "Ready").get("reason") == reason,
        within=30.0,
        what=f"Ready {reason} on {namespace}/{name}",
    )


# --- the CEL oracle ---------------------------------------------------------------------


def _oracle(guess: str) -> str:
    """The attack docs/security.md describes: one bit per look, whether some Pod's
    PASSWORD starts with ``guess``, read from the evaluation error of the true branch.
    It indexes the first Pod instead of nesting macros, so it stays inside the CEL cost
    budget and the refusal it meets is the account's, not the budget's."""
    return (
        "objects.size() > 0 && objects[0].spec.containers[0].env[0].value"
        f'.startsWith("{guess}") ? (1 / 0 == 1) : false'
    )


async def test_the_cel_oracle_learns_nothing_from_a_cluster_without_a_kubeconfig(
    tenants: Tenants, operator: Operator, kube_api: ApiClient
) -> None:
    """Tenant A may read its cluster's Nodes (the chart's reader role) and no Pod of the
    vault namespace. Its health checks over the vault's Pods, one guessing right and one
    wrong, are refused for its account: AutoPatchReady says the same for both."""
    tenant = await tenants.namespace("tenant-a")
    vault = await tenants.namespace("vault")
    password = "h" + secrets.token_hex(8)
    pod = {
        "metadata": {"name": "keeper"},
        "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1",
                                 "env": [{"name": "PASSWORD", "value": password}]}]},
    }  # fmt: skip
    await client.CoreV1Api(kube_api).create_namespaced_pod(vault, pod)  # type: ignore[arg-type]
    await tenants.account(tenant, "reader")
    await tenants.bind_reader(tenant, "reader")
    await tenants.installation({"autoPatch": {"maxConcurrentClusters": 5}})
    guesses = {"right": password[:1], "wrong": "z"}
    for name, guess in guesses.items():
        check = {"name": "guess", "apiVersion": "v1", "resource": "pods", "namespace": vault,
                 "expression": _oracle(guess)}  # fmt: skip
        auto_patch = {"components": ["talos"], "minReleaseAge": "0m", "healthChecks": [check],
                      "windows": [{"schedule": "* * * * *", "duration": "2h"}]}  # fmt: skip
        await tenants.create_cluster(
            tenant, name, serviceAccountName="reader", autoPatch=auto_patch
        )
    said: dict[str, str] = {}
    for name, guess in guesses.items():
        body = await eventually(
            lambda name=name: tenants.cluster(tenant, name),  # type: ignore[misc]
            lambda b: condition(b, "AutoPatchReady").get("reason") == "HealthCheckFailed",
            within=40.0,
            what=f"the health check of {name} judged",
        )
        message = condition(body, "AutoPatchReady")["message"]
        assert password not in message
        said[name] = message.replace(_oracle(guess), "<the guess>")
    # the read itself was refused: no evaluation, so no bit
    assert "could not be listed (the API server answered 403)" in said["right"], said
    assert said["right"] == said["wrong"]
    events = [e["message"] for n in guesses for e in await tenants.events(tenant, n)]
    assert not [m for m in events if password in m or "division" in m]


# --- a self-managed cluster's account and its grant -------------------------------------


async def test_an_account_without_the_node_read_is_named_with_the_permission_it_lacks(
    tenants: Tenants, operator: Operator
) -> None:
    tenant = await tenants.namespace("tenant-a")
    await tenants.account(tenant, "reader")
    await tenants.create_cluster(tenant, "prod", serviceAccountName="reader")
    body = await _ready(tenants, tenant, "prod", "ServiceAccountUnusable")
    message = condition(body, "Ready")["message"]
    assert message == (
        f"ServiceAccount {tenant}/reader (named in spec.serviceAccountName) may not list nodes "
        "in the whole cluster, so this cluster is not read: bind the ClusterRole "
        "ichor-tenant-reader to it, or name another ServiceAccount in spec.serviceAccountName"
    )
    assert condition(body, "Ready")["status"] == "False"
    assert "talosVersion" not in body["status"]
    warned = await eventually(
        lambda: tenants.events(tenant, "prod"),
        lambda found: any(e["reason"] == "ServiceAccountUnusable" for e in found),
        what="the Warning Event",
    )
    assert {e["type"] for e in warned if e["reason"] == "ServiceAccountUnusable"} == {"Warning"}

    # half the grant: the next read it lacks is named
    await tenants.cluster_role(
        f"{tenant}-nodes",
        [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
        {"kind": "ServiceAccount", "name": "reader", "namespace": tenant},
    )
    body = await eventually(
        lambda: tenants.cluster(tenant, "prod"),
        lambda b: "list daemonsets.apps" in condition(b, "Ready").get("message", ""),
        what="the DaemonSet read named",
    )
    assert condition(body, "Ready")["reason"] == "ServiceAccountUnusable"

    # the shipped ClusterRole, bound by the platform admin: observed
    await tenants.bind_reader(tenant, "reader")
    body = await _ready(tenants, tenant, "prod", "Observed")
    assert body["status"]["talosVersion"] == "v1.14.3"
    assert body["status"]["kubernetesVersion"] == "v1.36.6"


async def test_an_account_that_does_not_exist_is_a_condition_not_a_crash(
    tenants: Tenants, operator: Operator
) -> None:
    tenant = await tenants.namespace("tenant-a")
    await tenants.account(tenant, "reader")
    await tenants.bind_reader(tenant, "reader")
    await tenants.create_cluster(tenant, "ghostly", serviceAccountName="ghost")
    await tenants.create_cluster(tenant, "fine", serviceAccountName="reader")
    body = await _ready(tenants, tenant, "ghostly", "ServiceAccountUnusable")
    assert condition(body, "Ready")["message"] == (
        f"ServiceAccount {tenant}/ghost (named in spec.serviceAccountName) does not exist, so "
        "this cluster is not read: create it, or name another ServiceAccount in "
        "spec.serviceAccountName"
    )
    await _ready(tenants, tenant, "fine", "Observed")  # the others are read meanwhile
    assert operator.kopf.alive
    await tenants.account(tenant, "ghost")
    await tenants.bind_reader(tenant, "ghost")
    await _ready(tenants, tenant, "ghostly", "Observed")


async def test_the_account_reads_with_the_groups_the_api_server_gives_it(
    tenants: Tenants, operator: Operator
) -> None:
    """The operator sends only Impersonate-User (it may impersonate no group): the API
    server adds the ServiceAccount's groups, so a grant to them holds."""
    tenant = await tenants.namespace("tenant-a")
    await tenants.account(tenant, "reader")
    await tenants.cluster_role(
        f"{tenant}-group",
        account.tenant_reader_rules(),
        {"kind": "Group", "name": f"system:serviceaccounts:{tenant}",
         "apiGroup": "rbac.authorization.k8s.io"},
    )  # fmt: skip
    await tenants.create_cluster(tenant, "prod", serviceAccountName="reader")
    await _ready(tenants, tenant, "prod", "Observed")


# --- which account: the setting, the fleet's default, the spec's -------------------------


async def test_with_an_account_required_and_none_named_nothing_is_read(
    tenants: Tenants, operator: Operator, operator_account: account.Account
) -> None:
    """The operator itself may list Nodes and DaemonSets here, and so may the namespace's
    default account: neither reads, since no account is named."""
    tenant = await tenants.namespace("tenant-a")
    await tenants.cluster_role(
        f"{tenant}-operator-reads",
        account.tenant_reader_rules(),
        {"kind": "User", "name": operator_account.username,
         "apiGroup": "rbac.authorization.k8s.io"},
    )  # fmt: skip
    await tenants.bind_reader(tenant, "default")
    await tenants.create_cluster(tenant, "prod")
    body = await _ready(tenants, tenant, "prod", "ServiceAccountUnusable")
    message = condition(body, "Ready")["message"]
    assert "ICHOR_REQUIRE_SERVICE_ACCOUNT" in message
    assert "set spec.serviceAccountName" in message
    await asyncio.sleep(3)  # three more looks: still nothing read
    body = await tenants.cluster(tenant, "prod")
    assert "talosVersion" not in body["status"]
    assert condition(body, "Ready")["reason"] == "ServiceAccountUnusable"
    # named, the same account reads
    await tenants.patch_cluster(tenant, "prod", {"serviceAccountName": "default"})
    await _ready(tenants, tenant, "prod", "Observed")


@pytest.mark.parametrize("operator", [NOT_REQUIRED], indirect=True)
async def test_without_the_setting_the_namespace_default_reads_never_the_operator(
    tenants: Tenants, operator: Operator, operator_account: account.Account
) -> None:
    tenant = await tenants.namespace("tenant-a")
    await tenants.cluster_role(
        f"{tenant}-operator-reads",
        account.tenant_reader_rules(),
        {"kind": "User", "name": operator_account.username,
         "apiGroup": "rbac.authorization.k8s.io"},
    )  # fmt: skip
    await tenants.create_cluster(tenant, "prod")
    body = await _ready(tenants, tenant, "prod", "ServiceAccountUnusable")
    assert condition(body, "Ready")["message"].startswith(
        f"ServiceAccount {tenant}/default (the namespace's default, as neither the spec nor "
        "the IchorInstallation names one) does not exist"
    )
    await tenants.account(tenant, "default")
    await tenants.bind_reader(tenant, "default")
    await _ready(tenants, tenant, "prod", "Observed")


async def test_the_fleet_default_reads_when_the_spec_names_none_and_the_spec_wins(
    tenants: Tenants, operator: Operator
) -> None:
    tenant = await tenants.namespace("tenant-b")
    await tenants.account(tenant, "fleet-reader")
    await tenants.bind_reader(tenant, "fleet-reader")
    await tenants.account(tenant, "unbound")
    await tenants.installation({"defaultServiceAccountName": "fleet-reader"})
    await tenants.create_cluster(tenant, "fleets")
    await tenants.create_cluster(tenant, "own", serviceAccountName="unbound")
    await _ready(tenants, tenant, "fleets", "Observed")
    body = await _ready(tenants, tenant, "own", "ServiceAccountUnusable")
    assert condition(body, "Ready")["message"].startswith(
        f"ServiceAccount {tenant}/unbound (named in spec.serviceAccountName) may not list nodes"
    )
    # the fleet's default goes: the cluster that used it is not read any more
    await tenants.installation({"defaultServiceAccountName": None})
    body = await _ready(tenants, tenant, "fleets", "ServiceAccountUnusable")
    assert "ICHOR_REQUIRE_SERVICE_ACCOUNT" in condition(body, "Ready")["message"]


async def test_an_account_of_another_namespace_cannot_be_named(
    tenants: Tenants, kube_api: ApiClient
) -> None:
    """No field names a namespace, and the name is a DNS-1123 subdomain: the API server's
    schema refuses anything that would point elsewhere."""
    tenant = await tenants.namespace("tenant-a")
    custom = client.CustomObjectsApi(kube_api)
    for name in ("system:serviceaccount:kube-system:admin", "kube-system/admin",
                 "kube-system:admin", "../admin", "Admin", "a" * 254):  # fmt: skip
        with pytest.raises(ApiException) as refused:
            await tenants.create_cluster(tenant, "elsewhere", serviceAccountName=name)
        assert refused.value.status == 422, name
        assert "spec.serviceAccountName" in str(refused.value.body)
        with pytest.raises(ApiException) as refused:
            await custom.create_cluster_custom_object(
                kinds.GROUP, kinds.VERSION, kinds.Plural.ICHOR_INSTALLATIONS,
                {"apiVersion": kinds.API_VERSION, "kind": kinds.Kind.ICHOR_INSTALLATION,
                 "metadata": {"name": kinds.INSTALLATION_NAME},
                 "spec": {"defaultServiceAccountName": name}},
            )  # fmt: skip
        assert refused.value.status == 422, name
        assert "spec.defaultServiceAccountName" in str(refused.value.body)
    await tenants.create_cluster(tenant, "here", serviceAccountName="ichor.reader-1")


# --- the executor's Node list -------------------------------------------------------------


async def test_an_operations_node_list_is_read_as_the_clusters_account(
    tenants: Tenants, operator: Operator, kube_api: ApiClient
) -> None:
    """A Talos operation lists the Nodes to upgrade; refused for the account, it waits
    saying so (no Job), and runs once the account may read them."""
    tenant = await tenants.namespace("tenant-a")
    await tenants.account(tenant, "reader")
    core = client.CoreV1Api(kube_api)
    secret = {"metadata": {"name": "prod-talosconfig"},
              "stringData": {"talosconfig": TALOSCONFIG}}  # fmt: skip
    await core.create_namespaced_secret(tenant, secret)  # type: ignore[arg-type]
    await tenants.create_cluster(
        tenant, "prod", serviceAccountName="reader",
        talosconfigSecretRef={"name": "prod-talosconfig"},
    )  # fmt: skip
    operation = {
        "apiVersion": kinds.API_VERSION, "kind": kinds.Kind.TALOS_OPERATION,
        "metadata": {"name": "to-v1-14-5"},
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.5"},
    }  # fmt: skip
    await tenants.custom.create_namespaced_custom_object(
        kinds.GROUP, kinds.VERSION, tenant, kinds.Plural.TALOS_OPERATIONS, operation
    )

    async def read() -> dict[str, Any]:
        found: dict[str, Any] = cast(
            dict[str, Any],
            await tenants.custom.get_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, tenant, kinds.Plural.TALOS_OPERATIONS, "to-v1-14-5"
            ),
        )
        return found

    body = await eventually(
        read,
        lambda b: "may not list nodes" in (b.get("status") or {}).get("message", ""),
        within=30.0,
        what="the operation waiting on its account's Node read",
    )
    assert body["status"]["phase"] == "Pending"
    assert f"ServiceAccount {tenant}/reader" in body["status"]["message"]
    assert (await client.BatchV1Api(kube_api).list_namespaced_job(tenant)).items == []
    await tenants.bind_reader(tenant, "reader")
    await eventually(
        read,
        lambda b: (b.get("status") or {}).get("phase") == "Running",
        within=30.0,
        what="the operation running once the account may read the Nodes",
    )
    # node by node, a Running operation is between its Jobs at times (a read or check Job
    # is deleted once read): wait for the next one
    jobs = await eventually(
        lambda: client.BatchV1Api(kube_api).list_namespaced_job(tenant),
        lambda found: bool(found.items),
        within=30.0,
        what="a Job of the operation",
    )
    assert all(
        str(j.metadata and j.metadata.name).startswith("ichor-talos-to-v1-14-5-")
        for j in jobs.items
    )


async def test_an_operation_is_refused_when_its_cluster_names_no_account_and_one_is_required(
    tenants: Tenants, operator: Operator, kube_api: ApiClient, operator_account: account.Account
) -> None:
    """The executor chooses the account as the controller does: none named, nothing is
    read, not even with the operator's own rights, and the operation says which field."""
    tenant = await tenants.namespace("tenant-a")
    await tenants.cluster_role(
        f"{tenant}-operator-reads",
        account.tenant_reader_rules(),
        {"kind": "User", "name": operator_account.username,
         "apiGroup": "rbac.authorization.k8s.io"},
    )  # fmt: skip
    secret = {"metadata": {"name": "prod-talosconfig"},
              "stringData": {"talosconfig": TALOSCONFIG}}  # fmt: skip
    await client.CoreV1Api(kube_api).create_namespaced_secret(tenant, secret)  # type: ignore[arg-type]
    await tenants.create_cluster(tenant, "prod", talosconfigSecretRef={"name": "prod-talosconfig"})
    operation = {
        "apiVersion": kinds.API_VERSION, "kind": kinds.Kind.TALOS_OPERATION,
        "metadata": {"name": "to-v1-14-5"},
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.5"},
    }  # fmt: skip
    await tenants.custom.create_namespaced_custom_object(
        kinds.GROUP, kinds.VERSION, tenant, kinds.Plural.TALOS_OPERATIONS, operation
    )
    body: Any = await eventually(
        lambda: tenants.custom.get_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, tenant, kinds.Plural.TALOS_OPERATIONS, "to-v1-14-5"
        ),
        lambda b: (b.get("status") or {}).get("phase") == "Failed",
        within=30.0,
        what="the operation refused",
    )
    message = body["status"]["message"]
    assert "spec.serviceAccountName" in message
    assert "ICHOR_REQUIRE_SERVICE_ACCOUNT" in message
    assert (await client.BatchV1Api(kube_api).list_namespaced_job(tenant)).items == []
