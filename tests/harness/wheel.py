"""The wheel as it ships, and an environment holding its runtime dependencies alone.

``build(out=...)`` builds the wheel from a copy of what the Dockerfile copies
(``pyproject.toml``, ``README.md``, ``ichor/``), so nothing else of the checkout (and no
stale ``build/`` folder) can get into it. ``runtime_deps()`` is a folder with the
dependencies the project declares for running, nothing of ``[dev]``: ``make runtime-deps``
(``python -m tests.harness.wheel deps``) installs it once from PyPI into
``$ICHOR_CACHE/runtime-deps/<key>``, the key naming the Python and the dependency list.
``fresh_venv(...)`` makes a new virtual environment with the wheel installed and that
folder on its path, and ``import_all(...)`` imports every module of the package in it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests.harness import binaries, checkout

#: What the image build copies (the Dockerfile's COPY lines, .dockerignore's allow list).
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "ichor")


def declared_dependencies() -> list[str]:
    """``[project].dependencies`` of pyproject.toml, as written."""
    project = tomllib.loads((checkout.ROOT / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _key(dependencies: list[str]) -> str:
    text = "\n".join([sys.version.split()[0], *sorted(dependencies)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def runtime_deps_dir(dependencies: list[str] | None = None) -> Path:
    given = declared_dependencies() if dependencies is None else dependencies
    return binaries.cache_dir() / "runtime-deps" / _key(given)


def runtime_deps() -> Path:
    """The cached folder of runtime dependencies; raises when ``make runtime-deps`` has not
    made the one of the current dependency list."""
    folder = runtime_deps_dir()
    if not (folder / ".complete").is_file():
        raise binaries.MissingBinaryError(
            f"the runtime dependencies are not installed (looked for {folder}): run "
            "`make runtime-deps`; it installs pyproject's [project].dependencies once "
            "from PyPI and is reused until they change"
        )
    return folder


def install_runtime_deps() -> Path:
    """Make ``runtime_deps_dir()`` (pip install --target), unless it is already there."""
    folder = runtime_deps_dir()
    if (folder / ".complete").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-compile",
                "--target",
                str(partial),
                *declared_dependencies(),
            ],
            check=True,
        )
        (partial / ".complete").write_text(json.dumps(declared_dependencies()) + "\n")
        try:
            partial.rename(folder)
        except OSError:
            if not (folder / ".complete").is_file():  # not another run's finished copy
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    print(f"runtime dependencies in {folder} ({time.monotonic() - began:.0f} s)")
    return folder


def build(*, out: Path, sources: Path | None = None) -> Path:
    """Build the wheel into ``out`` from a copy of ``SOURCES`` (of ``sources``, else the
    checkout); returns its path."""
    root = sources if sources is not None else checkout.ROOT
    with tempfile.TemporaryDirectory(prefix="ichor-wheel-src-") as tmp:
        tree = Path(tmp)
        for name in SOURCES:
            source = root / name
            if source.is_dir():
                shutil.copytree(
                    source, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                )
            else:
                shutil.copy2(source, tree / name)
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-build-isolation",
                "--wheel-dir",
                str(out),
                str(tree),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    (wheel,) = out.glob("ichor-*.whl")
    return wheel


def members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def requires(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` lines without an extra (what running it needs)."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    found = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            found.append(line.removeprefix("Requires-Dist:").strip())
    return found


@dataclass(frozen=True)
class Venv:
    path: Path
    python: Path


def fresh_venv(*, wheel: Path, where: Path, deps: Path) -> Venv:
    """A new venv (no pip of its own) with ``wheel`` installed and ``deps`` on its path."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-index",
            "--no-compile",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    purelib = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "ichor-runtime-deps.pth").write_text(f"{deps}\n")
    return Venv(path=where, python=python)


#: Run in the fresh venv: import every module of the package, report what got loaded.
_IMPORT_ALL = """
import importlib, json, pkgutil, sys
import ichor
names = ["ichor"]
for info in pkgutil.walk_packages(ichor.__path__, "ichor."):
    names.append(info.name)
failed = {}
for name in names:
    try:
        importlib.import_module(name)
    except BaseException as error:
        failed[name] = f"{type(error).__name__}: {error}"
print(json.dumps({
    "file": ichor.__file__,
    "modules": names,
    "failed": failed,
    "loaded": sorted({m.split(".")[0] for m in sys.modules}),
    "path": sys.path,
}))
"""


@dataclass(frozen=True)
class Imported:
    file: str
    modules: list[str]
    failed: dict[str, str]
    loaded: list[str]
    path: list[str]
    seconds: float


def import_all(venv: Venv) -> Imported:
    """Import every module of ``ichor`` in ``venv``, isolated from this process's paths
    (``-I``: no PYTHONPATH, no user site, not the working directory)."""
    began = time.monotonic()
    result = subprocess.run(
        [str(venv.python), "-I", "-c", _IMPORT_ALL],
        check=False,
        capture_output=True,
        text=True,
        cwd=venv.path,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(venv.path)},
        timeout=300,
    )
    if result.returncode != 0:
        raise RuntimeError(f"importing ichor in {venv.path} failed:\n{result.stderr}")
    found = json.loads(result.stdout)
    return Imported(**found, seconds=time.monotonic() - began)


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.wheel")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("deps", help="install (or reuse) the runtime dependencies folder")
    sub.add_parser("where", help="print the runtime dependencies folder")
    args = parser.parse_args()
    if args.command == "deps":
        print(install_runtime_deps())
    else:
        print(runtime_deps_dir())


if __name__ == "__main__":
    _main()
