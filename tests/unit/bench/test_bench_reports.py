"""``make bench`` cannot rot unseen: every bench module imports and has ``run()``, and
the reports judge the goals from the figures (never a timed assertion: the figures here
are made up, what is checked is the arithmetic and the verdict printed)."""

from __future__ import annotations

import importlib
import math

import pytest

from tests import bench
from tests.benches import _api, fleet_bench, memory_bench, webhook_bench
from tests.component.webhook import harness


def test_every_bench_module_imports_and_runs_by_run() -> None:
    names = bench.bench_modules()
    assert "tests.benches.fleet_bench" in names
    assert "tests.benches.webhook_bench" in names
    assert not any(name.rsplit(".", 1)[-1].startswith("_") for name in names)
    for name in names:
        assert callable(getattr(importlib.import_module(name), "run", None)), name


def test_quantiles_are_nearest_rank() -> None:
    samples = [float(n) for n in range(1, 101)]
    assert _api.quantiles(samples) == (50.0, 99.0)
    assert _api.quantiles([3.0]) == (3.0, 3.0)
    assert _api.quantiles([2.0, 1.0]) == (1.0, 2.0)
    with pytest.raises(ValueError, match="no samples"):
        _api.quantiles([])


def _run(
    size: int, *, start: float, limit: float, rss: float, first: float = 1.0, peak: float = 0.0
) -> fleet_bench.Run:
    written = fleet_bench.Written(
        stored=size, status_bytes=size * 2000, status_requests=size, events=0
    )
    return fleet_bench.Run(
        size=size,
        start=fleet_bench.Phase(start, limit, written, limit_sent=size),
        change=fleet_bench.Phase(limit, limit, written, limit_sent=size),
        first_write=first, rss=rss, peak=peak or rss, cpu_start=size * 0.01,
        cpu_interval=size * 0.002,
    )  # fmt: skip


def test_fleet_report_judges_the_goals_at_1000_only() -> None:
    good = fleet_bench.report(
        [_run(100, start=3.0, limit=2.0, rss=100), _run(1000, start=29.0, limit=20.0, rss=190)]
    )
    assert good[-2].startswith("fleet goals at 1,000 clusters"), good[-2]
    assert good[-2].count("NOT met") == 0, good[-2]
    assert "ratio 1.50x" in good[0]
    assert "2000 B each, 0 changed nothing" in good[0]
    # (190 - 100) MiB over 900 clusters
    assert "102 KiB per cluster (RSS growth from 100)" in good[9]
    assert "2.00 ms per cluster per observe interval" in good[4]
    assert "start 1.00/1.00/0.00; change 1.00/1.00/0.00; observe interval 0.00/0.00/0.00" in good[3]
    # the fixed start counts at 100 (its 1.5x there is no verdict), not in the goal
    slow_start = fleet_bench.report(
        [_run(100, start=9.0, limit=2.0, rss=100), _run(1000, start=29.0, limit=20.0, rss=190)]
    )
    assert "ratio 4.50x" in slow_start[0]
    assert slow_start[-2].count("NOT met") == 0, slow_start[-2]
    slow = fleet_bench.report([_run(1000, start=31.0, limit=20.0, rss=150)])
    assert "start ratio 1.55x <= 1.5x: NOT met" in slow[-2]
    fat = fleet_bench.report([_run(1000, start=20.0, limit=20.0, rss=200)])
    assert "current 200 MiB NOT met" in fat[-2]
    peaked = fleet_bench.report([_run(1000, start=20.0, limit=20.0, rss=150, peak=230)])
    assert "current 150 MiB met, peak 230 MiB NOT met" in peaked[-2]
    small = fleet_bench.report([_run(100, start=2.0, limit=2.0, rss=50)])
    assert "not judged (set for 1,000 clusters; sizes run: 100)" in small[-2]


def test_fleet_report_shows_marginal_and_linear_growth() -> None:
    runs = [
        _run(100, start=3.0, limit=2.0, rss=100, first=1.0),
        _run(300, start=7.0, limit=6.0, rss=120, first=1.0),
        _run(1000, start=21.0, limit=20.0, rss=180, first=1.0),
    ]
    lines = fleet_bench.report(runs)
    # (21 - 3) / (20 - 2)
    assert "start 1.00x, change 1.00x" in lines[-4], lines[-4]
    # from the first write: 20 s / 1000 against 6 s / 300
    assert lines[-3].startswith("fleet linear: yes"), lines[-3]
    assert "start 1.00x, change 1.00x" in lines[-3]
    assert "per 1,000 clusters: start 21.0 s (20.0 s from the first write)" in lines[-7]
    runs[-1] = _run(1000, start=41.0, limit=20.0, rss=180, first=1.0)
    lines = fleet_bench.report(runs)
    assert lines[-3].startswith("fleet linear: no"), lines[-3]
    assert "start 2.00x" in lines[-3]


