"""The named steps of ``AutoPatcher.reconcile``: the cluster as ``decide`` reads it, the
fleet's record, the halt kept, the window figures."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from ichor.api.autopatch import RESUME_ANNOTATION, AutoPatchStatus, FleetAutoPatchStatus, Halt
from ichor.controller.autopatch import decisions as d
from ichor.controller.autopatch import runner
from ichor.kube import metrics
from tests.unit.autopatch.test_decisions import status
from tests.unit.autopatch.test_runner import NOW, Api, Patcher, cluster_body


def test_fleet_spec_reads_the_installation_leniently() -> None:
    assert runner._fleet_spec(None) is None
    assert runner._fleet_spec({"spec": None}) is None
    found = runner._fleet_spec({"spec": {"autoPatch": {"maxConcurrentClusters": 3}}})
    assert found is not None
    assert found.max_concurrent_clusters == 3


def test_cluster_is_what_decide_reads() -> None:
    body = cluster_body()
    body["metadata"]["annotations"] = {RESUME_ANNOTATION: "auto-prod-1"}
    cluster = runner._cluster(body, status=status(), not_ready=("n1",))
    assert cluster is not None
    assert (cluster.namespace, cluster.name, cluster.resume) == ("ns", "prod", "auto-prod-1")
    assert cluster.not_ready == ("n1",)
    plain = runner._cluster(cluster_body(), status=status(), not_ready=None)
    assert plain is not None
    assert plain.resume is None


def test_cluster_is_none_for_a_spec_that_cannot_be_read() -> None:
    body = cluster_body()
    body["spec"]["talosVersion"] = 14
    assert runner._cluster(body, status=status(), not_ready=None) is None


def halt(version: str, *, until: datetime) -> Halt:
    return Halt(
        component="talos",
        version=version,
        cluster="prod",
        operation=f"auto-{version}",
        reason="UpgradeFailed",
        time=NOW - timedelta(hours=2),
        until=until,
    )


def test_fleet_keeps_the_live_halts_and_the_fleet_settings() -> None:
    halts = [
        halt("v1.14.5", until=NOW + timedelta(hours=1)),
        halt("v1.14.4", until=NOW - timedelta(hours=1)),
    ]
    installation = {
        "spec": {"autoPatch": {"maxConcurrentClusters": 2}},
        "status": {
            "autoPatch": {"halts": [h.model_dump(mode="json", by_alias=True) for h in halts]}
        },
    }
    record, fleet = runner._fleet(installation, runner._fleet_spec(installation), now=NOW)
    assert len(record.halts) == 2
    assert [h.version for h in fleet.halts] == ["v1.14.5"]
    assert fleet.max_concurrent == 2
    empty, none = runner._fleet(None, None, now=NOW)
    assert empty == FleetAutoPatchStatus()
    assert none.halts == ()


async def test_keep_halt_records_then_marks_and_skips_a_recorded_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    patcher = Patcher(Api(), clock=[NOW])
    calls: list[tuple[str, Any]] = []

    async def record(halt: Halt) -> bool:
        calls.append(("record", halt.version))
        return recorded

    async def mark(namespace: str, halt: Halt) -> None:
        calls.append(("mark", namespace))

    monkeypatch.setattr(patcher, "_record_halt", record)
    monkeypatch.setattr(patcher, "_mark_halted", mark)
    kept = halt("v1.14.5", until=NOW + timedelta(hours=1))
    recorded = True
    await patcher._keep_halt("ns", None, FleetAutoPatchStatus())
    assert calls == []
    await patcher._keep_halt("ns", kept, FleetAutoPatchStatus())
    assert calls == [("record", "v1.14.5"), ("mark", "ns")]
    calls.clear()
    recorded = False
    await patcher._keep_halt("ns", kept, FleetAutoPatchStatus())
    assert calls == [("record", "v1.14.5")]
    calls.clear()
    await patcher._keep_halt("ns", kept, FleetAutoPatchStatus(halts=(kept,)))
    assert calls == [("mark", "ns")]


def test_window_metric_sets_and_clears_the_gauges() -> None:
    def shown() -> tuple[float | None, float | None]:
        labels = {"namespace": "ns-metric", "cluster": "c"}
        return (
            metrics.REGISTRY.get_sample_value("ichor_auto_patch_window_open", labels),
            metrics.REGISTRY.get_sample_value(
                "ichor_auto_patch_next_window_timestamp_seconds", labels
            ),
        )

    opened = d.Decision(status=AutoPatchStatus(enabled=True, window_open=True), condition=None)
    runner._window_metric("ns-metric", "c", opened)
    assert shown() == (1, 0)
    runner._window_metric("ns-metric", "c", d.Decision(status=None, condition=None))
    assert shown() == (None, None)
