"""Prometheus metrics of the operator, and the functions the controller and webhook call.

Every metric name, label and help text lives here (docs/metrics.md is generated from it);
callers call one function per fact and never touch ``prometheus_client``. No unbounded
label: labels naming objects follow objects that exist, every other label takes a fixed
set of values (``Other`` outside it); ``ichor_build_info`` alone has versions. The metrics
live in their own ``REGISTRY`` and are served only when ``serve`` is called.

More in docs/design/notes.md, "ichor/kube/metrics.py".
"""

from __future__ import annotations

import contextlib
import platform
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
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
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ichor.api import conditions as api_conditions
from ichor.api.conditions import Condition
from ichor.api.taloscluster import ChoiceGroup, UpgradeChoices
from ichor.api.talosoperation import OperationType, Phase
from ichor.release import refusals
from ichor.release.release_set import PINNED
from ichor.settings import OperationSettings, package_version

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
BUILD_INFO = Gauge(
    "ichor_build_info",
    "1, labelled with this build: its version, its Python, and the release set a new "
    "install gets (Talos, Kubernetes, Cilium chart).",
    ["version", "python", "talos", "kubernetes", "cilium_chart"],
    registry=REGISTRY,
)
BUILD_INFO.labels(
    version=package_version(),
    python=platform.python_version(),
    talos=PINNED.talos,
    kubernetes=PINNED.kubernetes,
    cilium_chart=PINNED.cilium_chart,
).set(1)
OPERATION_DEADLINE = Gauge(
    "ichor_operation_deadline_seconds",
    "The longest a Running TalosOperation of the type may run before the operator ends "
    "it: the Job's deadline, plus the wait for the Nodes' versions (talos, kubernetes).",
    ["type"],
    registry=REGISTRY,
)
RELEASE_LIST_SUCCESS = Gauge(
    "ichor_release_check_list_last_success_timestamp_seconds",
    "Unix time each list (talos, kubernetes, chart) was last listed whole, as the "
    "IchorInstallation records it; a list never listed: when its failures began, or the "
    "object's creation. Absent while the check is off.",
    ["list"],
    registry=REGISTRY,
)
WEBHOOK_SECONDS = Histogram(
    "ichor_webhook_request_duration_seconds",
    "Seconds from a review's arrival to its answer, by webhook path (taloscluster, "
    "talosoperation, their stamps and status paths; other).",
    ["webhook"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, float("inf")),
    registry=REGISTRY,
)
WEBHOOK_DENIALS = Counter(
    "ichor_webhook_denials",
    "Admission reviews denied, by reason: the rule that refused, or why the webhook could "
    "not judge (Unreadable, Unavailable, Undecided, ...).",
    ["reason"],
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
    CLUSTERS.forget(key)
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


#: The reasons a denial is counted by; any other is ``Other`` (the label stays bounded).
DENIAL_REASONS: frozenset[str] = frozenset(str(rule) for rule in refusals.Rule) | {
    "Unreadable",  # a review the webhook cannot read, or that no handler claims (400)
    "Unavailable",  # the endpoint was full or a handler raised (503): the write may retry
    "Undecided",  # an API read the judgement needed failed (503)
    "NotApiServer",  # a client certificate that is not the API server's
    "StatusWrite",  # a status write by anyone but the operator
    "QueueFull",  # an operation beyond the cluster's queue of not finished ones
    "SecretNotReadable",  # a Secret reference its writer may not read
    "HealthCheckBudget",  # a health check over its CEL budget
    "OverrideVerb",  # override: true without the verb
    "ClusterNotFound",  # an operation for a cluster that does not exist
    "Adoption",  # an adoption marker on a Declarative spec
    "Stamp",  # admission records that are not the mutating half's stamp
    "OperatorMark",  # a mark only the operator writes (ichor.webhook.marks)
    "UnhaltRequest",  # an unhalt annotation that does not read
    "Refused",  # a refusal that names no rule
}
_BY_CODE = {400: "Unreadable", 503: "Unavailable"}


def webhook_answered(*, webhook: str, seconds: float, known: Iterable[str]) -> None:
    """One review answered after ``seconds``; ``webhook`` is its path, counted as itself
    when it is one of ``known`` (the webhook's paths), else as ``other``."""
    path = webhook.strip("/")
    WEBHOOK_SECONDS.labels(webhook=path if path in set(known) else "other").observe(seconds)


def webhook_denied(*, reason: str | None, code: int) -> None:
    """One denial: the rule or named reason the answer carries, else one read from its
    HTTP code."""
    name = reason or _BY_CODE.get(code, "Refused")
    WEBHOOK_DENIALS.labels(reason=name if name in DENIAL_REASONS else "Other").inc()


# --- operations that have not ended -------------------------------------------------------


@dataclass(frozen=True)
class ActiveOperation:
    """A Pending or Running TalosOperation as the executor listed it."""

    name: str
    type: str
    phase: str
    #: ``status.startedAt`` once Running, else ``metadata.creationTimestamp``.
    since: float


class _Operations(Collector):
    """``ichor_operation_started_timestamp_seconds``: one series per TalosOperation that
    has not ended, computed when scraped from what the executor last listed per cluster.

    A cluster's list is dropped once the executor has not listed it for ``fresh_for``
    seconds (it lists every cluster with an unfinished operation at least every resync):
    so a replica that stopped running the controllers, or lost a cluster, stops reporting
    its operations instead of showing them running for ever.
    """

    NAME = "ichor_operation_started_timestamp_seconds"
    HELP = (
        "Unix time each TalosOperation that has not ended started (Running: status.startedAt) "
        "or was created (Pending), by namespace, cluster, operation, type and phase."
    )
    LABELS = ("namespace", "cluster", "operation", "type", "phase")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_cluster: dict[tuple[str, str], tuple[float, tuple[ActiveOperation, ...]]] = {}

    def listed(
        self,
        key: tuple[str, str],
        operations: tuple[ActiveOperation, ...],
        *,
        fresh_for: float,
        now: float | None = None,
    ) -> None:
        until = (time.monotonic() if now is None else now) + fresh_for
        with self._lock:
            if operations:
                self._by_cluster[key] = (until, operations)
            else:
                self._by_cluster.pop(key, None)

    def current(self, now: float | None = None) -> list[tuple[tuple[str, str], ActiveOperation]]:
        moment = time.monotonic() if now is None else now
        with self._lock:
            for key in [k for k, (until, _) in self._by_cluster.items() if until < moment]:
                del self._by_cluster[key]
            return [(key, op) for key, (_, ops) in self._by_cluster.items() for op in ops]

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.NAME, self.HELP, labels=self.LABELS)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=self.LABELS)
        for (namespace, cluster), op in self.current():
            family.add_metric([namespace, cluster, op.name, op.type, op.phase], op.since)
        yield family


