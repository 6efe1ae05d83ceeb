"""The operator's settings: one frozen object, read once from the environment at start.

``Settings.from_env()`` is the one reading of the environment in ``ichor`` (the CLI reads
its own two with ``CliSettings.from_env()``). Unset or empty means the default, except
for the argument lists (``*_ARGS``). A value that cannot be read stops the start with a
``SettingsError`` naming the variable. Each field names its variable (``env(...)``) and
says what it means in a ``#:`` comment; docs/configuration.md lists them all.

More in docs/design/notes.md, "ichor/settings.py".
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ichor.api.health_scope import DEFAULT_HEALTH_CHECK_RESOURCES, NEVER_CHECKED
from ichor.api.queue_limits import MAX_QUEUED
from ichor.registry.limits import Limits
from ichor.release.release_set import PINNED

S = TypeVar("S")

#: The Image Factory schematic of a plain Talos install (no system extensions).
DEFAULT_SCHEMATIC = "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"
#: Where the Cilium chart comes from unless the operator is told otherwise.
DEFAULT_CILIUM_CHART = "oci://quay.io/cilium/charts/cilium"


class SettingsError(ValueError):
    """A variable is set to a value the operator cannot use; the operator does not start."""


#: A reader turns the variable's text (None: unset) into the field's value, or ``_DEFAULT``.
_DEFAULT: Any = object()
Reader = Callable[[str, str | None], Any]


def _text(name: str, value: str | None) -> Any:
    return value if value else _DEFAULT


def _number(kind: type[float] | type[int]) -> Reader:
    def read(name: str, value: str | None) -> Any:
        if not value:
            return _DEFAULT
        try:
            return kind(value)
        except ValueError:
            what = "a number" if kind is float else "a whole number"
            raise SettingsError(
                f"{name}={value!r} is refused: it must be {what} (unset it for the default)"
            ) from None

    return read


_float = _number(float)
_int = _number(int)


def _float_not_zero(name: str, value: str | None) -> Any:
    """A number where 0 also means the default (a zero wait would be a busy loop)."""
    found = _float(name, value)
    return _DEFAULT if found is _DEFAULT or found == 0 else found


def _args(name: str, value: str | None) -> Any:
    """Space-separated arguments; set but empty means none."""
    return _DEFAULT if value is None else tuple(value.split())


def _names(name: str, value: str | None) -> Any:
    """Comma-separated names, empty ones dropped."""
    return tuple(n for n in value.split(",") if n) if value else _DEFAULT


_RESOURCE_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
)


def _resources(name: str, value: str | None) -> Any:
    """Comma-separated ``<apiVersion>/<resource>`` names (``apps/v1/deployments``); Secrets
    are refused, whatever the rest says."""
    found = _names(name, value)
    if found is _DEFAULT:
        return found
    for key in found:
        if not _RESOURCE_KEY.match(key):
            raise SettingsError(
                f"{name} names {key[:80]!r}, which is not <apiVersion>/<resource> (for "
                "example apps/v1/deployments or v1/pods); fix it or unset it for the default"
            )
        if key.rsplit("/", 1)[1] in NEVER_CHECKED:
            raise SettingsError(
                f"{name} names {key!r}, which is refused: a health check's verdict would let "
                "whoever writes a TalosCluster's spec test the workload's secret values; "
                "remove it"
            )
    return found


def _as_is(name: str, value: str | None) -> Any:
    """The text as set, the empty string too (unset: the default)."""
    return _DEFAULT if value is None else value


def _flag(name: str, value: str | None) -> Any:
    """Set to anything but the empty string: on."""
    return True if value else _DEFAULT


def _switch(name: str, value: str | None) -> Any:
    """``true`` or ``false`` (any case); anything else is refused, so a switch that opens
    a door is never turned on by a typo or by ``0``."""
    if not value:
        return _DEFAULT
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise SettingsError(f"{name}={value[:40]!r} is refused: it must be true or false")


def _path(name: str, value: str | None) -> Any:
    return Path(value) if value else _DEFAULT


def _json(kind: type[dict[str, Any]] | type[list[Any]]) -> Reader:
    """JSON of one kind (an object or a list), as the chart writes a value with ``toJson``;
    unset, empty or ``null``: the default."""
    what = "a JSON object" if kind is dict else "a JSON list"

    def read(name: str, value: str | None) -> Any:
        if not value:
            return _DEFAULT
        try:
            found = json.loads(value)
        except ValueError as error:
            raise SettingsError(
                f"{name} is refused: it must be {what} ({error}); fix it or unset it for the "
                "default"
            ) from None
        if found is None:
            return _DEFAULT
        if not isinstance(found, kind):
            raise SettingsError(
                f"{name} is refused: it must be {what}, not {type(found).__name__}; fix it or "
                "unset it for the default"
            )
        if kind is list and not all(isinstance(item, dict) for item in found):
            raise SettingsError(f"{name} is refused: each item of its list must be a JSON object")
        return tuple(found) if kind is list else found

    return read


def _json_labels(name: str, value: str | None) -> Any:
    """A JSON object of strings (a nodeSelector)."""
    found = _json(dict)(name, value)
    if found is not _DEFAULT and not all(isinstance(v, str) for v in found.values()):
        raise SettingsError(
            f"{name} is refused: every value of its object must be a string (a label value)"
        )
    return found


def _one_of(*choices: str) -> Reader:
    def read(name: str, value: str | None) -> Any:
        if not value:
            return _DEFAULT
        if value not in choices:
            raise SettingsError(
                f"{name}={value[:40]!r} is refused: it must be one of {', '.join(choices)} "
                "(unset it for the default)"
            )
        return value

    return read


def env(name: str, default: Any = dataclasses.MISSING, *, read: Reader = _text, **kw: Any) -> Any:
    """A field read from the variable ``name`` (with ``read``), else its default."""
    return field(default=default, metadata={"env": name, "read": read}, **kw)


def section(cls: type[S]) -> Any:
    """A field that is a group of settings of its own (read from the same environment)."""
    return field(default_factory=cls, metadata={"section": cls})


def read(cls: type[S], environ: Mapping[str, str]) -> S:
    """``cls`` with every field that names a variable read from ``environ``."""
    given: dict[str, Any] = {}
    for item in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "section" in item.metadata:
            given[item.name] = read(item.metadata["section"], environ)
        elif "env" in item.metadata:
            name = item.metadata["env"]
            value = item.metadata["read"](name, environ.get(name))
            if value is not _DEFAULT:
                given[item.name] = value
    return cls(**given)


class _FromEnv:
    @classmethod
    def from_env(cls: type[S], environ: Mapping[str, str] | None = None) -> S:
        """These settings from ``environ`` (the process environment when not given)."""
        return read(cls, os.environ if environ is None else environ)


def package_version() -> str:
    """The installed package's version (0.0.0 when it is not installed)."""
    import importlib.metadata  # here: the ``ichor`` command starts without it

    try:
        return importlib.metadata.version("ichor")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def in_cluster_server(environ: Mapping[str, str]) -> str | None:
    """The API server's address as the kubelet gives it to every container
    (``KUBERNETES_SERVICE_HOST``/``_PORT``, which client-go reads too), or None."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not (host and port):
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def namespace_share(workers: int, configured: int | None) -> int:
    """The most keys of one namespace a controller's ``workers`` run at once: ``configured``
    within 1 and ``workers - 1`` (unset: ``workers - 1``), so while one namespace's keys
    hang, a worker is left for the others (one worker alone cannot be shared)."""
    most = max(workers - 1, 1)
    return most if configured is None else max(1, min(configured, most))


# --- the parts ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class KubeSettings(_FromEnv):
    """The cluster the operator runs in: how the operator reaches it."""

    #: The kubeconfig file outside a Pod (unset: ``~/.kube/config``).
    kubeconfig: str | None = env("KUBECONFIG", None)
    #: Set by the kubelet in every Pod: the operator then uses its service account, at
    #: this address rather than ``kubernetes.default.svc``, so it needs no cluster DNS.
    service_host: str | None = env("KUBERNETES_SERVICE_HOST", None)
    #: The API server's port, with ``KUBERNETES_SERVICE_HOST``.
    service_port: str | None = env("KUBERNETES_SERVICE_PORT", None)

    @property
    def in_pod(self) -> bool:
        return bool(self.service_host)

    @property
    def in_cluster_server(self) -> str | None:
        environ = {
            "KUBERNETES_SERVICE_HOST": self.service_host or "",
            "KUBERNETES_SERVICE_PORT": self.service_port or "",
        }
        return in_cluster_server(environ)


@dataclass(frozen=True, kw_only=True)
class WebhookSettings(_FromEnv):
    """The admission webhook: its HTTPS endpoint."""

    #: The serving certificate (a path); without it and the key the webhook is not served.
    cert: Path | None = env("ICHOR_WEBHOOK_CERT", None, read=_path)
    #: The serving certificate's private key (a path).
    key: Path | None = env("ICHOR_WEBHOOK_KEY", None, read=_path)
    #: The port the webhook listens on.
    port: int = env("ICHOR_WEBHOOK_PORT", 9443, read=_int)
    #: The address the webhook listens on (the chart sets ``0.0.0.0``).
    addr: str = env("ICHOR_WEBHOOK_ADDR", "127.0.0.1")
    #: A CA (a path): only a client certificate it signed may call the webhook.
    client_ca: Path | None = env("ICHOR_WEBHOOK_CLIENT_CA", None, read=_path)
    #: Comma-separated common names one of which the client certificate must have.
    client_names: tuple[str, ...] = env("ICHOR_WEBHOOK_CLIENT_NAMES", (), read=_names)

    @property
    def served(self) -> bool:
        return self.cert is not None and self.key is not None


@dataclass(frozen=True, kw_only=True)
class MetricsSettings(_FromEnv):
    """Metrics: where Prometheus reads them."""

    #: The port metrics are served on; unset, none are served.
    port: int | None = env("ICHOR_METRICS_PORT", None, read=_int)
    #: The address metrics are served on.
    addr: str = env("ICHOR_METRICS_ADDR", "0.0.0.0")


@dataclass(frozen=True, kw_only=True)
class TenantSettings(_FromEnv):
    """Reads for a TalosCluster in the cluster the operator runs in: as whose account."""

    #: Set: a TalosCluster without a kubeconfig Secret is read only as a ServiceAccount its
    #: spec or the IchorInstallation names, and not at all when neither does; unset, the
    #: namespace's ``default`` account reads it then. Never as the operator. The chart sets
    #: it unless ``tenants.requireServiceAccount`` is false.
    require_service_account: bool = env("ICHOR_REQUIRE_SERVICE_ACCOUNT", False, read=_flag)


@dataclass(frozen=True, kw_only=True)
class ControllerSettings(_FromEnv):
    """The TalosCluster controller: how often and how hard it reads the workload clusters."""

    #: Seconds between two reads of a reachable workload cluster.
    observe_interval: float = env("ICHOR_OBSERVE_INTERVAL", 60.0, read=_float)
    #: First wait (seconds) after a failed read; doubles per failure up to the maximum.
    backoff_initial: float = env("ICHOR_BACKOFF_INITIAL", 5.0, read=_float)
    #: The longest wait (seconds) between two reads of a failing workload cluster.
    backoff_max: float = env("ICHOR_BACKOFF_MAX", 300.0, read=_float)
    #: Seconds one read of a workload cluster may take in all.
    observe_timeout: float = env("ICHOR_OBSERVE_TIMEOUT", 20.0, read=_float)
    #: Clusters reconciled at the same time.
    workers: int = env("ICHOR_WORKERS", 8, read=_int)
    #: Clusters of one namespace reconciled at the same time, at most ``ICHOR_WORKERS``
    #: minus one (unset: that), so one namespace's slow clusters never hold every worker.
    namespace_workers: int | None = env("ICHOR_NAMESPACE_WORKERS", None, read=_int)
    #: Comma-separated ``<apiVersion>/<resource>`` an auto-patch health check may list in
    #: a workload cluster (a check over another is refused); Secrets are never allowed.
    health_check_resources: tuple[str, ...] = env(
        "ICHOR_HEALTH_CHECK_RESOURCES", DEFAULT_HEALTH_CHECK_RESOURCES, read=_resources
    )

    def backoff(self, failures: int) -> float:
        return float(min(self.backoff_initial * 2 ** max(failures - 1, 0), self.backoff_max))

    @property
    def group_workers(self) -> int:
        """The most clusters of one namespace reconciled at once (``namespace_share``)."""
        return namespace_share(self.workers, self.namespace_workers)


def _nothing() -> dict[str, Any]:
    """None."""
    return {}


def job_resources() -> dict[str, Any]:
    """50m CPU and 64Mi memory requested, 256Mi memory at most."""
    return {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}


@dataclass(frozen=True, kw_only=True)
class ExecutorSettings(_FromEnv):
    """The operations' Jobs: their images, commands and limits.

    ``talosctl_image`` is a template: ``{version}`` becomes the Talos release the command
    is for (the target of a Talos upgrade, the running Talos for ``upgrade-k8s``).
    """

    #: The talosctl image of the Talos and Kubernetes Jobs (``{version}`` is replaced).
    talosctl_image: str = env("ICHOR_TALOSCTL_IMAGE", "ghcr.io/siderolabs/talosctl:{version}")
    #: The helm image of the Cilium Jobs.
    helm_image: str = env("ICHOR_HELM_IMAGE", "docker.io/alpine/helm:3.19.0")
    #: The Image Factory of a node not built by one (a plain install); every other node's
    #: installer comes from the factory its own schematic names.
    image_factory: str = env("ICHOR_IMAGE_FACTORY", "factory.talos.dev")
    #: The Cilium chart (an OCI reference or a repository chart); air gaps point at a mirror.
    cilium_chart: str = env("ICHOR_CILIUM_CHART", DEFAULT_CILIUM_CHART)
    #: The Cilium chart version the Helm Jobs install: the one this Ichor embeds (no
    #: variable: Cilium moves only to the embedded chart).
    cilium_chart_version: str = PINNED.cilium_chart
    #: The Helm release name of Cilium in a workload cluster.
    cilium_release: str = env("ICHOR_CILIUM_RELEASE", "cilium")
    #: The namespace of that Helm release.
    cilium_namespace: str = env("ICHOR_CILIUM_NAMESPACE", "kube-system")
    #: Extra arguments of ``talosctl upgrade`` (space-separated; replace the defaults).
    talos_upgrade_args: tuple[str, ...] = env("ICHOR_TALOS_UPGRADE_ARGS", ("--wait",), read=_args)
    #: Extra arguments of ``talosctl upgrade-k8s`` (space-separated).
    upgrade_k8s_args: tuple[str, ...] = env("ICHOR_UPGRADE_K8S_ARGS", (), read=_args)
    #: Extra arguments of ``helm upgrade`` (space-separated; replace the defaults).
    helm_args: tuple[str, ...] = env(
        "ICHOR_HELM_ARGS", ("--reset-then-reuse-values", "--wait", "--timeout", "15m"), read=_args
    )
    #: The Jobs' service account; unset: the namespace's default, with no token mounted
    #: unless the Job talks to the cluster the operator runs in.
    service_account: str | None = env("ICHOR_EXECUTOR_SERVICE_ACCOUNT", None)
    #: Seconds the whole Job may run before Kubernetes fails it (its activeDeadlineSeconds).
    active_deadline_seconds: int = env("ICHOR_JOB_DEADLINE", 6 * 3600, read=_int)
    #: The ``imagePullPolicy`` of the Jobs' containers (no variable sets it).
    image_pull_policy: str = "IfNotPresent"
    #: Labels every Job carries besides Ichor's own (no variable sets them; Ichor's own
    #: win over one of the same name).
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    #: The nodeSelector of the Jobs' Pods (a JSON object of label values).
    node_selector: Mapping[str, str] = env(
        "ICHOR_EXECUTOR_NODE_SELECTOR", default_factory=_nothing, read=_json_labels
    )
    #: The tolerations of the Jobs' Pods (a JSON list of Kubernetes tolerations).
    tolerations: tuple[Mapping[str, Any], ...] = env(
        "ICHOR_EXECUTOR_TOLERATIONS", (), read=_json(list)
    )
    #: The affinity of the Jobs' Pods (a JSON Kubernetes affinity).
    affinity: Mapping[str, Any] = env(
        "ICHOR_EXECUTOR_AFFINITY", default_factory=_nothing, read=_json(dict)
    )
    #: The priorityClassName of the Jobs' Pods.
    priority_class: str | None = env("ICHOR_EXECUTOR_PRIORITY_CLASS", None)
    #: The resources of each container of the Jobs (a JSON Kubernetes ResourceRequirements).
    resources: Mapping[str, Any] = env(
        "ICHOR_EXECUTOR_RESOURCES", default_factory=job_resources, read=_json(dict)
    )
    #: Secrets (in the operation's namespace) the Jobs' images are pulled with,
    #: comma-separated.
    image_pull_secrets: tuple[str, ...] = env("ICHOR_EXECUTOR_IMAGE_PULL_SECRETS", (), read=_names)


@dataclass(frozen=True, kw_only=True)
class OperationSettings(_FromEnv):
    """The TalosOperation controller: how it paces its steps."""

    #: Seconds between two looks at a cluster with a Running operation when no event
    #: comes (Job events normally drive it).
    resync_interval: float = env("ICHOR_OPERATION_RESYNC", 30.0, read=_float)
    #: Seconds before a step that met a transient failure runs again.
    retry_delay: float = env("ICHOR_OPERATION_RETRY", 5.0, read=_float)
    #: Clusters whose operations are stepped at the same time.
    workers: int = env("ICHOR_OPERATION_WORKERS", 4, read=_int)
    #: Clusters of one namespace whose operations are stepped at the same time, at most
    #: ``ICHOR_OPERATION_WORKERS`` minus one (unset: that).
    namespace_workers: int | None = env("ICHOR_OPERATION_NAMESPACE_WORKERS", None, read=_int)
    #: Operations of one TalosCluster not finished yet (running or waiting) past which the
    #: webhook refuses another; it protects the operator, so it binds everyone.
    max_queued: int = env("ICHOR_MAX_QUEUED_OPERATIONS", MAX_QUEUED, read=_int)
    #: Seconds after a successful Talos or Kubernetes Job within which every Node must
    #: report the target, else the operation fails with ``NodesNotUpgraded``.
    node_version_deadline: float = env("ICHOR_NODE_VERSION_DEADLINE", 600.0, read=_float)
    executor: ExecutorSettings = section(ExecutorSettings)

    @property
    def group_workers(self) -> int:
        """The most clusters of one namespace stepped at once (``namespace_share``)."""
        return namespace_share(self.workers, self.namespace_workers)


@dataclass(frozen=True, kw_only=True)
class ReleaseCheckSettings(_FromEnv):
    """The release check: how the operator runs it (the IchorInstallation says what to
    list and how often)."""

    #: Seconds after a failed listing before the next try (never beyond the interval).
    retry_failed: float = env("ICHOR_RELEASE_RETRY", 600.0, read=_float_not_zero)
    #: Seconds after a failed status write before the next try.
    retry_write: float = 30.0
    #: Seconds of random wait before a due check, so replicas rarely list together.
    jitter: float = 10.0
    #: Seconds; a cap on the spec's interval (a demo or a test lists every few seconds).
    max_interval: float | None = env("ICHOR_RELEASE_MAX_INTERVAL", None, read=_float)
    #: The running Ichor, compared with the newest chart release (default: the installed
    #: package's version; the chart sets its own).
    running_version: str = env("ICHOR_VERSION", default_factory=package_version)
    #: The bounds of one registry listing (pages, tags, bytes, time, retries); no
    #: variable: the defaults fit the largest Talos repositories a hundred times over.
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True, kw_only=True)
class CredentialSettings(_FromEnv):
    """Kubeconfigs and talosconfigs read from Secrets: the two fields a Secret may set
    only where the operator's administrator allows it (``ichor.kube.credentials``)."""

    #: ``true``: a kubeconfig's or talosconfig's ``proxy-url`` is honoured (the operator's
    #: and the Jobs' requests then go through that address); ``false``: refused.
    allow_proxy: bool = env("ICHOR_CREDENTIALS_ALLOW_PROXY", False, read=_switch)
    #: ``true``: a kubeconfig's ``insecure-skip-tls-verify: true`` is honoured (the
    #: workload's certificate is not checked); ``false``: refused.
    allow_insecure_tls: bool = env("ICHOR_CREDENTIALS_ALLOW_INSECURE_TLS", False, read=_switch)