def test_metrics_are_summed_by_verb_resource_and_subresource() -> None:
    text = "\n".join(
        [
            "# HELP apiserver_request_total x",
            'apiserver_request_total{code="200",component="apiserver",dry_run="",group="ichor.dev",'
            'resource="talosclusters",scope="resource",subresource="status",verb="PATCH",'
            'version="v1alpha1"} 7',
            'apiserver_request_total{code="409",component="apiserver",dry_run="",group="ichor.dev",'
            'resource="talosclusters",scope="resource",subresource="status",verb="PATCH",'
            'version="v1alpha1"} 2',
            'apiserver_request_total{code="201",group="",resource="events",subresource="",'
            'verb="POST"} 3',
            'apiserver_request_duration_seconds_count{resource="talosclusters"} 99',
        ]
    )
    counts = fleet_bench.parse_requests(text)
    assert counts[("PATCH", "talosclusters", "status")] == 9
    assert counts[("POST", "events", "")] == 3
    assert len(counts) == 2
    write = fleet_bench.Write(0.0, "c", {"upgradeChoices": {"talos": {"default": "v1"}}})
    written = fleet_bench.Written.of([write], {}, counts)
    assert (written.stored, written.status_requests, written.events) == (1, 9, 3)


def test_fleet_sizes_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICHOR_BENCH_FLEET", raising=False)
    assert fleet_bench.sizes() == (100, 300, 1000)
    monkeypatch.setenv("ICHOR_BENCH_FLEET", "10, 30")
    assert fleet_bench.sizes() == (10, 30)


def _samples(base: float) -> list[float]:
    return [base + n / 1000 for n in range(100)]


def _own(wall: float, kopf: float = 0.0004) -> list[harness.ReviewTiming]:
    half = [harness.ReviewTiming("taloscluster", wall, wall / 2, kopf, kopf / 2)] * 100
    return half + [harness.ReviewTiming("taloscluster-records", wall, wall / 2, kopf, kopf)] * 100


def _webhook_samples(go: float) -> dict[tuple[str, int], list[float]]:
    samples = {}
    for concurrency in webhook_bench.REQUESTS:
        samples[("none", concurrency)] = _samples(0.010)
        samples[("ichor", concurrency)] = _samples(0.013)
        samples[("ichor-validating", concurrency)] = _samples(0.0115)
        samples[("go", concurrency)] = _samples(go)
    return samples


def test_webhook_report_holds_ichor_against_go() -> None:
    samples = _webhook_samples(0.012)
    own = {(s, c): _own(0.0005) for s in webhook_bench.ICHOR_STATES for c in webhook_bench.REQUESTS}
    lines = webhook_bench.report(samples, own, [0.0001] * 10)
    assert "two reviews per write" in lines[1]
    assert "not judged" in lines[1]
    assert "Ichor/Go p50 1.50x, p99 1.50x" in lines[2]
    # validating-only: 1.5 ms over Go's 2 ms
    assert "/Go p50 0.75x, p99 0.75x" in lines[3]
    assert "reviews per write: both taloscluster 1.00, taloscluster-records 1.00" in lines[3]
    assert "whole respond path p50 0.5 ms, p99 0.5 ms (CPU p50 0.2 ms" in lines[4]
    assert "kopf's dispatch and handler alone p50 0.4 ms, p99 0.4 ms" in lines[4]
    assert "(worst 1.50x at c=1): met" in lines[-1], lines[-1]
    assert lines[-1].endswith("(0.5 ms; kopf's part alone 0.4 ms): met"), lines[-1]


def test_webhook_ratio_floors_go_and_never_hides_a_miss() -> None:
    # Go faster than no webhook (noise): its overhead counts as 1 ms, the ratio stands
    samples = _webhook_samples(0.009)
    own = {(s, c): _own(0.001) for s in webhook_bench.ICHOR_STATES for c in webhook_bench.REQUESTS}
    lines = webhook_bench.report(samples, own, [0.0001])
    assert "Ichor/Go p50 3.00x (Go's floored), p99 3.00x (Go's floored)" in lines[2]
    assert "max(Go's, 1.0 ms) (worst 3.00x at c=1): NOT met" in lines[-1], lines[-1]
    assert webhook_bench.ratio(-0.002, -0.005) == 0.0
    assert webhook_bench.ratio(0.0012, 0.0002) == pytest.approx(1.2)
    assert webhook_bench.ratio(0.003, 0.002) == pytest.approx(1.5)
    # the own-time goal is judged on the whole respond path, not kopf's part
    own = {(s, c): _own(0.003, 0.001) for s in webhook_bench.ICHOR_STATES for c in [1, 20, 50]}
    lines = webhook_bench.report(samples, own, [0.0001])
    assert lines[-1].endswith("(3.0 ms; kopf's part alone 1.0 ms): NOT met"), lines[-1]


