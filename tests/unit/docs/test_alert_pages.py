"""Each alert of the chart's rules has its section in docs/metrics.md, and its
``runbook_url`` leads there: whoever is paged reads what it means and what to look at."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.unit.docs.test_links import anchors, slug

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "charts" / "ichor" / "rules" / "ichor.rules.yaml"
PAGE = ROOT / "docs" / "metrics.md"
BASE = "https://github.com/ichor-dev/ichor/blob/main/docs/metrics.md#"


def test_every_alert_has_a_section_and_its_runbook_url_points_at_it() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert rules
    headings = anchors(PAGE)
    for rule in rules:
        name = rule["alert"]
        assert slug(name) in headings, f"docs/metrics.md has no section ### {name}"
        assert rule["annotations"]["runbook_url"] == BASE + slug(name)
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["description"]
