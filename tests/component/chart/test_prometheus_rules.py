"""The chart's alerts and dashboard: promtool checks and tests the rules (series that fire
each alert and series that do not), the chart carries them as they are, and every metric
they name is one the operator serves (ichor.kube.metrics, docs/metrics.md).

promtool is built from Prometheus's Go module by ``make testenv`` (hack/testenv/promtool.sh).
The check that the operator really serves each name on its ``/metrics`` is
test_install.py's, against the operator the chart runs.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.component.chart import helm
from tests.harness import binaries
from tests.support import metrics_page

pytestmark = pytest.mark.component

HERE = Path(__file__).resolve().parent
RULES = helm.CHART / "rules" / "ichor.rules.yaml"
DASHBOARD = helm.CHART / "dashboards" / "ichor.json"
RULE_TESTS = HERE / "prometheus" / "ichor_test.yaml"
#: The alerts of docs/metrics.md.
ALERTS = {
    "IchorOperatorAbsent",
    "IchorOperationFailed",
    "IchorOperationRunningTooLong",
    "IchorReleaseCheckStale",
    "IchorWebhookErrors",
    "IchorWebhookSlow",
    "IchorClustersNotReady",
}
_NAME = re.compile(r"\bichor_[a-z0-9_]+")
_LABELS = re.compile(r"\b(?:by|on|without)\s*\(([^)]*)\)|\{([^}]*)\}")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        binary = binaries.find("promtool")
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, check=False, timeout=120
    )


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    found: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            found.extend(t["expr"] for t in panel.get("targets", []))
            walk(panel.get("panels", []))

    walk(json.loads(DASHBOARD.read_text())["panels"])
    return found


def named(exprs: list[str]) -> set[str]:
    """The metric families the expressions name (a histogram by its base name)."""
    by_series = {s: f.name for f in metrics_page.families() for s in f.series}
    found = set()
    for expr in exprs:
        for name in _NAME.findall(expr):
            found.add(by_series.get(name, name))
    return found


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout, result.stdout


def test_promtool_runs_the_rule_tests() -> None:
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_every_alert_has_a_test_that_fires_it_and_one_that_does_not() -> None:
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        for check in case.get("alert_rule_test", []):
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
    assert {rule["alert"] for rule in rules()} == ALERTS
    assert fired == ALERTS, f"no test fires {ALERTS - fired}"
    assert quiet == ALERTS, f"no test keeps {ALERTS - quiet} quiet"


def test_a_broken_expectation_fails_the_rule_tests(tmp_path: Path) -> None:
    """promtool test rules can fail: the same tests expecting nothing of a firing alert."""
    text = RULE_TESTS.read_text().replace(
        "../../../../charts/ichor/rules/ichor.rules.yaml", str(RULES)
    )
    tests = yaml.safe_load(text)
    firing = next(c for c in tests["tests"] if "past its deadline fires" in c["name"])
    for check in firing["alert_rule_test"]:
        check["exp_alerts"] = []
    broken = tmp_path / "broken_test.yaml"
    broken.write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", str(broken))
    assert result.returncode != 0, result.stdout
    assert "IchorOperationRunningTooLong" in result.stdout + result.stderr


def test_the_rules_and_the_dashboard_name_only_metrics_the_operator_serves() -> None:
    served = {f.name for f in metrics_page.families()}
    exprs = [rule["expr"] for rule in rules()] + dashboard_exprs()
    unknown = named(exprs) - served
    assert not unknown, f"named but not served by ichor.kube.metrics: {sorted(unknown)}"


def test_the_labels_the_rules_and_the_dashboard_group_by_are_the_metrics_labels() -> None:
    labels = {f.name: set(f.labels) for f in metrics_page.families()}
    # what Prometheus adds to every scraped series, and what a histogram adds
    known = {"le", "pod", "instance", "job", "namespace"}
    for expr in [rule["expr"] for rule in rules()] + dashboard_exprs():
        families = named([expr])
        allowed = known.union(*(labels[f] for f in families))
        for grouped, matched in _LABELS.findall(expr):
            used = [w.strip() for w in grouped.split(",") if w.strip()]
            used += [m.split("=")[0].strip(" !~") for m in matched.split(",") if "=" in m]
            assert set(used) <= allowed, f"{expr}: {set(used) - allowed} is no label of {families}"


def test_the_chart_carries_the_rules_as_they_are_and_only_when_asked(tmp_path: Path) -> None:
    off = helm.template()
    assert not [o for o in off if o["kind"] in ("PrometheusRule",)]
    assert not [
        o for o in off if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")
    ]
    on = helm.template(
        {
            "metrics": {
                "serviceMonitor": {"enabled": True},
                "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus"}},
                "grafanaDashboard": {"enabled": True, "namespace": "monitoring"},
            }
        }
    )
    # the operator's namespace label is a TalosCluster's: kept, not renamed exported_namespace
    (monitor,) = [o for o in on if o["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    (rule,) = [o for o in on if o["kind"] == "PrometheusRule"]
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    rendered = tmp_path / "rendered.rules.yaml"
    rendered.write_text(yaml.safe_dump(rule["spec"]))
    check = promtool("check", "rules", str(rendered))
    assert check.returncode == 0, check.stdout + check.stderr
    (board,) = [
        o for o in on if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")
    ]
    assert board["metadata"]["namespace"] == "monitoring"
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["ichor.json"]) == json.loads(DASHBOARD.read_text())


def test_the_dashboard_reads_one_prometheus_chosen_by_its_user() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] == "ichor-operator"
    (variable,) = board["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource",
        "datasource",
        "prometheus",
    )
    exprs = dashboard_exprs()
    assert len(exprs) >= 15
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
