"""The Dockerfile is multi-stage on a base pinned by digest and runs as a non-root user;
`make image` tags what the chart's default values pull."""

from __future__ import annotations

import re
import subprocess
import tomllib

import yaml

from tests.unit.chart.apicalls import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_base_is_an_argument_pinned_by_digest() -> None:
    default = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert default is not None
    assert re.fullmatch(r"\S+:\S+@sha256:[0-9a-f]{64}", default[1])
    stages = re.findall(r"^FROM (\S+)", DOCKERFILE, re.MULTILINE)
    assert stages == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]


def test_final_stage_runs_as_a_numeric_non_root_user() -> None:
    final = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    users = re.findall(r"^USER (\d+):(\d+)$", final, re.MULTILINE)
    assert users
    assert all(int(uid) != 0 and int(gid) != 0 for uid, gid in users)
    assert "COPY --from=build" in final
    assert "pip install" not in final


def test_final_stage_names_its_user() -> None:
    """kopf asks the user's name when POD_ID is unset: uid 65532 needs a passwd entry."""
    final = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    (uid, gid) = re.findall(r"^USER (\d+):(\d+)$", final, re.MULTILINE)[-1]
    assert f"ichor:x:{uid}:{gid}:" in final
    assert f"ichor:x:{gid}:" in final


def test_make_image_tags_the_charts_default_image() -> None:
    # What `make image` runs, as make expands it (the tag comes from pyproject.toml).
    recipe = subprocess.run(
        ["make", "-s", "-n", "-C", str(ROOT), "image"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    built = re.search(r"^IMAGE=(\S+):(\S+) bash hack/image.sh build$", recipe, re.MULTILINE)
    assert built is not None, recipe
    chart = ROOT / "charts" / "ichor"
    values = yaml.safe_load((chart / "values.yaml").read_text())
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert values["image"]["repository"] == built[1]
    assert values["image"]["tag"] == ""
    assert meta["appVersion"] == version
    assert built[2] == version
