"""The wheel holds the operator, the webhook, the CLI and the rules, and nothing of the tests;
it runs with the dependencies it declares, none of the development ones.

The wheel is built from what the image copies; it is installed into a fresh venv that sees
only the runtime dependencies (``make runtime-deps``), and every module of ``ichor`` is
imported there, isolated from the checkout and the development venv. Two doctored source
trees show the checks can fail: a module that imports ``jwt`` does not import there, and
a ``testing`` package is named as what does not belong.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.harness import checkout, wheel
from tests.package.conftest import Installed

#: What ``ichor/`` holds in the wheel: the entry points, the one settings object, the
#: controllers and the webhook, the client layer, the rules and the typed shapes of the API.
SHIPPED = {
    "__init__.py",
    "py.typed",
    "operator.py",
    "settings.py",
    "crds.py",  # the chart's CRD upgrade hook runs it in the operator's image
    "api",
    "cli",
    "controller",
    "kube",
    "registry",
    "release",
    "upgrade",
    "webhook",
}
#: Top-level modules that only the development side has (tests, their harness and tools).
DEV_ONLY = {"tests", "jwt", "pytest", "_pytest", "hypothesis", "mypy", "ruff", "importlinter"}


def unexpected(members: list[str]) -> set[str]:
    """Members of the wheel that are neither ``ichor/<SHIPPED>`` nor its dist-info."""
    found = set()
    for name in members:
        top, _, rest = name.partition("/")
        if top.endswith(".dist-info"):
            continue
        if top != "ichor" or rest.split("/")[0] not in SHIPPED:
            found.add(name)
    return found


def test_the_wheel_holds_only_the_operator_the_webhook_the_cli_and_the_rules(
    installed: Installed,
) -> None:
    members = wheel.members(installed.file)
    assert unexpected(members) == set()
    assert {n.split("/")[1] for n in members if n.startswith("ichor/")} == SHIPPED
    assert not [n for n in members if "/testing/" in n or n.startswith("tests/")]
    assert "ichor/operator.py" in members
    assert "ichor/webhook/server.py" in members
    assert "ichor/cli/main.py" in members


def test_the_wheel_carries_its_license_text_and_names_it(installed: Installed) -> None:
    """A legal review reads the wheel it installs: the Apache-2.0 text is in it, and its
    metadata names the licence as an SPDX expression (PEP 639)."""
    with zipfile.ZipFile(installed.file) as archive:
        names = archive.namelist()
        (metadata,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
        licenses = [n for n in names if ".dist-info/licenses/" in n]
        assert [n.rsplit("/", 1)[1] for n in licenses] == ["LICENSE"]
        carried = archive.read(licenses[0]).decode()
    assert carried == (checkout.ROOT / "LICENSE").read_text()
    assert "Apache License" in carried
    assert "Version 2.0, January 2004" in carried
    assert "License-Expression: Apache-2.0" in text.splitlines()


def test_the_wheel_requires_what_pyproject_declares_for_running_and_nothing_of_dev(
    installed: Installed,
) -> None:
    required = {Requirement(r).name for r in wheel.requires(installed.file)}
    declared = {Requirement(r).name for r in wheel.declared_dependencies()}
    assert required == declared
    assert "pyjwt" not in required
    assert "pytest" not in required


def test_every_module_imports_in_a_venv_with_the_runtime_dependencies_alone(
    installed: Installed, runtime_deps: Path
) -> None:
    imported = installed.imported
    assert imported.failed == {}
    assert Path(imported.file).is_relative_to(installed.venv.path)
    assert not any(Path(p).resolve() == checkout.ROOT for p in imported.path if p)
    assert set(imported.loaded) & DEV_ONLY == set()
    assert {"ichor.operator", "ichor.webhook.server", "ichor.cli.main"} <= set(imported.modules)
    # The runtime folder really lacks the development dependencies, so a leak would fail.
    assert not (runtime_deps / "jwt").exists()
    assert not (runtime_deps / "pytest").exists()


def test_the_operator_makes_no_certificate_so_it_needs_no_cryptography(
    installed: Installed, runtime_deps: Path
) -> None:
    """Only the tests and the demo make certificates (tests/harness/certs.py)."""
    assert "cryptography" not in {Requirement(r).name for r in wheel.requires(installed.file)}
    assert not (runtime_deps / "cryptography").exists()
    assert installed.imported.failed == {}
    assert "cryptography" not in set(installed.imported.loaded)


def test_the_wheel_runs_without_packaging(installed: Installed, runtime_deps: Path) -> None:
    """``packaging`` was a runtime dependency nothing in ``ichor/`` imports: it is no
    longer declared, the runtime folder lacks it, and every module and the commands run
    in a venv where importing it fails."""
    assert "packaging" not in {Requirement(r).name for r in wheel.declared_dependencies()}
    assert "packaging" not in {Requirement(r).name for r in wheel.requires(installed.file)}
    assert not (runtime_deps / "packaging").exists()
    absent = subprocess.run(
        [str(installed.venv.python), "-I", "-c", "import packaging"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert absent.returncode != 0
    assert "No module named 'packaging'" in absent.stderr
    assert installed.imported.failed == {}
    assert "packaging" not in set(installed.imported.loaded)
    for script in ("ichor", "kubectl-ichor"):
        ran = subprocess.run(
            [str(installed.venv.path / "bin" / script), "version", "-o", "json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert "newInstall" in ran.stdout


def test_the_ichor_command_of_the_wheel_runs(installed: Installed) -> None:
    command = installed.venv.path / "bin" / "ichor"
    result = subprocess.run(
        [str(command), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


@pytest.fixture(scope="module")
def doctored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sources with a module importing ``jwt`` and a ``testing`` package."""
    tree = tmp_path_factory.mktemp("doctored")
    for name in wheel.SOURCES:
        source = checkout.ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tree / name)
    (tree / "ichor" / "leak.py").write_text("import jwt\n")
    (tree / "ichor" / "testing").mkdir()
    (tree / "ichor" / "testing" / "__init__.py").write_text("")
    return tree


def test_a_wheel_with_a_dev_import_or_a_test_package_is_caught(
    doctored: Path, tmp_path: Path, runtime_deps: Path
) -> None:
    built = wheel.build(out=tmp_path / "wheel", sources=doctored)
    assert unexpected(wheel.members(built)) == {"ichor/leak.py", "ichor/testing/__init__.py"}
    venv = wheel.fresh_venv(wheel=built, where=tmp_path / "venv", deps=runtime_deps)
    imported = wheel.import_all(venv)
    assert set(imported.failed) == {"ichor.leak"}
    assert "No module named 'jwt'" in imported.failed["ichor.leak"]
