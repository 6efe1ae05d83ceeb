"""tests/gotools/compat.json is ichor.release's table, no more and no less.

The Go webhook of tests/gotools decides from that file; if it drifted from the Python
table, the benchmark and the differential test would compare two different rules.
Checked both ways: the committed text is what ``make compat-json`` writes now, and the
values the text stands for are the Python values.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ichor.release import compat, machinery_rows
from tests.support import compat_export

STEP = "run `make compat-json` and commit tests/gotools/compat.json"


def test_the_committed_export_is_what_make_compat_json_writes_now() -> None:
    committed = compat_export.EXPORT.read_text()
    assert committed == compat_export.render(), (
        f"{compat_export.EXPORT} differs from ichor/release's compatibility table: {STEP}"
    )


def test_the_committed_export_stands_for_exactly_the_python_tables() -> None:
    rows, talos, cilium = compat_export.tables(compat_export.EXPORT.read_text())
    assert rows == machinery_rows.ROWS, STEP
    assert talos == dict(compat.TALOS_KUBERNETES), STEP
    assert cilium == dict(compat.CILIUM_KUBERNETES), STEP


def _edited(edit: Any) -> str:
    data = compat_export.export()
    edit(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            lambda d: d["cilium_kubernetes"][-1]["high"].__setitem__(
                1, d["cilium_kubernetes"][-1]["high"][1] + 1
            ),
            id="cilium-high",
        ),
        pytest.param(lambda d: d["talos_kubernetes"][0]["low"].__setitem__(1, 32), id="talos-low"),
        pytest.param(
            lambda d: d["machinery"]["rows"][-1].__setitem__(
                "max_kubernetes", d["machinery"]["rows"][-1]["max_kubernetes"] + "9"
            ),
            id="machinery-max",
        ),
        pytest.param(lambda d: d["machinery"]["rows"].pop(), id="row-dropped"),
        pytest.param(lambda d: d["cilium_kubernetes"].pop(0), id="cilium-minor-dropped"),
    ],
)
def test_a_changed_number_is_seen_as_a_drift(edit: Any) -> None:
    """The comparison above can fail: one edited number makes the file another table."""
    rows, talos, cilium = compat_export.tables(_edited(edit))
    assert (rows, talos, cilium) != (
        machinery_rows.ROWS,
        dict(compat.TALOS_KUBERNETES),
        dict(compat.CILIUM_KUBERNETES),
    )


def test_a_row_field_the_export_does_not_carry_is_an_error() -> None:
    """A field added to MachineryRow (or one the file invents) is not silently dropped."""

    def extra(d: dict[str, Any]) -> None:
        d["machinery"]["rows"][0]["max_host"] = "1.4.0"

    def missing(d: dict[str, Any]) -> None:
        del d["machinery"]["rows"][0]["min_kubernetes"]

    for edit in (extra, missing):
        with pytest.raises(TypeError):
            compat_export.tables(_edited(edit))


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda d: d.__setitem__("format", 2), id="format"),
        pytest.param(lambda d: d["talos_kubernetes"][0].__setitem__("talos", [1]), id="short"),
        pytest.param(
            lambda d: d["talos_kubernetes"][0].__setitem__("talos", ["1", "14"]), id="text"
        ),
        pytest.param(lambda d: d["talos_kubernetes"][0].__setitem__("talos", [1, True]), id="bool"),
    ],
)
def test_a_file_of_another_shape_is_refused(edit: Any) -> None:
    with pytest.raises(ValueError, match=r"is not"):
        compat_export.tables(_edited(edit))


def test_every_pair_minor_the_rule_knows_is_in_the_export() -> None:
    """What the Go side derives as known (rows and ranges) covers the Python side's."""
    data = compat_export.export()
    known: set[tuple[int, int]] = set()
    for entry in data["talos_kubernetes"] + data["cilium_kubernetes"]:
        known.update((1, m) for m in range(entry["low"][1], entry["high"][1] + 1))
    for row in data["machinery"]["rows"]:
        low = tuple(int(p) for p in row["min_kubernetes"].split("."))
        high = tuple(int(p) for p in row["max_kubernetes"].split("."))
        last = high[1] if high[2] > 0 else high[1] - 1
        known.update((1, m) for m in range(low[1], last + 1))
    assert known == set(compat.known_kubernetes_minors())
