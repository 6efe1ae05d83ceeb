"""The chart's CRDs are the repository's, and the permission scanner finds what it must."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.unit.chart import apicalls

CRDS = apicalls.ROOT / "crds"
CHART_CRDS = apicalls.ROOT / "charts" / "ichor" / "crds"


def test_chart_crds_are_the_repository_crds_byte_for_byte() -> None:
    ours = {p.name: p.read_bytes() for p in CRDS.glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in CHART_CRDS.glob("*.yaml")}
    assert sorted(chart) == sorted(ours), "run: cp crds/*.yaml charts/ichor/crds/"
    differ = [name for name in ours if ours[name] != chart[name]]
    assert not differ, (
        f"charts/ichor/crds differ from crds/ in {differ}: cp crds/*.yaml charts/ichor/crds/"
    )


@pytest.fixture(scope="module")
def found() -> set[apicalls.Permission]:
    return apicalls.permissions()


@pytest.mark.parametrize(
    "expected",
    [
        apicalls.Permission("authorization.k8s.io", "subjectaccessreviews", "create"),
        apicalls.Permission("authentication.k8s.io", "selfsubjectreviews", "create"),
        apicalls.Permission("ichor.dev", "talosclusters/status", "patch"),
        apicalls.Permission("ichor.dev", "ichorinstallations", "watch"),
        apicalls.Permission("batch", "jobs", "watch"),
        apicalls.Permission("", "events", "create"),
        apicalls.Permission("apps", "daemonsets", "list"),
    ],
    ids=str,
)
def test_scanner_finds_the_calls_the_operator_makes(
    found: set[apicalls.Permission], expected: apicalls.Permission
) -> None:
    assert expected in found


def _tree(tmp_path: Path, source: str) -> Path:
    package = tmp_path / "ichor" / "controller"
    package.mkdir(parents=True)
    (package / "thing.py").write_text(textwrap.dedent(source))
    for other in ("ichor/webhook", "ichor/kube"):
        (tmp_path / other).mkdir(parents=True)
    (tmp_path / "ichor" / "operator.py").write_text("")
    return tmp_path


@pytest.mark.parametrize(
    ("source", "found"),
    [
        (
            "from kubernetes.aio import client\n"
            "async def f(api):\n"
            "    await client.CoreV1Api(api).delete_namespaced_config_map('a', 'b')\n",
            apicalls.Permission("", "configmaps", "delete"),
        ),
        (
            "from kubernetes.aio import client\nfrom ichor.api import kinds\n"
            "async def f(api):\n"
            "    await client.CustomObjectsApi(api).replace_namespaced_custom_object("
            "kinds.GROUP, kinds.VERSION, 'ns', kinds.Plural.TALOS_OPERATIONS, 'n', {})\n",
            apicalls.Permission("ichor.dev", "talosoperations", "update"),
        ),
    ],
    ids=["core-delete", "custom-replace"],
)
def test_a_new_call_is_a_new_permission(
    tmp_path: Path, source: str, found: apicalls.Permission
) -> None:
    assert apicalls.permissions(_tree(tmp_path, source)) == {found}


def test_a_call_it_cannot_place_is_an_error(tmp_path: Path) -> None:
    source = "async def f(api):\n    await api.create_namespaced_event('ns', {})\n"
    with pytest.raises(apicalls.ScanError, match="create_namespaced_event belongs to"):
        apicalls.permissions(_tree(tmp_path, source))


def test_a_call_marked_as_a_workload_read_is_not_the_operators(tmp_path: Path) -> None:
    """A call on a workload's client (a kubeconfig's, or a tenant's account) is asked of
    that identity: it is no permission of the operator's own ClusterRole."""
    source = (
        "from kubernetes.aio import client\n"
        "async def f(api, workload):\n"
        "    await client.CoreV1Api(workload).list_node()  # workload read\n"
        "    await client.CoreV1Api(api).list_namespaced_pod('ns')\n"
    )
    found = apicalls.scan(_tree(tmp_path, source))
    assert found.workload == {apicalls.Permission("", "nodes", "list")}
    assert found.operator == {apicalls.Permission("", "pods", "list")}
    assert (
        apicalls.permissions(_tree(tmp_path / "again", source)) == found.workload | found.operator
    )


def test_the_impersonation_header_is_impersonate_on_serviceaccounts(tmp_path: Path) -> None:
    source = "HEADER = 'Impersonate-User'\n"
    assert apicalls.operator_permissions(_tree(tmp_path, source)) == {
        apicalls.Permission("", "serviceaccounts", "impersonate")
    }


def test_the_operators_own_reads_of_a_tenants_cluster_are_workload_reads() -> None:
    """The Node list, the DaemonSets and Cilium's Helm release are read as the tenant's
    account (or a kubeconfig's): none is the operator's, which impersonates instead."""
    found = apicalls.scan()
    reads = {
        apicalls.Permission("", "nodes", "list"),
        apicalls.Permission("apps", "daemonsets", "list"),
        apicalls.Permission("", "secrets", "list"),
    }
    assert found.workload == reads
    assert not reads & found.operator
    assert apicalls.Permission("", "serviceaccounts", "impersonate") in found.operator


WRAPPER = (
    "import kopf\nfrom ichor.api import kinds\n"
    "def watch(registry, plural, handler, *, id):\n"
    "    kopf.on.event(kinds.GROUP, kinds.VERSION, plural, id=id, registry=registry)(handler)\n"
)


def test_a_wrapper_of_kopfs_watch_is_followed_to_the_kinds_its_callers_name(
    tmp_path: Path,
) -> None:
    source = WRAPPER + (
        "def register(registry):\n"
        "    def record(plural, id_):\n"
        "        watch(registry, plural, print, id=id_)\n"
        "    record(kinds.Plural.TALOS_OPERATIONS, 'a')\n"
        "    watch(registry, kinds.Plural.ICHOR_INSTALLATIONS, print, id='b')\n"
    )
    assert apicalls.permissions(_tree(tmp_path, source)) == {
        apicalls.Permission("ichor.dev", plural, verb)
        for plural in ("talosoperations", "ichorinstallations")
        for verb in ("list", "watch")
    }


def test_a_wrapped_watch_of_a_kind_it_cannot_read_is_an_error(tmp_path: Path) -> None:
    """A loop over kinds would grant nothing the scanner sees: it refuses, never guesses."""
    source = WRAPPER + (
        "def register(registry, kinds_):\n"
        "    for plural in kinds_:\n"
        "        watch(registry, plural, print, id='a')\n"
    )
    with pytest.raises(apicalls.ScanError, match="watch watches a kind the scanner cannot read"):
        apicalls.permissions(_tree(tmp_path, source))
