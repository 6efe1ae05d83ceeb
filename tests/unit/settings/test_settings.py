"""The settings are read once from an environment, each variable by one field; what is
not a number where one is expected is refused with the variable's name, and nothing but
``ichor/settings.py`` reads the environment."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from ichor import settings
from ichor.settings import (
    CliSettings,
    ControllerSettings,
    ExecutorSettings,
    ReleaseCheckSettings,
    Settings,
    SettingsError,
)

PACKAGE = Path(settings.__file__).resolve().parent


#: Variables whose reader checks the form: a value of that form, unlike the default.
_SAMPLES = {
    "ICHOR_HEALTH_CHECK_RESOURCES": "v1/pods",
    "ICHOR_CREDENTIALS_ALLOW_PROXY": "true",
    "ICHOR_CREDENTIALS_ALLOW_INSECURE_TLS": "true",
    "ICHOR_EXECUTOR_NODE_SELECTOR": '{"zone": "a"}',
    "ICHOR_EXECUTOR_TOLERATIONS": '[{"key": "dedicated"}]',
    "ICHOR_EXECUTOR_AFFINITY": '{"nodeAffinity": {}}',
    "ICHOR_EXECUTOR_RESOURCES": '{"limits": {"memory": "1Gi"}}',
    "ICHOR_LOG_FORMAT": "json",
}


def _every_variable(cls: type[Any], prefix: str = "") -> dict[str, tuple[str, str]]:
    """variable -> (field path, a value unlike the default, as text)."""
    found: dict[str, tuple[str, str]] = {}
    for item in dataclasses.fields(cls):
        path = f"{prefix}{item.name}"
        if "section" in item.metadata:
            found |= _every_variable(item.metadata["section"], f"{path}.")
        elif "env" in item.metadata:
            kind = str(item.type)
            text = (
                "7"
                if "int" in kind or "float" in kind
                else "a b"
                if "tuple" in kind
                else "/p"
                if "Path" in kind
                else "x"
            )
            text = _SAMPLES.get(item.metadata["env"], text)
            found[item.metadata["env"]] = (path, text)
    return found


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def test_nothing_set_is_every_default() -> None:
    assert Settings.from_env({}) == Settings()
    assert CliSettings.from_env({}) == CliSettings()


def test_every_variable_reaches_its_field() -> None:
    variables = _every_variable(Settings)
    assert len(variables) >= 39
    environ = {name: text for name, (_, text) in variables.items()}
    read = Settings.from_env(environ)
    unchanged = [
        name for name, (path, _) in variables.items() if _get(read, path) == _get(Settings(), path)
    ]
    assert unchanged == []


def test_empty_is_the_default_and_an_empty_argument_list_is_none() -> None:
    read = Settings.from_env(
        {"ICHOR_OBSERVE_INTERVAL": "", "ICHOR_WEBHOOK_CERT": "", "ICHOR_HELM_ARGS": ""}
    )
    assert read.clusters.observe_interval == ControllerSettings().observe_interval
    assert read.webhook.cert is None
    assert read.operations.executor.helm_args == ()
    assert read.operations.executor.talos_upgrade_args == ExecutorSettings().talos_upgrade_args


def test_lists_and_names_are_split() -> None:
    read = Settings.from_env(
        {"ICHOR_TALOS_UPGRADE_ARGS": "--wait  --stage", "ICHOR_WEBHOOK_CLIENT_NAMES": "a,,b"}
    )
    assert read.operations.executor.talos_upgrade_args == ("--wait", "--stage")
    assert read.webhook.client_names == ("a", "b")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ICHOR_OBSERVE_INTERVAL", "soon"),
        ("ICHOR_WORKERS", "2.5"),
        ("ICHOR_WEBHOOK_PORT", "https"),
        ("ICHOR_METRICS_PORT", "80 81"),
        ("ICHOR_JOB_DEADLINE", "6h"),
        ("ICHOR_RELEASE_MAX_INTERVAL", "1e"),
    ],
)
def test_a_value_that_is_not_a_number_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name) as refused:
        Settings.from_env({name: value})
    assert repr(value) in str(refused.value)
    assert isinstance(refused.value, ValueError)


def test_a_zero_retry_is_the_default_wait_not_a_busy_loop() -> None:
    read = Settings.from_env({"ICHOR_RELEASE_RETRY": "0"})
    assert read.release_check.retry_failed == ReleaseCheckSettings().retry_failed


def test_pod_id_set_but_empty_counts_as_set() -> None:
    """kopf takes an empty POD_ID as the process's name, so the operator must too."""
    assert Settings.from_env({"POD_ID": ""}).pod_id == ""
    assert Settings.from_env({}).pod_id is None


