"""docs/configuration.md lists every variable the settings read, with its default and
meaning, and nothing else; the chart sets only variables the settings know."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from ichor import settings
from tests.support import configuration

ROOT = Path(__file__).resolve().parents[3]
DEPLOYMENT = ROOT / "charts" / "ichor" / "templates" / "deployment.yaml"
_NAME = re.compile(
    r"\b(ICHOR_[A-Z0-9_]+|KUBECONFIG|POD_ID|MALLOC_MMAP_THRESHOLD_|KUBERNETES_SERVICE_[A-Z]+)\b"
)


def _names(cls: type[object]) -> list[str]:
    found: list[str] = []
    for item in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "section" in item.metadata:
            found += _names(item.metadata["section"])
        elif "env" in item.metadata:
            found.append(item.metadata["env"])
    return found


OPERATOR = _names(settings.Settings)
CLI = _names(settings.CliSettings)


def test_the_page_holds_the_tables_the_settings_render() -> None:
    page = configuration.PAGE.read_text()
    assert configuration.generated(page), "the page lost its generated part's markers"
    assert configuration.generated(page) == configuration.render(), (
        "docs/configuration.md differs from ichor/settings.py: run `make configuration`"
    )


def test_every_section_of_the_settings_is_on_the_page() -> None:
    sections = {
        item.metadata["section"]
        for item in dataclasses.fields(settings.Settings)
        if "section" in item.metadata
    }
    sections |= {
        item.metadata["section"]
        for item in dataclasses.fields(settings.OperationSettings)
        if "section" in item.metadata
    }
    assert sections | {settings.Settings, settings.CliSettings} == set(configuration.SECTIONS)


def test_every_variable_has_a_meaning_and_one_field() -> None:
    for cls in configuration.SECTIONS:
        for variable in configuration.variables(cls):
            assert variable.meaning, f"{cls.__name__}.{variable.field} has no #: comment"
    assert len(OPERATOR) == len(set(OPERATOR))
    assert len(CLI) == len(set(CLI))


def test_the_page_names_no_variable_the_settings_do_not_read() -> None:
    named = set(_NAME.findall(configuration.PAGE.read_text()))
    assert named - set(OPERATOR) - set(CLI) == set()
    assert set(OPERATOR) | set(CLI) <= named


def test_the_chart_sets_only_variables_the_operator_reads() -> None:
    chart = set(re.findall(r"-\s+name:\s+([A-Z][A-Z0-9_]+)", DEPLOYMENT.read_text()))
    assert "ICHOR_WEBHOOK_CERT" in chart
    assert chart - set(OPERATOR) == set()


def test_a_changed_default_is_seen_as_drift() -> None:
    page = configuration.PAGE.read_text()
    doctored = page.replace("`9443`", "`9444`", 1)
    assert doctored != page
    assert configuration.generated(doctored) != configuration.render()


def test_every_field_says_what_it_means_also_those_no_variable_sets() -> None:
    """A field no variable sets is not on the page, so its ``#:`` comment is the only
    place a reader learns what it is."""
    for cls in configuration.SECTIONS:
        said = configuration.comments(cls)
        for item in dataclasses.fields(cls):
            if "section" not in item.metadata:
                assert said.get(item.name), f"{cls.__name__}.{item.name} has no #: comment"
