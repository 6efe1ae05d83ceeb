"""The chart's CRD upgrade hook: what it renders, the account it runs as, and
``python -m ichor.crds`` against the real API server as that account.

The hook Job itself needs a kubelet, which this tier has none of: the node tier runs it
through a real ``helm upgrade`` (tests/node/test_upgrade_on_node.py). Here the program the
Job runs is run as the Job's ServiceAccount (a client certificate naming it) bound to the
ClusterRole the chart renders, so every call it makes is judged by that role.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from ichor import crds as crds_module
from ichor.api import kinds
from tests.component.chart import helm
from tests.harness import controlplane
from tests.support import operator as operator_support

pytestmark = pytest.mark.component

ROOT = Path(__file__).resolve().parents[3]
CRD_FILES = sorted((ROOT / "crds").glob("*.yaml"))
NAMES = sorted(kinds.crd_name(kind) for kind in kinds.Kind)
INSTALLATIONS = "ichorinstallations.ichor.dev"
#: The status field this chart's CRD added (docs/upgrading.md tells its story).
NEW_FIELD = "talosFailingSince"


@functools.cache
def _rendered(values: str = "{}") -> tuple[list[helm.Object], list[helm.Object]]:
    """The release's objects and its hooks, rendered once per values (helm is slow)."""
    everything = helm.rendered(json.loads(values))
    return (
        [o for o in everything if not helm.is_hook(o)],
        [o for o in everything if helm.is_hook(o)],
    )


def _hooks(values: dict[str, Any] | None = None) -> dict[str, helm.Object]:
    return {item["kind"]: item for item in _rendered(json.dumps(values or {}))[1]}


def _kept() -> list[helm.Object]:
    return _rendered()[0]


def test_the_hook_renders_by_default_and_runs_before_install_and_upgrade() -> None:
    hooks = _hooks()
    assert set(hooks) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Job"}
    weights = {}
    for kind, item in hooks.items():
        notes = item["metadata"]["annotations"]
        assert notes["helm.sh/hook"] == "pre-install,pre-upgrade", kind
        assert notes["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
        weights[kind] = int(notes["helm.sh/hook-weight"])
    # the account, its role and the files exist before the Job starts
    assert max(w for k, w in weights.items() if k != "Job") < weights["Job"]
    assert _hooks({"crds": {"upgrade": {"enabled": False}}}) == {}


def test_the_hook_account_may_get_and_patch_ichors_crds_and_nothing_else() -> None:
    role = _hooks()["ClusterRole"]
    assert role["rules"] == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": NAMES,
            "verbs": ["get", "patch"],
        }
    ]
    # and no role the release keeps (the operator's above all) may change a CRD: the
    # operator only lists and watches them (kopf finds the kinds it serves that way)
    roles = helm.find(_kept(), "ClusterRole")
    assert helm.one(roles, "ClusterRole", helm.RELEASE)
    for kept in roles:
        for rule in kept["rules"]:
            if "customresourcedefinitions" in rule.get("resources", []):
                assert set(rule["verbs"]) <= {"list", "watch"}, rule


def test_the_program_calls_only_what_the_role_grants() -> None:
    tree = ast.parse(Path(crds_module.__file__).read_text())
    called = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.endswith("custom_resource_definition")
    }
    assert called == {"read_custom_resource_definition", "patch_custom_resource_definition"}