def test_webhook_plan_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CONCURRENCY", "ROUNDS", "REQUESTS"):
        monkeypatch.delenv(f"ICHOR_BENCH_WEBHOOK_{name}", raising=False)
    assert webhook_bench.plan() == (webhook_bench.REQUESTS, webhook_bench.ROUNDS)
    monkeypatch.setenv("ICHOR_BENCH_WEBHOOK_CONCURRENCY", "1,20")
    monkeypatch.setenv("ICHOR_BENCH_WEBHOOK_ROUNDS", "1")
    assert webhook_bench.plan() == ({1: 1000, 20: 400}, 1)
    monkeypatch.setenv("ICHOR_BENCH_WEBHOOK_REQUESTS", "60")
    assert webhook_bench.plan() == ({1: 60, 20: 60}, 1)


def test_review_timings_round_trip() -> None:
    timing = harness.ReviewTiming("taloscluster", 0.001, 0.0005, 0.0008, 0.0004)
    assert harness.ReviewTiming.parse(timing.line()) == timing
    unclaimed = harness.ReviewTiming.parse(harness.ReviewTiming("x", 0.001, 0.0005).line())
    assert math.isnan(unclaimed.kopf_wall)


def test_cli_report_gives_the_start_ratio_and_judges_the_absolute_goal() -> None:
    from tests.benches import cli_bench

    times = {
        "ichor version": [0.12, 0.10, 0.50],
        "ichor --help": [0.40, 0.35, 0.31],
        "kubectl version --client": [0.05, 0.05, 0.05],
    }
    imports = {
        "kubernetes": cli_bench.Imported(seconds=0.4, rss_kib=40 * 1024),
        "kubernetes.aio": cli_bench.Imported(seconds=0.8, rss_kib=60 * 1024),
    }
    lines = cli_bench.report(times, ["click", "ichor"], imports)
    assert lines[0] == (
        "cli: ichor version 120 ms, ichor --help 350 ms, kubectl version --client 50 ms "
        "(medians of 3, a fresh process each)"
    )
    assert lines[1] == (
        "cli: start ratio ichor version / kubectl version --client 2.40x (goal: under 0.3 s: met)"
    )
    assert lines[2].endswith("7.00x (goal: under 0.3 s: NOT met)")
    assert lines[3] == "cli: ichor version loads no API client, registry client or model"
    assert lines[4] == "clients: import kubernetes 400 ms, peak RSS 40.0 MiB (medians of 7)"
    assert lines[5] == (
        "clients: import kubernetes.aio 800 ms, peak RSS 60.0 MiB (medians of 7, 2.00x kubernetes)"
    )
    lazy_no_more = cli_bench.report(times, ["kubernetes", "rich", "ichor"], imports)
    assert lazy_no_more[3] == "cli: ichor version loads kubernetes, rich (NOT lazy)"
    cpu = {name: [seconds / 4 for seconds in samples] for name, samples in times.items()}
    with_cpu = cli_bench.report(times, ["ichor"], imports, cpu)
    assert with_cpu[1] == (
        "cli: CPU ichor version 30 ms, ichor --help 88 ms, kubectl version --client 12 ms"
    )


def test_memory_report_judges_the_worst_peak_against_a_quarter_of_the_limit() -> None:
    mib = memory_bench.MIB
    phases = (
        memory_bench.Phase("at rest", 180 * mib, 220 * mib, 1.0, {"allowed": 6}),
        memory_bench.Phase("during a change", 185 * mib, 300 * mib, 9.0, {"denied": 16}),
    )
    measured = memory_bench.Measured(1000, 190 * mib, 200 * mib, phases, 384 * mib)
    assert measured.worst == 300 * mib  # a storm's peak, over the fleet's own
    assert math.isclose(measured.free, 1 - 300 / 384)
    lines = measured.lines()
    assert "worst peak 300 MiB of the chart's limit 384 MiB: 22% free" in lines[-1]
    assert "NOT met" in lines[-1]
    quiet = memory_bench.Measured(1000, 190 * mib, 250 * mib, phases[:1], 384 * mib)
    assert quiet.worst == 250 * mib  # the fleet's start, over the storm's
    assert "35% free (goal >= 25%: met)" in quiet.lines()[-1]
    assert "during a change: RSS 185 MiB before, peak 300 MiB (78% of the limit)" in lines[2]


def test_memory_fleet_size_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICHOR_BENCH_MEMORY_FLEET", raising=False)
    assert memory_bench.fleet_size() == 1000
    monkeypatch.setenv("ICHOR_BENCH_MEMORY_FLEET", "50")
    assert memory_bench.fleet_size() == 50
