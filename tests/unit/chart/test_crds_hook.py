"""``python -m ichor.crds``, the chart's CRD upgrade hook, without an API server: what it
reads, when it keeps a newer CRD, and what it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ichor import crds

ROOT = Path(__file__).resolve().parents[3]


def _copy(tmp_path: Path) -> Path:
    for path in (ROOT / "crds").glob("*.yaml"):
        (tmp_path / path.name).write_text(path.read_text())
    return tmp_path


def test_it_reads_the_three_crds_of_the_repository() -> None:
    names = sorted(body["metadata"]["name"] for body in crds.read(ROOT / "crds"))
    assert names == sorted(crds.NAMES)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"kind": "ConfigMap"}, "is not a CustomResourceDefinition"),
        ({"metadata": {"name": "certificates.cert-manager.io"}}, "not one of Ichor's"),
    ],
)
def test_a_file_that_is_not_one_of_ichors_crds_is_refused(
    tmp_path: Path, change: dict[str, Any], words: str
) -> None:
    directory = _copy(tmp_path)
    first = sorted(directory.glob("*.yaml"))[0]
    body = {**yaml.safe_load(first.read_text()), **change}
    first.write_text(yaml.safe_dump(body))
    with pytest.raises(crds.Refused, match=words):
        crds.read(directory)


def test_a_missing_crd_file_is_refused(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    sorted(directory.glob("*.yaml"))[0].unlink()
    with pytest.raises(crds.Refused, match="holds 2 of Ichor's 3 CRDs"):
        crds.read(directory)


@pytest.mark.parametrize(
    ("theirs", "ours", "kept"),
    [
        ("0.3.0", "0.2.0", "0.3.0"),
        ("0.2.0", "0.2.0", None),
        ("0.1.0", "0.2.0", None),
        (None, "0.2.0", None),  # applied by helm's crds/ or by hand: moved forward
        ("not-a-version", "0.2.0", None),
        ("1.0.0-rc.1", "0.9.0", "1.0.0-rc.1"),
    ],
)
def test_a_crd_a_newer_chart_applied_is_kept(
    theirs: str | None, ours: str, kept: str | None
) -> None:
    annotations = {crds.CHART_VERSION: theirs} if theirs else {}
    existing = {"metadata": {"name": "x", "annotations": annotations}}
    assert crds.newer_in_cluster(existing, ours) == kept


def test_the_applied_crd_names_the_chart_and_keeps_its_own_annotations() -> None:
    body = {"metadata": {"name": "x", "annotations": {"a": "b"}}, "spec": {}}
    stamped = crds.stamped(body, "0.2.0")
    assert stamped["metadata"]["annotations"] == {"a": "b", crds.CHART_VERSION: "0.2.0"}
    assert body["metadata"]["annotations"] == {"a": "b"}  # the file's body is not changed


def test_established_reads_the_condition() -> None:
    assert crds.established({"status": {"conditions": [{"type": "Established", "status": "True"}]}})
    assert not crds.established(
        {"status": {"conditions": [{"type": "Established", "status": "False"}]}}
    )
    assert not crds.established({})


async def test_a_crd_that_is_not_installed_is_refused_not_created(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def absent(api_client: object, name: str) -> None:
        return None

    monkeypatch.setattr(crds, "_get", absent)
    body = crds.read(ROOT / "crds")[0]
    with pytest.raises(crds.Refused, match="is not installed, and this Job only updates"):
        await crds.apply_one(object(), body, chart_version="0.2.0")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "code"),
    [([], 2), (["/x"], 2), (["--chart-version", "0.2.0"], 2), (["--chart-version", "x", "/d"], 1)],
)
def test_usage_and_a_bad_chart_version_are_said(argv: list[str], code: int) -> None:
    assert crds.main(argv) == code
