"""Every metric the chart's alerts and dashboard name is on the ``/metrics`` of the operator
the chart runs (conftest.installed: ``python -m ichor.operator`` with the Deployment's
environment and metrics port), and the series an alert needs from the start are there
before anything happened.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from datetime import datetime

import pytest

from tests.component.chart.conftest import Installed
from tests.component.chart.test_prometheus_rules import dashboard_exprs, named, rules

pytestmark = pytest.mark.component

_TYPE = re.compile(r"^# TYPE (\S+) (\S+)$", re.MULTILINE)


def scrape(installed: Installed) -> str:
    with urllib.request.urlopen(installed.metrics_url, timeout=5) as response:
        text: str = response.read().decode()
    return text


def test_every_metric_the_rules_and_the_dashboard_name_is_served(installed: Installed) -> None:
    served = dict(_TYPE.findall(scrape(installed)))
    wanted = named([rule["expr"] for rule in rules()] + dashboard_exprs())
    assert len(wanted) >= 12
    missing = sorted(wanted - set(served))
    assert not missing, f"the operator's /metrics lacks {missing}"


def test_the_series_the_alerts_need_exist_from_the_start(installed: Installed) -> None:
    text = scrape(installed)
    assert re.search(r'^ichor_build_info\{.*version="[^"]+".*\} 1\.0$', text, re.MULTILINE)
    for type_ in ("talos", "kubernetes", "cni"):
        # the first failure after a start must be an increase the alert sees
        assert f'ichor_operations_total{{result="failed",type="{type_}"}} 0.0' in text
        assert re.search(
            rf'^ichor_operation_deadline_seconds\{{type="{type_}"\}} \d', text, re.MULTILINE
        )
    assert 'ichor_webhook_denials_total{reason="Unavailable"}' in text


def test_each_release_list_reports_when_its_success_is_counted_from(installed: Installed) -> None:
    """The chart's release check here lists a closed port: every list fails, its
    failingSince is written into the IchorInstallation (a field of this chart's CRD),
    kept by the API server, and served as the moment the alert counts from."""
    pattern = re.compile(
        r'^ichor_release_check_list_last_success_timestamp_seconds\{list="(\w+)"\} (\S+)$',
        re.MULTILINE,
    )
    deadline = time.monotonic() + 120
    while True:
        targets = json.loads(
            installed.kubectl(
                "get", "ichorinstallation", "ichor", "-o", "jsonpath={.status.upgradeTargets}"
            ).stdout
            or "{}"
        )
        found = dict(pattern.findall(scrape(installed)))
        since = targets.get("talosFailingSince")
        if since and "talos" in found:
            moment = datetime.fromisoformat(since.replace("Z", "+00:00")).timestamp()
            if float(found["talos"]) == moment:
                break
        assert time.monotonic() < deadline, f"status {targets}, metrics {found}"
        time.sleep(1)
    assert "talosListedAt" not in targets  # never listed
    assert set(found) == {"talos", "kubernetes", "chart"}
