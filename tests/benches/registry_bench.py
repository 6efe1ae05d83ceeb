"""How fast the tag lister lists 10,000 tags next to ``crane ls``, and its peak memory.

Starts its own registry (distribution v3 with token auth, as in the component tests),
seeds one repository with 10,000 tags, then lists it with a fresh lister each time (new
session, new anonymous token, as ``crane ls`` does in each process) and with ``crane ls``.
Both ask for pages of 1,000 (crane's default), so both make the same 11 requests.
Times are medians of several runs. The peak memory is Python's (tracemalloc) during one
listing, measured at 1,000 and at 100 tags a page: a flat peak means pages are not kept.
Goal: the lister within 1.5x of crane.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
import tracemalloc

from ichor.registry import Limits, list_tags
from tests.harness import binaries
from tests.harness import registry as test_registry

TAGS = 10_000
RUNS = 5
REPOSITORY = "bench/installer-base"


def _tags() -> list[str]:
    return [
        f"v{major}.{minor}.{patch}"
        for major in range(1, 3)
        for minor in range(50)
        for patch in range(100)
    ]


async def _lister_time(reference: str, *, page_size: int) -> tuple[float, int]:
    start = time.perf_counter()
    tags = await list_tags(reference, limits=Limits(page_size=page_size))
    return time.perf_counter() - start, len(tags)


async def _lister_peak(reference: str, *, page_size: int) -> tuple[int, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        tags = await list_tags(reference, limits=Limits(page_size=page_size))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, len(tags)


def _crane_time(crane: str, reference: str) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [crane, "ls", "--insecure", reference], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - start, len(done.stdout.split())


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB"


def run() -> list[str]:
    """List 10,000 tags with the lister and with crane; return the lines to print."""
    crane = str(binaries.find("crane"))
    lines: list[str] = []
    with test_registry.LocalRegistry() as registry:
        tags = _tags()
        assert len(tags) == TAGS
        start = time.perf_counter()
        registry.seed(REPOSITORY, tags, concurrency=32)
        lines.append(f"registry: seeded {TAGS} tags in {time.perf_counter() - start:.1f} s")
        reference = registry.reference(REPOSITORY)
        crane_reference = f"{registry.host}/{REPOSITORY}"

        async def measure() -> tuple[list[float], dict[int, int]]:
            times = []
            for _ in range(RUNS):
                seconds, count = await _lister_time(reference, page_size=1000)
                assert count == TAGS, count
                times.append(seconds)
            peaks = {}
            for page_size in (1000, 100):
                peak, count = await _lister_peak(reference, page_size=page_size)
                assert count == TAGS, count
                peaks[page_size] = peak
            return times, peaks

        _crane_time(crane, crane_reference)  # warm the registry's caches for both
        lister_times, peaks = asyncio.run(measure())
        crane_times = []
        for _ in range(RUNS):
            seconds, count = _crane_time(crane, crane_reference)
            assert count == TAGS, count
            crane_times.append(seconds)
    lister = statistics.median(lister_times)
    reference_time = statistics.median(crane_times)
    ratio = lister / reference_time
    lines += [
        f"registry: lister lists {TAGS} tags in {lister * 1000:.0f} ms (median of {RUNS}, "
        f"pages of 1000, fresh session and token each time)",
        f"registry: crane ls lists them in {reference_time * 1000:.0f} ms (median of {RUNS}, "
        "process start included)",
        f"registry: lister/crane time ratio {ratio:.2f} (goal <= 1.5: "
        f"{'met' if ratio <= 1.5 else 'NOT met'})",
        f"registry: lister peak Python memory {_mib(peaks[1000])} at 10 pages, "
        f"{_mib(peaks[100])} at 100 pages (flat in pages: "
        f"{'yes' if peaks[100] <= peaks[1000] * 1.25 else 'no'})",
    ]
    return lines


if __name__ == "__main__":
    for line in run():
        print(line, flush=True)
    sys.exit(0)
