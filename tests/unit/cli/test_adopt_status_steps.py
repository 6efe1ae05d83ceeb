"""The named steps of ``ichor adopt`` and of the ``ichor status`` table, and the shared
options of the listing and the cluster-writing commands, each on its own: a change to
one step fails the test that names it."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ichor.cli import clusters, kube, output, views
from ichor.release.observed import Unreadable
from ichor.release.versions import parse

UNREADABLE = Unreadable(what="Cilium is seen, its release is not", step="label it")


def node(name: str, *, talos: str = "v1.14.3", schematic: str = "") -> dict[str, Any]:
    annotations = {"extensions.talos.dev/schematic": schematic} if schematic else {}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {"nodeInfo": {"osImage": f"Talos ({talos})", "kubeletVersion": "v1.36.6"}},
    }


def test__workload_client_refuses_a_kubeconfig_it_cannot_use(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")  # no context to use
    with pytest.raises(kube.CliError, match=f"the kubeconfig {broken} cannot be used"):
        clusters._workload_client(broken, None)


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: v1\nkind: [Config\n",  # not YAML
        "{{{{",
        "- a list\n- not a map\n",
        "just a string\n",
        "clusters: 7\ncontexts: {a: 1}\nusers: yes\ncurrent-context: a\n",
        "\tclusters: tab-indented\n",
        "\x00\x01\x02",
        "",
    ],
)
def test__workload_client_refuses_garbage_with_a_sentence(tmp_path: Path, text: str) -> None:
    garbage = tmp_path / "kubeconfig"
    garbage.write_text(text)
    with pytest.raises(kube.CliError, match=f"the kubeconfig {garbage} cannot be used") as caught:
        clusters._workload_client(garbage, None)
    said = str(caught.value)
    assert "yaml." not in said, said
    assert "\n" not in said, said
    assert "indices" not in said, said


def test__adopted_versions_refuses_nodes_that_say_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    talos, kubernetes, notes = clusters._adopted_versions("prod", [node("cp-1")])
    assert (talos.tag, kubernetes.tag, notes) == ("v1.14.3", "v1.36.6", [])
    with pytest.raises(SystemExit):
        clusters._adopted_versions("prod", [])
    assert capsys.readouterr().err.startswith("Refused: Adopt of prod is refused: ")


@pytest.mark.parametrize(
    ("cilium", "said"),
    [
        ("1.20.4", ", Cilium 1.20.4."),
        (UNREADABLE, ", Cilium (release not readable)."),
        (None, ", no Cilium."),
        ("", ", no Cilium."),
    ],
)
def test__say_running_names_the_cilium_it_sees(
    cilium: Any, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clusters._say_running("https://w", talos=parse("v1.14.3"), kubernetes=parse("v1.36.6"),
                          cilium=cilium)  # fmt: skip
    assert capsys.readouterr().out == (
        f"The cluster at https://w runs Talos v1.14.3, Kubernetes v1.36.6{said}\n"
    )


def test__refuse_unreadable_cilium_refuses_only_a_managed_adopt_of_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clusters._refuse_unreadable_cilium("prod", "1.20.4", cni_unmanaged=False)
    clusters._refuse_unreadable_cilium("prod", UNREADABLE, cni_unmanaged=True)
    clusters._refuse_unreadable_cilium("prod", None, cni_unmanaged=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit):
        clusters._refuse_unreadable_cilium("prod", UNREADABLE, cni_unmanaged=False)
    refused = capsys.readouterr().err
    assert "Adopt of prod with spec.cni.preset cilium" in refused
    assert "Or adopt with --cni-unmanaged to keep the CNI yours. Nothing was written." in refused


def test__show_images_warns_of_nodes_that_differ_and_of_a_schematic(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clusters._show_images([node("cp-1"), node("cp-2")], schematic=None)
    same = capsys.readouterr()
    assert "no schematic annotation (no extensions): cp-1, cp-2" in same.out
    assert same.err == ""
    clusters._show_images([node("cp-1"), node("w-1", schematic="abc")], schematic="f" * 64)
    differ = capsys.readouterr().err
    assert "the Nodes run 2 different schematics" in differ
    assert f"--schematic {'f' * 12} sets spec.schematic" in differ


def test__adopted_contract_probes_the_running_minor_and_refuses_a_newer_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    talos, kubernetes = parse("v1.14.3"), parse("v1.36.6")
    assert (
        clusters._adopted_contract(talos, kubernetes, version_contract=None, cni_unmanaged=False)
        == "v1.14"
    )
    assert (
        clusters._adopted_contract(talos, kubernetes, version_contract="v1.13", cni_unmanaged=True)
        == "v1.13"
    )
    assert capsys.readouterr().err == ""
    old_pair = clusters._adopted_contract(
        talos, parse("v1.30.0"), version_contract=None, cni_unmanaged=True
    )
    assert old_pair == "v1.14"
    assert capsys.readouterr().err.startswith("Warning: Kubernetes v1.30.0 is refused with Talos")
    with pytest.raises(SystemExit):
        clusters._adopted_contract(talos, kubernetes, version_contract="v1.15", cni_unmanaged=True)
    assert capsys.readouterr().err.rstrip().endswith("Nothing was written.")
    with pytest.raises(SystemExit):  # machinery does not know a Talos this old
        clusters._adopted_contract(
            parse("v1.2.0"), kubernetes, version_contract=None, cni_unmanaged=True
        )


def test__create_kubeconfig_secret_stores_the_kubeconfig_under_its_key() -> None:
    created: list[tuple[str, Any]] = []

    def create(namespace: str, body: Any, **_: Any) -> None:
        created.append((namespace, body))

    target = SimpleNamespace(
        namespace="team-a", core=SimpleNamespace(create_namespaced_secret=create)
    )
    clusters._create_kubeconfig_secret(target, "prod-kubeconfig", b"kubeconfig")  # type: ignore[arg-type]
    ((namespace, body),) = created
    assert namespace == "team-a"
    assert body["metadata"]["name"] == "prod-kubeconfig"
    assert body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "ichor"}
    assert base64.b64decode(body["data"]["kubeconfig"]) == b"kubeconfig"


def test__writes_cluster_adds_the_schematic_the_dry_run_and_the_connection() -> None:
    @click.command()
    @clusters._writes_cluster(dry_run="Does nothing at all.")
    def command(ctx: click.Context, **given: Any) -> None:
        click.echo(f"{type(ctx).__name__} {given['schematic']} {given['dry_run']}")

    names = [param.name for param in command.params]
    assert names[:2] == ["schematic", "dry_run"]
    assert {"kubeconfig", "context", "namespace"} <= set(names)
    result = CliRunner().invoke(command, ["--schematic", "abc", "--dry-run"])
    assert result.output == "Context abc True\n"
    assert "Does nothing at all." in CliRunner().invoke(command, ["--help"]).output


def test_listing_adds_the_cluster_all_namespaces_output_and_connection() -> None:
    @click.command()
    @output.listing("Things")
    def command(ctx: click.Context, cluster: str | None, all_namespaces: bool, fmt: str) -> None:
        click.echo(f"{type(ctx).__name__} {cluster} {all_namespaces} {fmt}")

    assert CliRunner().invoke(command, ["prod", "-A", "-o", "json"]).output == (
        "Context prod True json\n"
    )
    assert CliRunner().invoke(command, []).output == "Context None False table\n"
    assert "Things of every namespace." in CliRunner().invoke(command, ["--help"]).output


def test_emitted_prints_json_or_yaml_and_leaves_a_table_to_the_caller(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [SimpleNamespace(to_json=lambda: {"name": "prod"})]
    assert not output.emitted(rows, "table")
    assert capsys.readouterr().out == ""
    assert output.emitted(rows, "json")
    assert '"name": "prod"' in capsys.readouterr().out
    assert output.emitted(rows, "yaml")
    assert capsys.readouterr().out == "- name: prod\n"


ROW = views.StatusRow(
    namespace="team-a",
    name="prod",
    talos="v1.14.3",
    kubernetes="v1.36.6",
    cilium="1.20.4",
    compatible="True",
    talos_upgrade="v1.14.4",
    kubernetes_upgrade="-",
    ready="True",
    message="",
)


def test__status_columns_adds_namespace_auto_patch_and_images_when_needed() -> None:
    plain = [header for header, _ in output._status_columns([ROW], namespaces=False)]
    assert plain == [header for header, _ in output._STATUS_COLUMNS]
    patched = dataclasses.replace(ROW, auto_patch="suspended")
    imaged = dataclasses.replace(ROW, images="2 images")
    every = output._status_columns([ROW, patched, imaged], namespaces=True)
    headers = [header for header, _ in every]
    assert headers[0] == "NAMESPACE"
    assert headers[-2:] == ["AUTO-PATCH", "IMAGES"]
    assert [field for _, field in every][-2:] == ["auto_patch", "images"]
    only_images = [header for header, _ in output._status_columns([imaged], namespaces=False)]
    assert only_images[-1] == "IMAGES"
    assert "AUTO-PATCH" not in only_images
    only_patch = [header for header, _ in output._status_columns([patched], namespaces=False)]
    assert only_patch[-1] == "AUTO-PATCH"
    assert "IMAGES" not in only_patch
    assert (
        tuple((header, field) for header, field in output._STATUS_COLUMNS if hasattr(ROW, field))
        == output._STATUS_COLUMNS
    )


def test__status_notes_follow_a_cluster_with_a_message_or_differing_images(
    capsys: pytest.CaptureFixture[str],
) -> None:
    output._status_notes(ROW)
    assert capsys.readouterr().out == ""
    output._status_notes(dataclasses.replace(ROW, message="not reached", image_lines=("a", "b")))
    assert capsys.readouterr().out == (
        "team-a/prod: not reached\n"
        "team-a/prod: the nodes differ, each is upgraded to its own image:\n"
        "  a\n"
        "  b\n"
    )
