"""``ichor version``, ``init``, ``adopt`` and ``status`` against the real API server, and
how the CLI fails: exit codes, one sentence, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ichor.api import records
from ichor.cli.main import main
from ichor.release.release_set import PINNED
from tests.component.cli.conftest import PLAIN, Cli
from tests.harness import controlplane
from tests.support import nodes, table

pytestmark = pytest.mark.component


def test_version_prints_the_build_and_the_versions_a_new_install_gets(cli: Cli) -> None:
    result = cli("version")
    assert result.code == 0
    assert f"Versions a new install gets: {PINNED}" in result.out
    as_json = cli("version", "-o", "json").json
    assert as_json["newInstall"] == {
        "talos": PINNED.talos,
        "kubernetes": PINNED.kubernetes,
        "versionContract": PINNED.contract,
        "ciliumChart": PINNED.cilium_chart,
    }
    assert yaml.safe_load(cli("version", "-o", "yaml").out) == as_json


def test_init_writes_a_cluster_with_the_release_set(cli: Cli) -> None:
    result = cli("init", "prod", "--talosconfig-secret", "prod-talosconfig", user=PLAIN)
    assert result.code == 0, result.err
    body = cli.get("taloscluster", "prod")
    assert body["spec"] == {
        "talosVersion": PINNED.talos,
        "kubernetesVersion": PINNED.kubernetes,
        "versionContract": PINNED.contract,
        "cni": {"preset": "cilium"},
        "talosconfigSecretRef": {"name": "prod-talosconfig", "key": "talosconfig"},
        "upgradeStrategy": "Operations",  # the CRD's default
    }


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--talos-version", "v1.14.5"),
        ("--kubernetes-version", "v1.37.2"),
        ("--version-contract", "v1.13"),
    ],
)
def test_init_refuses_any_other_version_and_writes_nothing(cli: Cli, flag: str, value: str) -> None:
    result = cli("init", "prod", flag, value)
    assert result.code == 1
    assert f"Refused: {flag} {value} is refused: a first install runs this build's release set" in (
        result.err
    )
    assert "upgrade after the install" in result.err
    assert cli.get("taloscluster", "prod") is None


def test_init_of_an_existing_name_fails_in_one_sentence(cli: Cli) -> None:
    assert cli("init", "prod").code == 0
    again = cli("init", "prod")
    assert again.code == 1
    assert again.err.startswith("Error: creating the TalosCluster failed:")
    assert "already exists" in again.err


# --- adopt: the workload cluster is this API server, with Node objects -------------------


class Workload:
    def __init__(self, plane: controlplane.ControlPlane) -> None:
        self.plane = plane
        self.made: list[tuple[str, ...]] = []

    def node(self, name: str, *, talos: str, kubelet: str) -> None:
        self.plane.kubectl(
            "apply", "-f", "-",
            input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        )  # fmt: skip
        info = nodes.talos_node_info(talos=talos, kubelet=kubelet)
        self.plane.kubectl(
            "patch", "node", name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"nodeInfo": info}}),
        )  # fmt: skip
        self.made.append(("node", name))

    def cilium(self, version: str, *, image: str | None = None) -> None:
        labels = {"k8s-app": "cilium"}
        body = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "cilium", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "cilium-agent",
                                "image": image or f"quay.io/cilium/cilium:v{version}",
                            }
                        ]
                    },
                },
            },
        }
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(body))
        self.made.append(("daemonset", "cilium", "-n", "kube-system"))

    def clean(self) -> None:
        for made in self.made:
            self.plane.kubectl("delete", *made, "--ignore-not-found", "--wait=false")


@pytest.fixture
def workload(control_plane: controlplane.ControlPlane) -> Iterator[Workload]:
    for node in json.loads(control_plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]:
        control_plane.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    made = Workload(control_plane)
    try:
        yield made
    finally:
        made.clean()


def _adopt(cli: Cli, name: str, *extra: str) -> Any:
    return cli("adopt", name, "--workload-kubeconfig", str(cli.plane.kubeconfig), *extra)


def _refused_and_nothing_written(cli: Cli, result: Any, *, name: str, words: str) -> None:
    """Adopt refused in one sentence, and neither the TalosCluster nor its Secret exists."""
    assert result.code == 1
    assert result.err.startswith("Refused:")
    assert words in result.err
    assert "Nothing was written" in result.err
    assert cli.get("taloscluster", name) is None
    assert cli.get("secret", f"{name}-kubeconfig") is None


def test_adopt_takes_the_cluster_as_it_runs(cli: Cli, workload: Workload) -> None:
    workload.node("a1", talos="v1.13.9", kubelet="v1.35.5")
    workload.node("a2", talos="v1.13.9", kubelet="v1.35.5")
    workload.cilium("1.19.10")
    result = _adopt(cli, "edge")
    assert result.code == 0, result.err
    assert "runs Talos v1.13.9, Kubernetes v1.35.5, Cilium 1.19.10" in result.out
    body = cli.get("taloscluster", "edge")
    assert body["spec"]["talosVersion"] == "v1.13.9"
    assert body["spec"]["kubernetesVersion"] == "v1.35.5"
    assert body["spec"]["versionContract"] == "v1.13"
    assert body["spec"]["kubeconfigSecretRef"]["name"] == "edge-kubeconfig"
    assert cli.get("secret", "edge-kubeconfig") is not None


def test_adopt_dry_run_shows_the_schematics_the_nodes_run_and_says_they_differ(
    cli: Cli, workload: Workload
) -> None:
    """What Talos writes on its Node: the schematic ID as an annotation, each
    extension's version as a label; nodes that differ keep their own at an upgrade."""
    storage, gpu = "a" * 64, "b" * 64
    for name, schematic, extension in [
        ("s1", storage, "iscsi-tools"),
        ("s2", storage, "iscsi-tools"),
        ("g1", gpu, "nvidia-container-toolkit"),
    ]:
        workload.node(name, talos="v1.14.3", kubelet="v1.36.6")
        cli.plane.kubectl("annotate", "node", name, f"extensions.talos.dev/schematic={schematic}")
        cli.plane.kubectl("label", "node", name, f"extensions.talos.dev/{extension}=v1.0.0")
    result = _adopt(cli, "mixed", "--dry-run")
    assert result.code == 0, result.err
    assert f"schematic {storage[:12]} (iscsi-tools): s1, s2" in result.out
    assert f"schematic {gpu[:12]} (nvidia-container-toolkit): g1" in result.out
    assert "the Nodes run 2 different schematics" in result.err
    assert "each keeps its own at a Talos upgrade" in result.err
    assert cli.get("taloscluster", "mixed") is None


