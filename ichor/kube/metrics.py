"""Prometheus metrics of the operator, and the functions the controller and webhook call.

Every metric name, label and help text lives here; callers call one function per fact and
never touch ``prometheus_client``. No unbounded label but the clusters themselves (no
versions, user names or error text). The metrics live in their own ``REGISTRY`` and are
served only when ``serve`` is called (``ICHOR_METRICS_PORT``).

More in docs/design/notes.md, "ichor/kube/metrics.py".
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from ichor.api.taloscluster import ChoiceGroup, UpgradeChoices

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)


class Decision(StrEnum):
    """What the admission webhook answered."""

    ALLOWED = "allowed"
    REFUSED = "refused"
    OVERRIDDEN = "overridden"


class Result(StrEnum):
    """How a TalosOperation ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


RELEASE_CHECK_SUCCESS = Gauge(
    "ichor_release_check_last_success_timestamp_seconds",
    "Unix time of the last release check whose every list succeeded and was written.",
    registry=REGISTRY,
)
RELEASES_LISTED = Gauge(
    "ichor_release_check_listed_tags",
    "Tags the last successful listing of each list returned.",
    ["list"],
    registry=REGISTRY,
)
LIST_ERRORS = Counter(
    "ichor_release_check_list_errors",
    "Listings that failed, per list.",
    ["list"],
    registry=REGISTRY,
)
UPGRADES_AVAILABLE = Gauge(
    "ichor_upgrades_available",
    "Upgrade choices offered to a TalosCluster, per component (0: none or unavailable).",
    ["namespace", "cluster", "component"],
    registry=REGISTRY,
)
OPERATIONS = Counter(
    "ichor_operations",
    "TalosOperations that ended, by type and result.",
    ["type", "result"],
    registry=REGISTRY,
)
OPERATION_SECONDS = Histogram(
    "ichor_operation_duration_seconds",
    "Seconds from a TalosOperation's creation to its end, by type and result.",
    ["type", "result"],
    buckets=(30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, float("inf")),
    registry=REGISTRY,
)
WEBHOOK_DECISIONS = Counter(
    "ichor_webhook_decisions",
    "Admission reviews answered, by result (allowed, refused, overridden).",
    ["result"],
    registry=REGISTRY,
)
AUTO_PATCH_WINDOW_OPEN = Gauge(
    "ichor_auto_patch_window_open",
    "1 while a maintenance window of the TalosCluster is open (auto-patch configured only).",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
AUTO_PATCH_NEXT_WINDOW = Gauge(
    "ichor_auto_patch_next_window_timestamp_seconds",
    "Unix time the open window opened, or the next one opens (0: none is due).",
    ["namespace", "cluster"],
    registry=REGISTRY,
)
AUTO_PATCH_RUNS = Counter(
    "ichor_auto_patch_runs",
    "Auto-patch operations by result (started, refused, succeeded, failed).",
    ["result"],
    registry=REGISTRY,
)
AUTO_PATCH_GATE_FAILURES = Counter(
    "ichor_auto_patch_gate_failures",
    "Health gates that newly stopped an auto-patch start, by gate.",
    ["gate"],
    registry=REGISTRY,
)
AUTO_PATCH_HALTS = Counter(
    "ichor_auto_patch_halts",
    "Versions halted for the fleet after a failed auto-patch, by component.",
    ["component"],
    registry=REGISTRY,
)
COMPONENTS = ("talos", "kubernetes")


def serve(*, port: int, addr: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` on ``addr:port`` in a daemon thread (prometheus_client's server)."""
    start_http_server(port, addr=addr, registry=REGISTRY)


# --- the release check ----------------------------------------------------------------------


def lists_checked(counts: Mapping[str, int | None]) -> None:
    """One check's lists: the number of tags of each list read, None for a failed list."""
    for name, count in counts.items():
        if count is None:
            LIST_ERRORS.labels(list=name).inc()
        else:
            RELEASES_LISTED.labels(list=name).set(count)


def release_check_written(*, listing_failed: bool, at: float | None = None) -> None:
    """The check's status was written; it counts as a success when no list failed."""
    if not listing_failed:
        RELEASE_CHECK_SUCCESS.set(time.time() if at is None else at)


# --- clusters -------------------------------------------------------------------------------


def _offered(group: ChoiceGroup | None) -> int:
    if group is None or not group.available:
        return 0
    versions = set(group.patch) | set(group.next_minor)
    if group.recommended:
        versions.add(group.recommended)
    return len(versions)


def upgrades_available(*, namespace: str, cluster: str, choices: UpgradeChoices | None) -> None:
    """The choices just computed for one cluster, per component."""
    for component in COMPONENTS:
        group = getattr(choices, component, None) if choices is not None else None
        UPGRADES_AVAILABLE.labels(namespace=namespace, cluster=cluster, component=component).set(
            _offered(group)
        )


def cluster_forgotten(key: tuple[str, str]) -> None:
    """A deleted cluster's series go away with it."""
    namespace, cluster = key
    for component in COMPONENTS:
        with contextlib.suppress(KeyError):
            UPGRADES_AVAILABLE.remove(namespace, cluster, component)
    for gauge in (AUTO_PATCH_WINDOW_OPEN, AUTO_PATCH_NEXT_WINDOW):
        with contextlib.suppress(KeyError):
            gauge.remove(namespace, cluster)


# --- auto-patch -----------------------------------------------------------------------------


def auto_patch_window(
    *, namespace: str, cluster: str, open_: bool | None, next_start: datetime | None
) -> None:
    """The window state just decided for one cluster (``open_`` None: not configured)."""
    if open_ is None:
        cluster_key = (namespace, cluster)
        for gauge in (AUTO_PATCH_WINDOW_OPEN, AUTO_PATCH_NEXT_WINDOW):
            with contextlib.suppress(KeyError):
                gauge.remove(*cluster_key)
        return
    AUTO_PATCH_WINDOW_OPEN.labels(namespace=namespace, cluster=cluster).set(1 if open_ else 0)
    AUTO_PATCH_NEXT_WINDOW.labels(namespace=namespace, cluster=cluster).set(
        next_start.timestamp() if next_start else 0
    )


def auto_patch_run(*, result: str) -> None:
    """An auto-patch operation was started, refused, or ended (``result`` lower case)."""
    AUTO_PATCH_RUNS.labels(result=result.lower()).inc()


def auto_patch_gate_failed(*, gate: str) -> None:
    AUTO_PATCH_GATE_FAILURES.labels(gate=gate).inc()


def auto_patch_halted(*, component: str) -> None:
    AUTO_PATCH_HALTS.labels(component=component).inc()


# --- operations -----------------------------------------------------------------------------


def _age(created: str, now: float) -> float | None:
    try:
        started = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, now - started.timestamp())


def operation_finished(*, type_: str, result: Result, created: str) -> None:
    """A TalosOperation ended; ``created`` is its ``metadata.creationTimestamp``."""
    OPERATIONS.labels(type=type_, result=result.value).inc()
    seconds = _age(created, time.time())
    if seconds is not None:
        OPERATION_SECONDS.labels(type=type_, result=result.value).observe(seconds)


# --- the webhook ----------------------------------------------------------------------------


def webhook_decided(*, allowed: bool, overridden: bool) -> None:
    """One admission answer: refused, allowed past an override, or allowed."""
    if not allowed:
        decision = Decision.REFUSED
    elif overridden:
        decision = Decision.OVERRIDDEN
    else:
        decision = Decision.ALLOWED
    WEBHOOK_DECISIONS.labels(result=decision.value).inc()
