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
            "from kubernetes_asyncio import client\n"
            "async def f(api):\n"
            "    await client.CoreV1Api(api).delete_namespaced_config_map('a', 'b')\n",
            apicalls.Permission("", "configmaps", "delete"),
        ),
        (
            "from kubernetes_asyncio import client\nfrom ichor.api import kinds\n"
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