def test_adopt_of_a_cluster_newer_than_the_set_is_no_reason_to_refuse(
    cli: Cli, workload: Workload
) -> None:
    workload.node("n1", talos="v1.14.5", kubelet="v1.36.7")
    result = _adopt(cli, "newer")
    assert result.code == 0, result.err
    assert "Warning" not in result.err


@pytest.mark.parametrize(
    ("talos", "kubelet", "reason"),
    [
        ("v1.11.6", "v1.34.2", "Ichor adopts Talos 1.12 or newer"),
        (table.unknown_talos(), "v1.36.6", table.unknown_talos()),
        ("v1.14.3", "v1.99.0", "v1.99.0"),
    ],
    ids=["below-the-floor", "unknown-talos", "unknown-kubernetes"],
)
def test_adopt_refuses_before_writing_anything(
    cli: Cli, workload: Workload, talos: str, kubelet: str, reason: str
) -> None:
    workload.node("r1", talos=talos, kubelet=kubelet)
    _refused_and_nothing_written(cli, _adopt(cli, "refused"), name="refused", words=reason)


@pytest.mark.parametrize(
    ("extra", "warned"),
    [((), True), (("--cni-unmanaged",), False)],
    ids=["managed-cilium-judged", "unmanaged-judges-the-talos-pair-only"],
)
def test_adopt_warns_about_the_embedded_cilium_only_for_a_managed_cni(
    cli: Cli, workload: Workload, extra: tuple[str, ...], warned: bool
) -> None:
    workload.node("w1", talos="v1.14.3", kubelet="v1.37.1")
    result = _adopt(cli, "edge", *extra)
    assert result.code == 0, result.err
    assert ("is refused with Cilium 1.20.4" in result.err) is warned
    preset = cli.get("taloscluster", "edge")["spec"]["cni"]["preset"]
    assert preset == ("unmanaged" if extra else "cilium")


def test_a_managed_adopt_of_a_cilium_whose_release_cannot_be_read_is_refused(
    cli: Cli, workload: Workload
) -> None:
    """Pinned by digest only, no Helm release: a managed adopt would take over a Cilium no
    rule can judge (the preset rule refuses that take-over); unmanaged keeps it the user's."""
    workload.node("d1", talos="v1.14.3", kubelet="v1.36.6")
    workload.cilium("", image="quay.io/cilium/cilium@sha256:" + "5" * 64)
    result = _adopt(cli, "digest")
    _refused_and_nothing_written(
        cli,
        result,
        name="digest",
        words="Adopt of digest with spec.cni.preset cilium is refused: Cilium is running "
        "(DaemonSet kube-system/cilium) but its release cannot be read",
    )
    assert "--cni-unmanaged" in result.err
    kept = _adopt(cli, "digest", "--cni-unmanaged")
    assert kept.code == 0, kept.err
    assert "Cilium (release not readable)" in kept.out


def test_adopt_of_an_incompatible_pair_warns_and_the_admin_passes_the_webhook(
    cli: Cli, workload: Workload
) -> None:
    workload.node("w1", talos="v1.14.3", kubelet="v1.32.4")
    result = _adopt(cli, "edge")
    assert result.code == 0, result.err
    assert "Warning: Kubernetes v1.32.4 is refused with Talos v1.14.3" in result.err
    assert "override by ichor-admin" in result.err
    assert cli.get("taloscluster", "edge") is not None