@dataclass(frozen=True, kw_only=True)
class Settings(_FromEnv):
    """The operator process: everything its environment tells it, in parts."""

    #: The operator's log level (a Python logging level name).
    log_level: str = env("ICHOR_LOG_LEVEL", "INFO")
    #: The name of a ClusterKopfPeering (the chart's, with ``replicas`` > 1): one replica
    #: runs the handlers, every replica serves the webhook. Unset: one replica, standalone.
    peering: str | None = env("ICHOR_PEERING", None)
    #: kopf's liveness endpoint, for example ``http://0.0.0.0:8080/healthz``; unset: none.
    liveness_endpoint: str | None = env("ICHOR_LIVENESS_ENDPOINT", None)
    #: This process's name in kopf's peering (the chart sets the Pod's name); unset: kopf
    #: names it after its user, and a user without a name is named ``uid<N>``. kopf reads
    #: it too.
    pod_id: str | None = env("POD_ID", None, read=_as_is)
    #: glibc's own setting of its mmap threshold, which glibc reads itself; set, the
    #: operator leaves the threshold as it says; unset, the operator fixes it at 128 KiB
    #: so that a closed TLS connection's 256 KiB buffer leaves the RSS (ichor.kube.allocator).
    malloc_mmap_threshold: str | None = env("MALLOC_MMAP_THRESHOLD_", None, read=_as_is)
    kube: KubeSettings = section(KubeSettings)
    webhook: WebhookSettings = section(WebhookSettings)
    metrics: MetricsSettings = section(MetricsSettings)
    clusters: ControllerSettings = section(ControllerSettings)
    operations: OperationSettings = section(OperationSettings)
    release_check: ReleaseCheckSettings = section(ReleaseCheckSettings)
    credentials: CredentialSettings = section(CredentialSettings)
    tenants: TenantSettings = section(TenantSettings)
    #: How the operator logs: ``text`` lines, or ``json``, one JSON object a line (kopf's
    #: JSON formatter: ``message``, ``severity``, ``timestamp``, and ``object`` for a
    #: line about a Kubernetes object), for a log collector.
    log_format: str = env("ICHOR_LOG_FORMAT", "text", read=_one_of("text", "json"))
    #: The readiness endpoint, for example ``http://0.0.0.0:8082/readyz``: it answers 200
    #: only while the webhook's listener serves (when a webhook is configured) and the
    #: process is not draining (SIGUSR1, the chart's preStop); unset: none.
    readiness_endpoint: str | None = env("ICHOR_READINESS_ENDPOINT", None)


@dataclass(frozen=True, kw_only=True)
class CliSettings(_FromEnv):
    """The ``ichor`` command: what it reads from its environment."""

    #: The kubeconfig file (``--kubeconfig`` wins; unset: ``~/.kube/config``), as for kubectl.
    kubeconfig: str | None = env("KUBECONFIG", None)
    #: Set: an unexpected error ends in its traceback instead of a one-line message.
    debug: bool = env("ICHOR_DEBUG", False, read=_flag)