OPERATIONS_ACTIVE = _Operations()
REGISTRY.register(OPERATIONS_ACTIVE)
_TYPES = frozenset(t.value for t in OperationType)
_ACTIVE_PHASES = frozenset({Phase.PENDING.value, Phase.RUNNING.value})


def _timestamp(value: datetime | str | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def active_operation(
    *, name: str, type_: str, phase: str | None, started: datetime | None, created: str
) -> ActiveOperation | None:
    """The series of one listed operation; None when it has ended (or carries a type or
    phase outside the API's, which the executor does not run)."""
    phase = phase or Phase.PENDING.value
    if phase not in _ACTIVE_PHASES or type_ not in _TYPES:
        return None
    since = _timestamp(started) if phase == Phase.RUNNING.value else None
    since = since if since is not None else _timestamp(created)
    if since is None:
        return None
    return ActiveOperation(name=name, type=type_, phase=phase, since=since)


def operations_listed(
    *,
    namespace: str,
    cluster: str,
    operations: Iterable[ActiveOperation | None],
    fresh_for: float,
) -> None:
    """What the executor just listed for one cluster: its operations that have not ended."""
    OPERATIONS_ACTIVE.listed(
        (namespace, cluster), tuple(op for op in operations if op is not None), fresh_for=fresh_for
    )


def operation_deadlines(settings: OperationSettings) -> None:
    """How long an operation of each type may run, from the executor's settings."""
    job = float(settings.executor.active_deadline_seconds)
    for type_ in OperationType:
        nodes = settings.node_version_deadline if type_ is not OperationType.CNI else 0.0
        OPERATION_DEADLINE.labels(type=type_.value).set(job + nodes)


def fresh_for(settings: OperationSettings) -> float:
    """How long a cluster's listed operations are reported without a new listing."""
    return max(300.0, 10 * max(settings.resync_interval, settings.retry_delay))


# --- clusters by condition ----------------------------------------------------------------


def _reasons() -> frozenset[str]:
    names: set[str] = set()
    for value in vars(api_conditions).values():
        if (
            isinstance(value, type)
            and issubclass(value, StrEnum)
            and value.__name__.endswith("Reason")
        ):
            names |= {str(member) for member in value}
    return frozenset(names | {str(rule) for rule in refusals.Rule})


_CONDITION_TYPES = frozenset(str(t) for t in api_conditions.ClusterConditionType)
_CONDITION_REASONS = _reasons()
_STATUSES = frozenset(str(s) for s in api_conditions.ConditionStatus)


class _Clusters(Collector):
    """``ichor_clusters``: how many TalosClusters have each condition with each status and
    reason, computed when scraped from the conditions each reconcile wrote. One series per
    (condition, status, reason) present: bounded by the API's enums, not by the fleet."""

    NAME = "ichor_clusters"
    HELP = (
        "TalosClusters by condition, status and reason (Other: a value outside the API's), "
        "as the controller last computed them."
    )
    LABELS = ("condition", "status", "reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_cluster: dict[tuple[str, str], tuple[tuple[str, str, str], ...]] = {}

    def set(self, key: tuple[str, str], found: tuple[tuple[str, str, str], ...]) -> None:
        with self._lock:
            self._by_cluster[key] = found

    def forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._by_cluster.pop(key, None)

    def counts(self) -> dict[tuple[str, str, str], int]:
        counted: dict[tuple[str, str, str], int] = {}
        with self._lock:
            for found in self._by_cluster.values():
                for labels in found:
                    counted[labels] = counted.get(labels, 0) + 1
        return counted

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.NAME, self.HELP, labels=self.LABELS)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=self.LABELS)
        for labels, count in sorted(self.counts().items()):
            family.add_metric(list(labels), count)
        yield family