def test_the_job_carries_the_charts_crds_and_runs_as_the_hook_account() -> None:
    hooks = _hooks()
    data = hooks["ConfigMap"]["data"]
    assert sorted(data) == [p.name for p in CRD_FILES]
    for path in CRD_FILES:
        assert data[path.name] == path.read_text(), f"{path.name} differs from crds/"
    job = hooks["Job"]
    pod = job["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert pod["spec"]["serviceAccountName"] == hooks["ServiceAccount"]["metadata"]["name"]
    deployment = helm.one(_kept(), "Deployment")
    assert container["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert container["args"][:4] == ["python", "-m", "ichor.crds", "--chart-version"]
    chart = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())
    assert container["args"][4] == chart["version"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # the operator's Service, PodDisruptionBudget and NetworkPolicies never select it
    selector = deployment["spec"]["selector"]["matchLabels"]
    labels = pod["metadata"]["labels"]
    assert not all(labels.get(k) == v for k, v in selector.items())


# --- the program against the API server ---------------------------------------------------


@pytest.fixture
def hook_account(
    control_plane: controlplane.ControlPlane, crds: None, tmp_path: Path
) -> Iterator[Path]:
    """A kubeconfig of the hook's ServiceAccount, bound to the ClusterRole the chart renders."""
    role = _hooks()["ClusterRole"]
    name = f"ichor-crds-test-{uuid.uuid4().hex[:6]}"
    role["metadata"] = {"name": name}
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(role))
    user = f"system:serviceaccount:ichor-system:{name}"
    control_plane.kubectl(
        "create", "clusterrolebinding", name, f"--clusterrole={name}", f"--user={user}"
    )
    try:
        yield control_plane.user_kubeconfig(user, groups=["system:serviceaccounts"])
    finally:
        control_plane.kubectl("delete", "clusterrolebinding", name, "--ignore-not-found")
        control_plane.kubectl("delete", "clusterrole", name, "--ignore-not-found")


def run_program(
    kubeconfig: Path, directory: Path, version: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ichor.crds", "--chart-version", version, str(directory)],
        env=controlplane.loopback_env({"KUBECONFIG": str(kubeconfig)}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _crd(plane: controlplane.ControlPlane, name: str) -> dict[str, Any]:
    crd: dict[str, Any] = json.loads(plane.kubectl("get", "crd", name, "-o", "json").stdout)
    return crd


def _status_fields(crd: dict[str, Any]) -> set[str]:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    targets = schema["properties"]["status"]["properties"]["upgradeTargets"]["properties"]
    return set(targets)


def _old_crds(tmp_path: Path) -> Path:
    """This chart's CRDs without the fields this change added: an earlier chart's."""
    old = tmp_path / "old"
    old.mkdir()
    for path in CRD_FILES:
        body = yaml.safe_load(path.read_text())
        if body["metadata"]["name"] == INSTALLATIONS:
            schema = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            targets = schema["properties"]["status"]["properties"]["upgradeTargets"]
            for field in list(targets["properties"]):
                if field.endswith(("ListedAt", "FailingSince")):
                    del targets["properties"][field]
        (old / path.name).write_text(yaml.safe_dump(body))
    return old


def _installed_namespace(plane: controlplane.ControlPlane) -> str | None:
    """The namespace of a chart this package installed earlier in the session (the
    ``installed`` fixture lives as long as the package), whose webhook refuses a status
    written by anyone but its operator; None while no such webhook is registered."""
    found = json.loads(plane.kubectl("get", "validatingwebhookconfigurations", "-o", "json").stdout)
    for item in found["items"]:
        annotations = item["metadata"].get("annotations") or {}
        names = {w["name"] for w in item.get("webhooks") or ()}
        if "ichorinstallation-status.ichor.dev" in names:
            namespace = annotations.get("meta.helm.sh/release-namespace")
            assert namespace, f"{item['metadata']['name']}: which release's webhook?"
            return str(namespace)
    return None


def _patch_status(plane: controlplane.ControlPlane, name: str, status: dict[str, Any]) -> None:
    """A status write through the status subresource, as its operator writes it when a
    chart's webhook is registered (the chart's role grants only ``patch`` on it, so not
    through ``kubectl patch``, which reads it first), else as the admin."""
    namespace = _installed_namespace(plane)
    if namespace is None:
        plane.kubectl(
            "patch", "ichorinstallation", name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}),
        )  # fmt: skip
        return
    kubeconfig = plane.user_kubeconfig(
        f"system:serviceaccount:{namespace}:{helm.RELEASE}",
        groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
    )
    made = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    with made as api:
        kubernetes.client.CustomObjectsApi(api).patch_cluster_custom_object_status(
            kinds.GROUP, kinds.VERSION, "ichorinstallations", name, {"status": status}
        )


def _write_status(plane: controlplane.ControlPlane, name: str) -> dict[str, Any]:
    """An IchorInstallation whose status carries the new field, as the operator writes it
    (through the status subresource); returns what the API server kept."""
    plane.kubectl(
        "apply", "-f", "-",
        input=json.dumps(
            {
                "apiVersion": kinds.API_VERSION,
                "kind": "IchorInstallation",
                "metadata": {"name": name},
                "spec": {"releaseCheck": {"enabled": False}},
            }
        ),
    )  # fmt: skip
    status = {
        "upgradeTargets": {"checkedAt": "2026-12-01T08:00:00Z", NEW_FIELD: "2026-12-01T08:00:00Z"}
    }
    _patch_status(plane, name, status)
    kept: dict[str, Any] = json.loads(
        plane.kubectl("get", "ichorinstallation", name, "-o", "json").stdout
    )
    return kept.get("status") or {}


def test_the_program_moves_an_older_crd_forward_and_the_new_field_survives(
    control_plane: controlplane.ControlPlane, hook_account: Path, tmp_path: Path
) -> None:
    """What an upgrade without the hook did: with the earlier CRD the API server drops the
    new status field without a word; the hook applies this chart's CRD and the same write
    keeps it."""
    plane = control_plane
    old = _old_crds(tmp_path)
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(old))
    plane.kubectl("wait", "--for=condition=Established", f"crd/{INSTALLATIONS}")
    name = "ichor"  # the CRD admits only the singleton's name
    try:
        assert NEW_FIELD not in _status_fields(_crd(plane, INSTALLATIONS))
        before = _write_status(plane, name)
        assert NEW_FIELD not in before.get("upgradeTargets", {}), "pruned by the older schema"
        result = run_program(hook_account, ROOT / "crds", "0.2.0")
        assert result.returncode == 0, result.stderr
        for applied in NAMES:
            assert f"{applied}: applied from chart 0.2.0" in result.stdout
        crd = _crd(plane, INSTALLATIONS)
        assert NEW_FIELD in _status_fields(crd)
        assert crd["metadata"]["annotations"][crds_module.CHART_VERSION] == "0.2.0"
        after = _write_status(plane, name)
        assert after["upgradeTargets"][NEW_FIELD] == "2026-12-01T08:00:00Z"
    finally:
        plane.kubectl("delete", "ichorinstallation", name, "--ignore-not-found")
        operator_support.apply_crds(plane)


