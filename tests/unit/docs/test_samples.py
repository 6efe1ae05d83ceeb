"""The ``kubectl get`` samples of the docs show the columns the CRDs print.

A printer column added to a CRD (``NEXT-WINDOW``, ``ACCOUNT``) must show in the sample of
its kind, or the page shows a table nobody will see: the header line after each
``$ kubectl get <plural> [-o wide]`` is compared with the CRD's columns (``-o wide`` adds
those of priority 1).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
_COMMAND = re.compile(
    r"^\$ kubectl get (talosclusters|talosoperations)\b([^\n#]*)\n(NAME .*)$", re.M
)


@functools.cache
def _printed(plural: str) -> list[dict[str, object]]:
    crd = yaml.safe_load((ROOT / "crds" / f"{plural}.ichor.dev.yaml").read_text())
    printed: list[dict[str, object]] = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    return printed


def columns(plural: str, *, wide: bool) -> list[str]:
    printed = _printed(plural)
    shown = [c for c in printed if wide or c.get("priority", 0) == 0]
    return ["NAME"] + [str(c["name"]).upper() for c in shown]


def samples() -> list[tuple[str, str, bool, list[str]]]:
    found = []
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        for plural, flags, header in _COMMAND.findall(page.read_text()):
            found.append((page.name, plural, "-o wide" in flags, header.split()))
    return found


def test_the_docs_have_samples_of_both_kinds_wide_and_not() -> None:
    shown = {(plural, wide) for _, plural, wide, _ in samples()}
    assert ("talosclusters", True) in shown
    assert ("talosoperations", False) in shown


@pytest.mark.parametrize(("page", "plural", "wide", "header"), samples(), ids=lambda v: str(v)[:40])
def test_a_sample_shows_every_column_the_crd_prints(
    page: str, plural: str, wide: bool, header: list[str]
) -> None:
    assert header == columns(plural, wide=wide), f"{page}: kubectl get {plural} sample"
