"""``make bench`` cannot rot unseen: every bench module imports and has ``run()``, and
the reports judge the goals from the figures (never a timed assertion: the figures here
are made up, what is checked is the arithmetic and the verdict printed)."""

from __future__ import annotations

import importlib

import pytest

from tests import bench
from tests.benches import _api, fleet_bench, webhook_bench


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


def _run(size: int, *, start: float, limit: float, rss: float) -> fleet_bench.Run:
    return fleet_bench.Run(
        size=size, start=start, change=limit, limit_start=limit, limit_change=limit,
        rss=rss, peak=rss, cpu_start=size * 0.01, cpu_interval=size * 0.002,
        first_bytes=2000, change_bytes=1500,
    )  # fmt: skip


def test_fleet_report_meets_goals_only_within_both() -> None:
    good = fleet_bench.report(
        [_run(100, start=3.0, limit=2.0, rss=100), _run(1000, start=29.0, limit=20.0, rss=190)]
    )
    assert good[-2].count("NOT met") == 0, good[-2]
    assert "ratio 1.50x" in good[0]
    # (190 - 100) MiB over 900 clusters
    assert "102 KiB per cluster (RSS growth from 100)" in good[3]
    assert "2.00 ms per cluster per observe interval" in good[1]
    slow = fleet_bench.report([_run(1000, start=31.0, limit=20.0, rss=150)])
    assert "(worst 1.55x): NOT met" in slow[-2]
    fat = fleet_bench.report([_run(1000, start=20.0, limit=20.0, rss=200)])
    assert "(200 MiB): NOT met" in fat[-2]
    small = fleet_bench.report([_run(100, start=2.0, limit=2.0, rss=50)])
    assert "stated at 1,000 clusters" in small[-2]


def test_fleet_sizes_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICHOR_BENCH_FLEET", raising=False)
    assert fleet_bench.sizes() == (100, 300, 1000)
    monkeypatch.setenv("ICHOR_BENCH_FLEET", "10, 30")
    assert fleet_bench.sizes() == (10, 30)


def _samples(base: float) -> list[float]:
    return [base + n / 1000 for n in range(100)]


def test_webhook_report_holds_ichor_against_go() -> None:
    samples = {}
    for concurrency in webhook_bench.REQUESTS:
        samples[("none", concurrency)] = _samples(0.010)
        samples[("ichor", concurrency)] = _samples(0.013)
        samples[("go", concurrency)] = _samples(0.012)
    own = {c: [(0.0005, 0.0004)] * 50 for c in webhook_bench.REQUESTS}
    lines = webhook_bench.report(samples, own, [0.0001] * 10)
    assert "Ichor/Go p50 1.50x, p99 1.50x" in lines[1]
    assert lines[-1].endswith("(0.5 ms): met"), lines[-1]
    assert "p50 0.5 ms, p99 0.5 ms; its CPU time p50 0.4 ms, p99 0.4 ms" in lines[4]
    assert "(worst 1.50x): met" in lines[-1]
    samples[("go", 20)] = _samples(0.009)  # Go faster than no webhook: noise
    lines = webhook_bench.report(samples, {c: [(0.003, 0.001)] for c in own}, [0.0001])
    assert "n/a (Go's overhead is within the noise)" in lines[2]
    # c=20 cannot be judged; the others can, and meet the goal
    assert "(worst 1.50x; not measured at c=20: Go's within the noise): met" in lines[-1]
    for concurrency in webhook_bench.REQUESTS:
        samples[("go", concurrency)] = _samples(0.009)
    lines = webhook_bench.report(samples, {c: [(0.001, 0.001)] for c in own}, [0.0001])
    assert "not measured (Go's p99 overhead within the noise" in lines[-1]
    samples[("go", 1)] = _samples(0.0105)  # Ichor's 3 ms against Go's 0.5 ms
    lines = webhook_bench.report(samples, {c: [(0.001, 0.001)] for c in own}, [0.0001])
    assert "(worst 6.00x; not measured at c=20, c=50" in lines[-1]
    assert "NOT met" in lines[-1].split(";")[1]
    lines = webhook_bench.report(samples, {c: [(0.003, 0.001)] for c in own}, [0.0001])
    assert lines[-1].endswith("(3.0 ms): NOT met")
