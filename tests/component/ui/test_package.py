"""The plugin's archive, as Headlamp's plugin manager installs it from Artifact Hub:
one folder holding main.js and package.json (pluginctl strips that folder), its sha256
in the manifest's ``headlamp/plugin/archive-checksum``, and the same bytes on every build
of the same tree, so the committed artifacthub-pkg.yml describes this tree."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.component.ui.conftest import missing_parts
from tests.harness import headlamp

pytestmark = pytest.mark.component


def package(out: Path) -> dict[str, str]:
    result = subprocess.run(
        ["node", "scripts/package.mjs", str(out)],
        cwd=headlamp.PLUGIN, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    answer: dict[str, str] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def test_the_archive_is_what_headlamp_installs_and_the_manifest_names_its_checksum(
    tmp_path: Path,
) -> None:
    missing = [m for m in missing_parts() if "main.js" in m or m.startswith("node ")]
    if missing:
        pytest.fail(f"packaging needs {', '.join(missing)}: run `make ui`", pytrace=False)
    first, second = package(tmp_path / "a"), package(tmp_path / "b")
    archive = Path(first["archive"])
    data = archive.read_bytes()
    assert hashlib.sha256(data).hexdigest() == first["sha256"]
    assert Path(second["archive"]).read_bytes() == data, "the archive is not reproducible"
    sha_file = archive.with_name(archive.name + ".sha256").read_text()
    assert sha_file == f"{first['sha256']}  {archive.name}\n"

    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["ichor", "ichor/main.js", "ichor/package.json"]
        assert all(m.uid == 0 and m.gid == 0 and m.mtime == 0 for m in members.values())
        main = tar.extractfile("ichor/main.js")
        assert main is not None
        assert main.read() == (headlamp.PLUGIN / "dist" / "main.js").read_bytes()
        info = tar.extractfile("ichor/package.json")
        assert info is not None
        package_json = json.loads(info.read())
    # Headlamp runs a plugin only when its tooling version is >= 0.8.0-alpha.3
    tooling = package_json["devDependencies"]["@kinvolk/headlamp-plugin"].lstrip("^~")
    assert tuple(int(part) for part in tooling.split(".")[:2]) >= (0, 8)

    manifest = yaml.safe_load(Path(first["manifest"]).read_text())
    annotations = manifest["annotations"]
    assert annotations["headlamp/plugin/archive-checksum"] == f"SHA256:{first['sha256']}"
    assert annotations["headlamp/plugin/archive-url"].endswith(f"/{archive.name}")
    assert manifest["version"] == package_json["version"]
    assert manifest["name"] == package_json["name"]

    committed = yaml.safe_load((headlamp.PLUGIN / "artifacthub-pkg.yml").read_text())
    assert committed["annotations"] == annotations, (
        "ui/headlamp/artifacthub-pkg.yml does not describe this tree's plugin: "
        "run `make ui-package` and commit it"
    )
