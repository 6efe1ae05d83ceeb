"""The key a built image is cached under (``hack/image.sh key``): it moves with every file
that goes into the image and with the base, and with nothing else.

The image test and the node tests of one run build the image once and reuse it by this
key; a key that missed a copied file would ship an image of older sources.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: What the key reads: the Dockerfile, .dockerignore and what the Dockerfile copies; the
#: script itself and a file it does not read come along to show they do not count.
_COPIED = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "LICENSE")


def _key(tree: Path, **env: str) -> str:
    result = subprocess.run(
        ["bash", str(tree / "hack" / "image.sh"), "key"],
        env={**os.environ, "IMAGE_BASE": "debian", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    key = result.stdout.strip()
    assert len(key) == 16, key
    assert set(key) <= set("0123456789abcdef"), key
    return key


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The image's sources and the script, copied (no byte code)."""
    copy = tmp_path / "tree"
    copy.mkdir()
    for name in _COPIED:
        shutil.copy2(ROOT / name, copy / name)
    shutil.copytree(ROOT / "ichor", copy / "ichor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "hack", copy / "hack")
    (copy / "tests").mkdir()
    (copy / "tests" / "test_x.py").write_text("x = 1\n")
    return copy


def test_the_key_is_the_same_for_the_same_sources_wherever_they_are(tree: Path) -> None:
    assert _key(tree) == _key(tree) == _key(ROOT)


@pytest.mark.parametrize(
    "change",
    [
        "edit a module",
        "add a module",
        "rename a module",
        "edit pyproject.toml",
        "edit README.md",
        "edit LICENSE",
        "edit the Dockerfile",
        "edit .dockerignore",
    ],
)
def test_every_file_that_goes_into_the_image_moves_the_key(tree: Path, change: str) -> None:
    before = _key(tree)
    operator = tree / "ichor" / "operator.py"
    match change:
        case "edit a module":
            operator.write_text(operator.read_text() + "\n# changed\n")
        case "add a module":
            (tree / "ichor" / "extra.py").write_text("")
        case "rename a module":
            operator.rename(tree / "ichor" / "operator2.py")
        case "edit pyproject.toml":
            path = tree / "pyproject.toml"
            path.write_text(path.read_text() + "\n")
        case "edit README.md":
            path = tree / "README.md"
            path.write_text(path.read_text() + "x")
        case "edit LICENSE":
            path = tree / "LICENSE"
            path.write_text(path.read_text() + "x")
        case "edit the Dockerfile":
            path = tree / "Dockerfile"
            path.write_text(path.read_text() + "\n# changed\n")
        case "edit .dockerignore":
            path = tree / ".dockerignore"
            path.write_text(path.read_text() + "!tests/\n")
    assert _key(tree) != before, change


def test_what_stays_out_of_the_image_leaves_the_key(tree: Path) -> None:
    before = _key(tree)
    cache = tree / "ichor" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "operator.cpython-311.pyc").write_bytes(b"\0" * 16)
    (tree / "ichor" / "api" / "stray.pyc").write_bytes(b"\0")
    (tree / "tests" / "test_x.py").write_text("x = 2\n")
    (tree / "hack" / "notes.txt").write_text("not copied\n")
    assert _key(tree) == before


def test_another_base_is_another_key(tree: Path) -> None:
    assert _key(tree) != _key(tree, IMAGE_BASE="localhost/some-base:1")
    assert _key(tree, IMAGE_BASE="localhost/some-base:1") != _key(
        tree, IMAGE_BASE="localhost/some-base:2"
    )
