"""charts/ichor/README.md, rendered from the chart's values.schema.json and values.yaml.

Every property of the schema is a row: its key, its type, its default (from values.yaml;
a key only the schema knows has none) and its description, which the schema must hold.
``make chart-readme`` (``python -m tests.support.chart_readme``) writes the page and
tests/unit/chart keeps it equal to this rendering, so the page a user reads on Artifact
Hub or in the packaged chart says what the schema checks.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "ichor"
SCHEMA = CHART / "values.schema.json"
VALUES = CHART / "values.yaml"
PAGE = CHART / "README.md"
#: A default longer than this is shown as "see values.yaml".
LONGEST_DEFAULT = 80

HEAD = """\
# The Ichor chart

Ichor's upgrade operator for Talos Linux clusters: the CRDs, the operator with its
least-privilege ClusterRole, the admission webhook (`failurePolicy: Fail`), its
NetworkPolicies and the `IchorInstallation` singleton.

```sh
helm install ichor charts/ichor --namespace ichor-system --create-namespace
```

How to install, the certificates, mutual TLS, mirrors and air gaps:
[docs/install.md](../../docs/install.md); every setting of the operator:
[docs/configuration.md](../../docs/configuration.md).

## Values

`values.schema.json` checks every value: a misspelt key or a wrong type fails `helm
install` instead of being ignored. This table is written from the schema's descriptions
and `values.yaml`'s defaults by `make chart-readme`; do not edit it by hand.
"""


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    description: str


def properties(node: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property of the schema under ``node``, by its dotted key (``a[].b`` for a
    property of a list's items), parents before children."""
    for key, child in (node.get("properties") or {}).items():
        path = f"{prefix}.{key}" if prefix else key
        yield path, child
        yield from properties(child, path)
    items = node.get("items")
    if isinstance(items, Mapping) and items.get("properties"):
        yield from properties(items, f"{prefix}[]")


def _type(node: Mapping[str, Any]) -> str:
    if "enum" in node:
        return " \\| ".join(json.dumps(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    kind = node.get("type", "any")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind == "array":
        items = node.get("items") or {}
        return f"list of {items.get('type', 'any')}"
    return str(kind)


_MISSING = object()


def _lookup(values: Any, key: str) -> Any:
    for part in key.split("."):
        if part.endswith("[]") or not isinstance(values, Mapping) or part not in values:
            return _MISSING
        values = values[part]
    return values


def _default(values: Mapping[str, Any], key: str, node: Mapping[str, Any]) -> str:
    found = _lookup(values, key)
    if found is _MISSING:
        return ""
    if isinstance(found, Mapping) and found and node.get("properties"):
        # its keys have rows of their own
        return ""
    text = json.dumps(found)
    if len(text) > LONGEST_DEFAULT:
        return "see values.yaml"
    return f"`{text}`"


def rows() -> list[Row]:
    schema = json.loads(SCHEMA.read_text())
    values = yaml.safe_load(VALUES.read_text()) or {}
    return [
        Row(
            key=key,
            type=_type(node),
            default=_default(values, key, node),
            description=str(node.get("description", "")),
        )
        for key, node in properties(schema)
    ]


def render() -> str:
    out = [HEAD, "| key | type | default | description |", "| --- | --- | --- | --- |"]
    for row in rows():
        description = row.description.replace("|", "\\|")
        out.append(f"| `{row.key}` | {row.type} | {row.default} | {description} |")
    return "\n".join(out) + "\n"


def write(path: Path = PAGE) -> None:
    path.write_text(render())


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