CLUSTERS = _Clusters()
REGISTRY.register(CLUSTERS)


def _bounded(value: str, known: frozenset[str]) -> str:
    return value if value in known else "Other"


def cluster_conditions(*, namespace: str, cluster: str, conditions: Iterable[Condition]) -> None:
    """The conditions just computed for one cluster."""
    CLUSTERS.set(
        (namespace, cluster),
        tuple(
            (
                _bounded(c.type, _CONDITION_TYPES),
                _bounded(str(c.status), _STATUSES),
                _bounded(c.reason, _CONDITION_REASONS),
            )
            for c in conditions
        ),
    )


# --- the release check's lists ------------------------------------------------------------

RELEASE_LISTS = ("talos", "kubernetes", "chart")


def release_lists_recorded(successes: Mapping[str, datetime | None] | None) -> None:
    """Per list, the moment its last success is counted from (``None`` for the whole:
    the object is gone or the check is off, and the series go)."""
    for name in RELEASE_LISTS:
        moment = successes.get(name) if successes is not None else None
        if moment is None:
            with contextlib.suppress(KeyError):
                RELEASE_LIST_SUCCESS.remove(name)
        else:
            RELEASE_LIST_SUCCESS.labels(list=name).set(moment.timestamp())


# --- series an alert needs before the first event -----------------------------------------

# A counter's series appears with its first increment, and ``increase`` cannot see that
# first step: the first failure after a start would never fire an alert. So the series
# the rules read exist from the start, at 0.
for _type in OperationType:
    for _result in Result:
        OPERATIONS.labels(type=_type.value, result=_result.value)
for _reason in ("Unavailable", "Undecided"):
    WEBHOOK_DENIALS.labels(reason=_reason)
