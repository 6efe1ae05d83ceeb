"""The compatibility table as JSON, for the Go programs that decide from the same data.

``tests/gotools/compat.json`` holds ``ichor.release.compat``'s two tables
(``TALOS_KUBERNETES``, ``CILIUM_KUBERNETES``) and the machinery rows its pair rule reads
(``ichor.release.machinery_rows``), every field with its source. The Go admission webhook
of tests/gotools reads it at start, so it refuses what Ichor refuses without a copy of
the numbers. ``make compat-json`` writes it (hack/compat_json.py); a unit test fails when
the committed file and the Python tables differ, in either direction (``render`` is not
the file, or ``tables`` of the file is not the Python data).

This module only converts: it holds no number of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ichor.release import compat, machinery_rows
from ichor.release.compat import KubernetesRange
from ichor.release.machinery_rows import MachineryRow

__all__ = ["EXPORT", "FORMAT", "Tables", "export", "render", "tables"]

EXPORT = Path(__file__).resolve().parents[1] / "gotools" / "compat.json"
#: The shape of the file; the Go reader refuses another (tests/gotools/gowebhook/table.go).
FORMAT = 1

Minor = tuple[int, int]
Tables = tuple[
    tuple[MachineryRow, ...],
    Mapping[Minor, KubernetesRange],
    Mapping[Minor, KubernetesRange],
]


def _range(key: str, minor: Minor, entry: KubernetesRange) -> dict[str, Any]:
    return {
        key: list(minor),
        "low": list(entry.low),
        "high": list(entry.high),
        "source": entry.source,
    }


def export() -> dict[str, Any]:
    """The tables as JSON values, rows in key order."""
    rows = []
    for row in machinery_rows.ROWS:
        fields = asdict(row)
        fields["talos"] = list(row.talos)
        fields["denied_hosts"] = list(row.denied_hosts)
        rows.append(fields)
    return {
        "format": FORMAT,
        "generated": (
            "by `make compat-json` from ichor.release.compat and ichor.release.machinery_rows; "
            "do not edit"
        ),
        "machinery": {"snapshot": machinery_rows.SNAPSHOT, "rows": rows},
        "talos_kubernetes": [
            _range("talos", minor, entry)
            for minor, entry in sorted(compat.TALOS_KUBERNETES.items())
        ],
        "cilium_kubernetes": [
            _range("cilium", minor, entry)
            for minor, entry in sorted(compat.CILIUM_KUBERNETES.items())
        ],
    }


def render() -> str:
    """The file's text: ``export()`` with a stable layout."""
    return json.dumps(export(), indent=2) + "\n"


def _minor(value: object) -> Minor:
    if not (isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value)):
        raise ValueError(f"{value!r} is not a [major, minor] pair")
    return (value[0], value[1])


def tables(text: str) -> Tables:
    """The Python values a file's text stands for (rows, Talos table, Cilium table).

    Raises ``ValueError`` (or ``TypeError`` for a row with a missing or extra field) on a
    text that is not this export.
    """
    data = json.loads(text)
    if data.get("format") != FORMAT:
        raise ValueError(f"format {data.get('format')!r} is not {FORMAT}")
    rows = tuple(
        MachineryRow(
            **{
                **row,
                "talos": _minor(row["talos"]),
                "denied_hosts": tuple(row["denied_hosts"]),
            }
        )
        for row in data["machinery"]["rows"]
    )

    def ranges(key: str) -> dict[Minor, KubernetesRange]:
        return {
            _minor(entry[key]): KubernetesRange(
                low=_minor(entry["low"]), high=_minor(entry["high"]), source=entry["source"]
            )
            for entry in data[key + "_kubernetes"]
        }

    return rows, ranges("talos"), ranges("cilium")