def test_the_kubelets_address_is_read_with_both_variables() -> None:
    kube = Settings.from_env(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    ).kube
    assert kube.in_pod
    assert kube.in_cluster_server == "https://[fd00::1]:443"
    assert Settings.from_env({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}).kube.in_cluster_server is None


def _environment_reads(path: Path, *, root: Path = PACKAGE.parent) -> list[str]:
    """Every use of ``os.environ``/``os.getenv``/``environ`` in ``path`` other than a write
    of one key (``os.environ["X"] = ...``)."""
    tree = ast.parse(path.read_text())
    writes = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "environb"}:
            if id(node) not in writes:
                found.append(f"{path.relative_to(root)}:{node.lineno}")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and {a.name for a in node.names} & {"environ", "getenv", "environb"}
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return sorted(found, key=lambda where: int(where.rsplit(":", 1)[1]))


def test_nothing_but_the_settings_reads_the_environment() -> None:
    reads = [
        where
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "settings.py"
        for where in _environment_reads(path)
    ]
    assert reads == []
    assert _environment_reads(PACKAGE / "settings.py") != []


def _settings_reads(path: Path) -> list[str]:
    """The functions of ``path`` that call ``<something>.from_env(...)``."""
    tree = ast.parse(path.read_text())
    return sorted(
        f"{path.relative_to(PACKAGE.parent)}:{function.name}"
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "from_env"
    )


def test_the_settings_are_read_at_the_two_entry_points_only() -> None:
    """The operator's ``run``, the command's ``main`` and the chart's CRD hook's ``main``
    read them, and hand them on; nothing falls back to reading them itself."""
    reads = [
        where
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "settings.py"
        for where in _settings_reads(path)
    ]
    assert reads == ["ichor/cli/main.py:main", "ichor/crds.py:main", "ichor/operator.py:run"]


def test_the_scan_sees_a_read(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom os import getenv\nos.environ['A'] = '1'\nx = os.environ.get('B')\n"
        "y = os.environ['C']\n"
    )
    found = _environment_reads(sample, root=tmp_path)
    assert [w.split(":")[1] for w in found] == ["2", "4", "5"]


def test_health_check_resources_default_and_refusals() -> None:
    from ichor.api.autopatch import DEFAULT_HEALTH_CHECK_RESOURCES
    from ichor.settings import ControllerSettings, SettingsError

    assert ControllerSettings.from_env({}).health_check_resources == DEFAULT_HEALTH_CHECK_RESOURCES
    given = ControllerSettings.from_env(
        {"ICHOR_HEALTH_CHECK_RESOURCES": "v1/pods,example.com/v1/widgets"}
    )
    assert given.health_check_resources == ("v1/pods", "example.com/v1/widgets")
    for bad, words in [
        ("v1/secrets", "'v1/secrets', which is refused"),
        ("v1/pods,example.com/v1/secrets", "secret values"),
        ("pods", "not <apiVersion>/<resource>"),
        ("v1/pods/../secrets", "not <apiVersion>/<resource>"),
    ]:
        with pytest.raises(SettingsError, match=re.escape(words)):
            ControllerSettings.from_env({"ICHOR_HEALTH_CHECK_RESOURCES": bad})
