"""The wheel built once for the package tests, and the figures they print at the end."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness import binaries, wheel

_figures: list[str] = []


def figure(line: str) -> None:
    _figures.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _figures:
        terminalreporter.write_line(f"wheel: {line}")


@dataclass(frozen=True)
class Installed:
    file: Path
    venv: wheel.Venv
    imported: wheel.Imported


@pytest.fixture(scope="session")
def runtime_deps() -> Path:
    try:
        return wheel.runtime_deps()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory, runtime_deps: Path) -> Installed:
    began = time.monotonic()
    built = wheel.build(out=tmp_path_factory.mktemp("wheel"))
    built_at = time.monotonic()
    venv = wheel.fresh_venv(wheel=built, where=tmp_path_factory.mktemp("venv"), deps=runtime_deps)
    venv_at = time.monotonic()
    imported = wheel.import_all(venv)
    figure(
        f"{built.name} {built.stat().st_size / 1024:.0f} KiB, {len(wheel.members(built))} files;"
        f" built in {built_at - began:.1f} s, fresh venv in {venv_at - built_at:.1f} s,"
        f" {len(imported.modules)} modules imported in {imported.seconds:.1f} s"
    )
    return Installed(file=built, venv=venv, imported=imported)
