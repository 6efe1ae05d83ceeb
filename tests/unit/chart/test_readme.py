"""Every value of the chart says what it is, and charts/ichor/README.md says it too.

The schema holds a description for each property (values.yaml's own keys and those of
lists' items); the README is their rendering with values.yaml's defaults, written by
``make chart-readme`` and equal to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support import chart_readme


def _keys(values: object, prefix: str = "") -> list[str]:
    found = []
    if isinstance(values, dict):
        for key, value in values.items():
            path = f"{prefix}.{key}" if prefix else key
            found.append(path)
            if key not in ("autoPatch",):  # a free object the schema describes by its own keys
                found += _keys(value, path)
    return found


def test_every_property_of_the_schema_has_a_description() -> None:
    schema = json.loads(chart_readme.SCHEMA.read_text())
    keys = [key for key, _ in chart_readme.properties(schema)]
    assert len(keys) >= 130
    missing = [
        key
        for key, node in chart_readme.properties(schema)
        if not str(node.get("description", "")).strip()
    ]
    assert missing == [], f"values.schema.json: describe {missing}, then run `make chart-readme`"


def test_every_key_of_values_yaml_is_a_property_of_the_schema() -> None:
    schema = json.loads(chart_readme.SCHEMA.read_text())
    known = {key for key, _ in chart_readme.properties(schema)}
    values = yaml.safe_load(chart_readme.VALUES.read_text())
    free = ("annotations", "labels", "podAnnotations", "podLabels", "nodeSelector", "affinity")
    unknown = [
        key
        for key in _keys(values)
        if key not in known
        and not any(f".{f}." in f".{key}" for f in free)
        and not key.startswith(("resources.", "podSecurityContext.", "securityContext."))
    ]
    assert unknown == []


def test_the_readme_is_the_schemas_rendering() -> None:
    assert chart_readme.PAGE.read_text() == chart_readme.render(), (
        "charts/ichor/README.md differs from the chart's values schema: run `make chart-readme`"
    )


def test_a_changed_description_or_default_is_seen_as_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = chart_readme.render()
    assert "| `replicas` | integer | `1` |" in page
    assert '| `executor.ciliumChart` | string | `""` | Air gaps:' in page
    assert "| `securityContext.privileged` | false |" in page
    schema = json.loads(chart_readme.SCHEMA.read_text())
    schema["properties"]["replicas"]["description"] = "Something else."
    doctored = tmp_path / "values.schema.json"
    doctored.write_text(json.dumps(schema))
    monkeypatch.setattr(chart_readme, "SCHEMA", doctored)
    assert chart_readme.render() != chart_readme.PAGE.read_text()
    values = tmp_path / "values.yaml"
    values.write_text(chart_readme.VALUES.read_text().replace("replicas: 1", "replicas: 2"))
    monkeypatch.setattr(chart_readme, "SCHEMA", chart_readme.CHART / "values.schema.json")
    monkeypatch.setattr(chart_readme, "VALUES", values)
    assert "| `replicas` | integer | `2` |" in chart_readme.render()