def test_adopt_of_an_incompatible_pair_works_for_a_user_without_the_verb(
    cli: Cli, workload: Workload
) -> None:
    """Any user who may create TalosClusters adopts a cluster as it runs: the pair the
    rules refuse is stored with a warning and a Warning Event naming the user."""
    workload.node("w1", talos="v1.14.3", kubelet="v1.32.4")
    result = cli("adopt", "edge", "--workload-kubeconfig", str(cli.plane.kubeconfig), user=PLAIN)
    assert result.code == 0, result.err
    assert "Warning: Kubernetes v1.32.4 is refused with Talos v1.14.3" in result.err
    assert "adopted as it runs (TalosKubernetes)" in result.err
    body = cli.get("taloscluster", "edge")
    assert body["spec"]["kubernetesVersion"] == "v1.32.4"
    assert body["metadata"]["annotations"][records.ADOPTION] == "true"
    (event,) = cli.events("AdoptedIncompatible")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "edge"
    assert f"User {PLAIN} adopted TalosCluster {cli.namespace}/edge" in event["message"]


def test_an_unknown_version_is_refused_for_an_adoption_too(cli: Cli, workload: Workload) -> None:
    workload.node("w1", talos=table.unknown_talos(), kubelet="v1.36.6")
    result = cli("adopt", "edge", "--workload-kubeconfig", str(cli.plane.kubeconfig), user=PLAIN)
    assert result.code == 1, result.out
    assert f"Talos {table.unknown_talos()} is refused" in result.err + result.out
    assert cli.get("taloscluster", "edge") is None


# --- status and failures ------------------------------------------------------------------


def test_status_is_one_table_and_json(cli: Cli) -> None:
    cli.cluster("prod")
    cli.set_status(
        "prod",
        {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "upgradeChoices": {
                "talos": {"default": "v1.14.5", "available": True},
                "kubernetes": {"default": "v1.36.7", "available": True},
            },
        },
    )
    table = cli("status")
    assert table.code == 0
    header = table.out.splitlines()[0].split()
    assert header[:4] == ["NAME", "TALOS", "KUBERNETES", "CILIUM"]
    assert "v1.14.5" in table.out
    [row] = cli("status", "prod", "-o", "json").json
    assert row["name"] == "prod"
    assert row["talosUpgrade"] == "v1.14.5"
    assert row["kubernetesUpgrade"] == "v1.36.7"
    assert row["cilium"] == "1.20.4"


def test_an_unreachable_api_server_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": f"https://127.0.0.1:{controlplane.free_port()}"}}
        ],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    code = main(["--kubeconfig", str(path), "status"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(
        "Error: listing TalosClusters failed: the API server at https://127.0.0.1:"
    )
    assert "cannot be reached" in err
    assert "Traceback" not in err


def test_a_kubeconfig_that_cannot_be_used_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("clusters: []\n")
    code = main(["--kubeconfig", str(path), "status"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"Error: the kubeconfig {path} cannot be used:")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "code"),
    [(("version", "-o", "json"), 0), (("upgrade", "talos"), 2), (("bogus",), 2)],
    ids=["done", "missing-argument", "unknown-command"],
)
def test_the_console_script_exits_with_the_code(args: tuple[str, ...], code: int) -> None:
    script = Path(sys.executable).parent / "ichor"
    result = subprocess.run(
        [str(script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=controlplane.loopback_env(),
        check=False,
    )
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("contract", ["v1.13", "v1.12", "v1.14"])
def test_adopt_takes_any_version_contract_the_running_talos_supports(
    cli: Cli, workload: Workload, contract: str
) -> None:
    workload.node("c1", talos="v1.14.3", kubelet="v1.36.6")
    result = _adopt(cli, "edge", "--version-contract", contract)
    assert result.code == 0, result.err
    assert cli.get("taloscluster", "edge")["spec"]["versionContract"] == contract


@pytest.mark.parametrize(
    ("contract", "words"),
    [
        ("v1.15", "the cluster runs Talos v1.14.3, which takes contracts up to v1.14"),
        ("v2.0", "the cluster runs Talos v1.14.3, which takes contracts up to v1.14"),
        ("1.14", "is not a version contract vX.Y"),
        ("v1.14.0", "is not a version contract vX.Y"),
    ],
    ids=["next-minor", "next-major", "without-v", "a-full-version"],
)
def test_adopt_refuses_a_contract_the_running_talos_does_not_take_and_writes_nothing(
    cli: Cli, workload: Workload, contract: str, words: str
) -> None:
    workload.node("c1", talos="v1.14.3", kubelet="v1.36.6")
    result = _adopt(cli, "edge", "--version-contract", contract)
    _refused_and_nothing_written(cli, result, name="edge", words=words)
