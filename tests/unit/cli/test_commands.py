"""The command tree: the lines ``ichor --help`` shows, what ``ichor version`` loads, the
global options in either place, adopt's flags and the exit codes."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from ichor.cli import common, kube
from ichor.cli.main import COMMANDS, cli, main
from ichor.settings import CliSettings

#: Clients and models ``ichor version`` and ``ichor --help`` must not load.
HEAVY = (
    "kubernetes",
    "urllib3",
    "aiohttp",
    "pydantic",
    "rich",
    "yaml",
    "kopf",
)


def _commands() -> Iterator[tuple[str, click.Command]]:
    """Every command of the tree, by its path (``upgrade talos``), groups too."""
    context = click.Context(cli)

    def walk(prefix: str, command: click.Command) -> Iterator[tuple[str, click.Command]]:
        yield prefix, command
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                assert sub is not None
                yield from walk(f"{prefix} {name}".strip(), sub)

    yield from walk("", cli)


def test_the_help_line_of_each_command_is_its_own_first_sentence() -> None:
    for name, entry in COMMANDS.items():
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        assert command.get_short_help_str(limit=200) == entry.help, name


@pytest.mark.parametrize("argv", [["version"], ["--help"], ["version", "-o", "json"]])
def test_version_and_help_load_no_client_and_no_model(argv: list[str]) -> None:
    script = (
        "import json, sys\n"
        "from ichor.cli.main import main\n"
        f"code = main({argv!r})\n"
        "print(json.dumps([code, sorted({m.split('.')[0] for m in sys.modules})]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    code, loaded = json.loads(result.stdout.splitlines()[-1])
    assert code == 0
    assert set(loaded) & set(HEAVY) == set()


def test_every_command_takes_the_global_options() -> None:
    for path, command in _commands():
        names = {param.name for param in command.params}
        assert set(common.GLOBAL_NAMES) <= names, (
            f"ichor {path} lacks {set(common.GLOBAL_NAMES) - names}"
        )


@pytest.fixture
def connected(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each connection a command asks for, instead of a client (the command then stops)."""
    asked: list[dict[str, Any]] = []

    def connect(**given: Any) -> kube.Target:
        asked.append(given)
        raise kube.CliError("stopped by the test")

    monkeypatch.setattr(kube, "connect", connect)
    return asked


def _run(*argv: str) -> int:
    return main(list(argv), settings=CliSettings(kubeconfig="/from/env"))


@pytest.mark.parametrize(
    ("argv", "kubeconfig", "namespace"),
    [
        (("status",), "/from/env", None),
        (("--kubeconfig", "/g", "status"), "/g", None),
        (("status", "--kubeconfig", "/c"), "/c", None),
        (("--kubeconfig", "/g", "-n", "a", "status", "--kubeconfig", "/c"), "/c", "a"),
        (("-n", "a", "upgrade", "-n", "b", "talos", "prod", "--list"), "/from/env", "b"),
        (("upgrade", "--kubeconfig", "/u", "plan", "prod"), "/u", None),
        (("cni", "upgrade", "prod", "--kubeconfig", "/c", "-n", "c"), "/c", "c"),
        (("adopt", "e", "--workload-kubeconfig", "WORKLOAD", "--kubeconfig", "/c"), "/c", None),
        (("operations", "--kubeconfig", "/c"), "/c", None),
        (("logs", "op", "-n", "x"), "/from/env", "x"),
    ],
)
def test_kubeconfig_names_the_management_cluster_in_either_place(
    connected: list[dict[str, Any]],
    argv: tuple[str, ...],
    kubeconfig: str,
    namespace: str | None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    if argv[0] == "adopt":
        # the cluster to adopt is read first: stand in for it (one Talos v1.14.3 Node),
        # named by a kubeconfig of inline credentials, the only kind adopt stores
        from types import SimpleNamespace

        from ichor.cli import clusters
        from tests.support import nodes

        workload = SimpleNamespace(configuration=SimpleNamespace(host="https://workload"))
        monkeypatch.setattr("kubernetes.config.new_client_from_config", lambda **_: workload)
        info = nodes.talos_node_info(talos="v1.14.3", kubelet="v1.36.6")
        node = {"metadata": {"name": "n"}, "status": {"nodeInfo": info}}
        monkeypatch.setattr(clusters, "_workload_nodes", lambda api, where: [node])
        monkeypatch.setattr(clusters, "_workload_cilium", lambda api, where: "1.20.4")
        workload_kubeconfig = tmp_path / "workload.kubeconfig"
        workload_kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "w", "cluster": {"server": "https://workload"}}],
                    "users": [{"name": "w", "user": {"token": "t"}}],
                    "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
                    "current-context": "w",
                }
            )
        )
        argv = tuple(str(workload_kubeconfig) if a == "WORKLOAD" else a for a in argv)
    assert _run(*argv) == 1
    [given] = connected
    assert given["kubeconfig"] == kubeconfig
    assert given["namespace"] == namespace


def test_as_and_as_group_reach_the_connection(connected: list[dict[str, Any]]) -> None:
    assert _run("--as", "nadia", "status", "--as-group", "a", "--as-group", "b") == 1
    [given] = connected
    assert given["as_user"] == "nadia"
    assert given["as_groups"] == ("a", "b")


def test_as_group_without_as_is_a_usage_error(
    connected: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("status", "--as-group", "admins") == 2
    assert "--as-group needs --as" in capsys.readouterr().err
    assert connected == []


def test_adopt_refuses_kubeconfig_for_the_cluster_to_adopt_and_names_the_new_flag(
    connected: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("adopt", "edge", "--kubeconfig", __file__) == 2
    err = capsys.readouterr().err
    assert "--kubeconfig names the management cluster" in err
    assert "--workload-kubeconfig FILE" in err
    assert connected == []
    assert _run("adopt", "edge") == 2
    assert "Missing option '--workload-kubeconfig'" in capsys.readouterr().err


def test_cni_upgrade_shows_no_version_and_refuses_one(
    connected: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run("cni", "upgrade", "--help") == 0
    usage = capsys.readouterr().out.splitlines()[0]
    assert usage == "Usage: ichor cni upgrade [OPTIONS] CLUSTER"
    assert _run("cni", "upgrade", "prod", "1.20.5") == 2
    assert "takes no version" in capsys.readouterr().err
    assert connected == []


def test_ctrl_c_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(**_: Any) -> kube.Target:
        raise KeyboardInterrupt

    monkeypatch.setattr(kube, "connect", interrupted)
    assert _run("status") == 130
    assert capsys.readouterr().err.strip().endswith("Interrupted.")


def test_the_console_scripts_are_declared() -> None:
    import tomllib
    from pathlib import Path

    scripts = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())[
        "project"
    ]["scripts"]
    assert scripts["ichor"] == "ichor.cli.main:main"
    assert scripts["kubectl-ichor"] == "ichor.cli.main:kubectl_plugin"
    assert scripts["kubectl_complete-ichor"] == "ichor.cli.main:kubectl_complete"
