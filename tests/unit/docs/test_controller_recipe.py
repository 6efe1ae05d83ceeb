"""docs/development.md's "Adding a controller", followed for every controller package:
its wiring called from ``ichor/operator.py``, its contracts in ``pyproject.toml``, its I/O
module named by the rule."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
CONTROLLERS = ROOT / "ichor" / "controller"
RECIPE = ROOT / "docs" / "development.md"

#: The naming rule's module, and the packages that predate the rule with their own name
#: for it. Frozen: a new package uses ``reconciler``; renaming one of these is a change
#: of its own, which then drops its line here.
IO_MODULE = "reconciler"
NAMED_BEFORE_THE_RULE = {
    "talosoperation": "executor",
    "releasecheck": "check",
    "recorder": "recorder",
    "autopatch": "runner",
    "declarative": "starting",
}

#: Packages that kopf does not run: another controller calls them (the TalosCluster
#: controller starts auto-patch and declarative operations). No wiring of their own.
CALLED_BY_ANOTHER = {"autopatch", "declarative"}

PURE = "The controllers' and the webhook's pure decisions import neither kopf nor an API client"
WIRING_ONLY = "Only the operator imports the kopf wiring"
ONE_PACKAGE = "One package per kind of behaviour"


def packages() -> list[str]:
    return sorted(p.name for p in CONTROLLERS.iterdir() if (p / "__init__.py").is_file())


def wired() -> list[str]:
    return [name for name in packages() if (CONTROLLERS / name / "wiring.py").is_file()]


def contracts() -> list[dict[str, Any]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found: list[dict[str, Any]] = data["tool"]["importlinter"]["contracts"]
    return found


def contract(name_starts: str) -> dict[str, Any]:
    matches = [c for c in contracts() if c["name"].startswith(name_starts)]
    assert len(matches) == 1, f"no single contract named {name_starts!r}"
    return matches[0]


def package_contract(package: str) -> dict[str, Any]:
    container = f"ichor.controller.{package}"
    matches = [c for c in contracts() if c.get("containers") == [container]]
    assert len(matches) == 1, f"{container} has no layers contract of its own"
    return matches[0]


def layer_modules(layer: str) -> set[str]:
    return {part.strip().strip("()") for part in layer.split("|")}


def modules_of(package: str) -> set[str]:
    return {p.stem for p in (CONTROLLERS / package).glob("*.py") if p.stem != "__init__"}


def io_module(package: str) -> str:
    return NAMED_BEFORE_THE_RULE.get(package, IO_MODULE)


def registered_in_operator() -> set[str]:
    """The controller packages whose ``wiring.register`` ``build_registry`` calls."""
    tree = ast.parse((ROOT / "ichor" / "operator.py").read_text())
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ichor.controller."):
            for alias in node.names:
                if alias.name == "wiring":
                    aliases[alias.asname or alias.name] = (node.module or "").split(".")[2]
    build = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "build_registry"
    )
    called: set[str] = set()
    for node in ast.walk(build):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in aliases
        ):
            called.add(aliases[node.func.value.id])
    return called


def test_every_controller_package_is_wired_or_called_by_another() -> None:
    assert set(packages()) == set(wired()) | CALLED_BY_ANOTHER
    assert not set(wired()) & CALLED_BY_ANOTHER


def test_the_operator_registers_every_wired_package() -> None:
    assert registered_in_operator() == set(wired())


@pytest.mark.parametrize("package", packages())
def test_the_io_module_follows_the_naming_rule(package: str) -> None:
    assert io_module(package) in modules_of(package), (
        f"ichor/controller/{package}/ has no {io_module(package)}.py: the I/O module of a "
        f"controller package is {IO_MODULE}.py (docs/development.md, Adding a controller)"
    )


def test_the_rule_has_no_new_exception() -> None:
    # Only packages that predate the rule; each still needs its exception.
    assert all(IO_MODULE not in modules_of(p) for p in NAMED_BEFORE_THE_RULE)
    assert len(NAMED_BEFORE_THE_RULE) <= 5


@pytest.mark.parametrize("package", wired())
def test_the_package_contract_layers_wiring_over_io_over_pure(package: str) -> None:
    layers = package_contract(package)["layers"]
    assert layers[0] == "wiring"
    assert io_module(package) in layer_modules(layers[1])
    named = set().union(*(layer_modules(layer) for layer in layers))
    assert named == modules_of(package), "every module of the package sits in one layer"


@pytest.mark.parametrize("package", wired())
def test_the_pure_layers_are_in_the_pure_contract(package: str) -> None:
    pure = set(contract(PURE)["source_modules"])
    for layer in package_contract(package)["layers"][2:]:
        for module in layer_modules(layer):
            assert f"ichor.controller.{package}.{module}" in pure, module


@pytest.mark.parametrize("package", wired())
def test_only_the_operator_imports_the_wiring(package: str) -> None:
    only = contract(WIRING_ONLY)
    assert f"ichor.controller.{package}.{io_module(package)}" in only["source_modules"]
    assert f"ichor.controller.{package}.wiring" in only["forbidden_modules"]


@pytest.mark.parametrize("package", packages())
def test_the_package_is_a_layer_of_the_controllers(package: str) -> None:
    layers = contract(ONE_PACKAGE)["layers"]
    assert any(package in layer_modules(layer) for layer in layers)


def test_the_recipe_names_what_this_test_checks() -> None:
    text = RECIPE.read_text()
    section = text.split("## Adding a controller", 1)[1].split("\n## ", 1)[0]
    section = " ".join(section.split())
    for part in ("wiring.py", f"{IO_MODULE}.py", "build_registry", PURE, WIRING_ONLY, ONE_PACKAGE):
        assert part in section, part
    for package, module in NAMED_BEFORE_THE_RULE.items():
        assert f"`{package}/{module}.py`" in section
