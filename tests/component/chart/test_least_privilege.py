"""The operator's ClusterRole grants exactly what its code calls: no verb missing, none spare.

The needed permissions are read from the code (tests/unit/chart/apicalls.py); the granted
ones from the rendered chart. With more than one replica kopf's peering adds its own,
which are kopf's and not in our code, so they are listed here.
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
    needed = apicalls.permissions() | KOPF | kopf
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