def test_a_crd_a_newer_chart_applied_is_kept(
    control_plane: controlplane.ControlPlane, hook_account: Path, tmp_path: Path
) -> None:
    """A downgrade (or a rollback's pre-upgrade) must not prune what a newer chart's
    schema holds: the program keeps a CRD a newer chart applied, and says so."""
    plane = control_plane
    assert run_program(hook_account, ROOT / "crds", "0.9.0").returncode == 0
    try:
        result = run_program(hook_account, _old_crds(tmp_path), "0.1.0")
        assert result.returncode == 0, result.stderr
        assert f"{INSTALLATIONS}: kept, chart 0.9.0 applied it, newer than 0.1.0" in result.stdout
        assert NEW_FIELD in _status_fields(_crd(plane, INSTALLATIONS))
    finally:
        operator_support.apply_crds(plane)


def test_the_hook_account_can_neither_create_nor_touch_another_crd(
    control_plane: controlplane.ControlPlane, hook_account: Path
) -> None:
    plane = control_plane
    for verb, what in (
        ("create", "customresourcedefinitions"),
        ("delete", f"customresourcedefinitions/{INSTALLATIONS}"),
        ("patch", "customresourcedefinitions/certificates.cert-manager.io"),
        ("list", "customresourcedefinitions"),
        ("get", "secrets"),
    ):
        answer = plane.kubectl("auth", "can-i", verb, what, kubeconfig=hook_account, check=False)
        assert answer.stdout.strip() == "no", (verb, what, answer.stdout)
    answer = plane.kubectl(
        "auth", "can-i", "patch", f"customresourcedefinitions/{INSTALLATIONS}",
        kubeconfig=hook_account, check=False,
    )  # fmt: skip
    assert answer.stdout.strip() == "yes"


def test_the_program_refuses_a_file_that_is_not_one_of_ichors_crds(
    hook_account: Path, tmp_path: Path
) -> None:
    for path in CRD_FILES:
        (tmp_path / path.name).write_text(path.read_text())
    body = yaml.safe_load(CRD_FILES[0].read_text())
    body["metadata"]["name"] = "certificates.cert-manager.io"
    (tmp_path / CRD_FILES[0].name).write_text(yaml.safe_dump(body))
    result = run_program(hook_account, tmp_path, "0.2.0")
    assert result.returncode == 1
    assert "not one of Ichor's" in result.stderr
    assert "nothing was applied" in result.stderr
