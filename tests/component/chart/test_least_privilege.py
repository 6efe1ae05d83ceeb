"""The operator's ClusterRole grants exactly what its code calls: no verb missing, none spare.

The needed permissions are read from the code (tests/unit/chart/apicalls.py); the granted
ones from the rendered chart. With more than one replica kopf's peering adds its own,
which are kopf's and not in our code, so they are listed here. A call marked as a
workload read is asked of the workload's identity, never of this role: of a tenant's
account, which the chart's ``ichor-tenant-reader`` ClusterRole is for.
"""

from __future__ import annotations

import pytest

from tests.component.chart import helm
from tests.unit.chart import apicalls
from tests.unit.chart.apicalls import Permission

pytestmark = pytest.mark.component

#: kopf's own calls, whatever the handlers: it follows the CRDs while it runs (the install
#: test saw it refused without this).
KOPF = {
    Permission("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("list", "watch")
}
PEERING = {Permission("kopf.dev", "clusterkopfpeerings", v) for v in ("list", "watch", "patch")}


def _granted(replicas: int) -> set[Permission]:
    objects = helm.template({"replicas": replicas})
    role = helm.one(objects, "ClusterRole", helm.RELEASE)
    return apicalls.granted(role["rules"])


@pytest.mark.parametrize(("replicas", "kopf"), [(1, set()), (2, PEERING)], ids=["one", "peering"])
def test_role_grants_exactly_what_the_code_calls(replicas: int, kopf: set[Permission]) -> None:
    needed = apicalls.operator_permissions() | KOPF | kopf
    granted = _granted(replicas)
    missing = sorted(str(p) for p in needed - granted)
    spare = sorted(str(p) for p in granted - needed)
    assert not missing, f"the chart's ClusterRole lacks {missing}"
    assert not spare, f"the chart's ClusterRole grants {spare}, which no code calls"


def test_role_binding_names_the_operators_service_account() -> None:
    objects = helm.template()
    binding = helm.one(objects, "ClusterRoleBinding")
    account = helm.one(objects, "ServiceAccount")
    assert binding["roleRef"]["name"] == helm.RELEASE
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": helm.NAMESPACE}
    ]


def test_the_operator_reads_no_node_daemonset_or_secret_list_as_itself() -> None:
    """The reads it made for a cluster without a kubeconfig, with its own cluster-wide
    rights, until they ran as the tenant's account: gone from its role."""
    granted = _granted(1)
    for gone in (
        Permission("", "nodes", "list"),
        Permission("apps", "daemonsets", "list"),
        Permission("", "secrets", "list"),
        Permission("", "groups", "impersonate"),
        Permission("", "users", "impersonate"),
    ):
        assert gone not in granted, gone
    assert Permission("", "serviceaccounts", "impersonate") in granted


def test_the_tenant_reader_role_grants_the_workload_reads_of_a_tenants_cluster() -> None:
    """``ichor-tenant-reader`` holds what an account reads for a cluster without a
    kubeconfig, but Cilium's Helm release Secrets (a grant in Cilium's namespace, which a
    tenant's account should rarely hold: refused, the version is unknown; docs/install.md),
    and nothing else; the chart binds it to nobody."""
    objects = helm.template()
    reader = helm.one(objects, "ClusterRole", "ichor-tenant-reader")
    helm_releases = Permission("", "secrets", "list")
    assert apicalls.granted(reader["rules"]) == apicalls.scan().workload - {helm_releases}
    bindings = [o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert all(b["roleRef"]["name"] != "ichor-tenant-reader" for b in bindings)
    off = helm.template({"tenants": {"readerRole": {"create": False}}})
    assert not [o for o in off if o["metadata"]["name"] == "ichor-tenant-reader"]
