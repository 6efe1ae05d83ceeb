"""Shapes of auto-patch: the settings (``spec.autoPatch`` of a TalosCluster and of the
IchorInstallation) and what the controller records (``status.autoPatch`` of both).

The IchorInstallation's settings are the fleet default (the chart sets them from its
values); a TalosCluster's own win field by field: a field the cluster leaves unset
(``None`` here) is the fleet's. Auto-patch is off unless some ``components`` and some
``windows`` are set, and ``cilium`` is a valid component that selects nothing (Cilium
moves only with the chart an Ichor release embeds, by a person).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from ichor.api._base import ApiModel
from ichor.api.health_scope import (
    DEFAULT_HEALTH_CHECK_RESOURCES as DEFAULT_HEALTH_CHECK_RESOURCES,
)
from ichor.api.health_scope import NEVER_CHECKED as NEVER_CHECKED

#: A patch is taken once the release check has listed it for this long (the CRD default).
DEFAULT_MIN_RELEASE_AGE = "72h"
#: Clusters of the fleet that may run an auto-patch operation at the same time.
DEFAULT_MAX_CONCURRENT_CLUSTERS = 1
#: The zone of a window that names none.
DEFAULT_TIME_ZONE = "UTC"
#: The longest window: a longer one would be open all the time.
MAX_WINDOW_HOURS = 168
#: Annotation a person sets on a TalosCluster to resume auto-patch after a failure: its
#: value is the name of the failed operation (``status.autoPatch.suspension.operation``).
RESUME_ANNOTATION = "ichor.dev/auto-patch-resume"
#: Annotation the operator sets on a failed auto-patch operation once the fleet's record
#: holds its halt (the value: the halt's end). Until then, the failing cluster asks for
#: the halt at every look, and a start elsewhere takes the failure as a halt by itself.
HALTED_ANNOTATION = "ichor.dev/auto-patch-halted"
#: Annotation a person sets on the IchorInstallation to lift a halt before its end
#: (``ichor autopatch unhalt``): ``<component>/<version>`` or ``all``. The webhook records
#: who set it (an admission record); the operator lifts the halt, posts an Event naming
#: that person, and removes the annotation.
UNHALT_ANNOTATION = "ichor.dev/unhalt"
#: The value of ``UNHALT_ANNOTATION`` that lifts every halt in force.
UNHALT_ALL = "all"
#: ``spec.autoPatch.fleetHaltNamespaces`` entry that trusts every namespace (one tenant).
EVERY_NAMESPACE = "*"


class AutoPatchComponent(StrEnum):
    TALOS = "talos"
    KUBERNETES = "kubernetes"
    #: Accepted and selects nothing: Cilium moves only with the embedded chart.
    CILIUM = "cilium"


class Window(ApiModel):
    """A maintenance window: opens at each time ``schedule`` (five-field cron, read in
    ``time_zone``) names and stays open for ``duration`` (``4h``, ``90m``, ``1h30m``)."""

    schedule: str
    duration: str
    time_zone: str = DEFAULT_TIME_ZONE


#: Limits of the health checks a person declares (the CRD holds the same).
MAX_HEALTH_CHECKS = 16
MAX_EXPRESSION_LENGTH = 1024
# NEVER_CHECKED, DEFAULT_HEALTH_CHECK_RESOURCES: ichor.api.health_scope (imported above).


class HealthCheck(ApiModel):
    """A gate a person declares: a CEL ``expression`` over the objects of one resource of
    the workload cluster (``objects``: the list, each the object's JSON as the API server
    returns it), which must be true before auto-patch starts anything. ``namespace``
    unset: every namespace."""

    name: str
    api_version: str
    resource: str
    namespace: str | None = None
    expression: str

    @property
    def resource_key(self) -> str:
        """``<apiVersion>/<resource>``, as the operator's allow-list names it."""
        return f"{self.api_version}/{self.resource}"


class AutoPatchSpec(ApiModel):
    """A cluster's own settings; ``None`` is "the fleet's"."""

    components: tuple[AutoPatchComponent, ...] | None = None
    windows: tuple[Window, ...] | None = None
    min_release_age: str | None = None
    suspended: bool | None = None
    health_checks: tuple[HealthCheck, ...] | None = None


class FleetAutoPatchSpec(AutoPatchSpec):
    """The IchorInstallation's settings: the fleet default, and the fleet's own limit."""

    max_concurrent_clusters: int | None = None
    #: Namespaces whose failed patch halts its version for every cluster of the fleet; a
    #: failure elsewhere halts it for its own namespace only. ``*``: every namespace.
    fleet_halt_namespaces: tuple[str, ...] | None = None


class RunResult(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class WindowTimes(ApiModel):
    start: datetime
    end: datetime


class LastRun(ApiModel):
    """The newest operation auto-patch started for the cluster."""

    operation: str
    component: str
    version: str
    result: RunResult
    time: datetime


class Suspension(ApiModel):
    """Auto-patch stopped for the cluster after a failed operation, until a person sets
    ``ichor.dev/auto-patch-resume`` to the operation's name."""

    operation: str
    component: str
    version: str
    reason: str
    time: datetime


class AutoPatchStatus(ApiModel):
    """``TalosCluster.status.autoPatch``: the controller's, nobody else may write it."""

    enabled: bool = False
    window_open: bool = False
    #: The open window (when ``window_open``), else the next one; None: none is due.
    next_window: WindowTimes | None = None
    last_run: LastRun | None = None
    suspension: Suspension | None = None
    #: Why nothing runs now (CamelCase), and the sentence for a person.
    reason: str | None = None
    message: str | None = None


class HaltScope(StrEnum):
    """Whose clusters a halt holds."""

    #: The clusters of the failing cluster's namespace only.
    NAMESPACE = "Namespace"
    #: Every cluster: the failing cluster's namespace is trusted to halt the fleet.
    FLEET = "Fleet"


class Halt(ApiModel):
    """One version not started again until ``until`` (the end of the window in which its
    upgrade ran and failed on ``cluster``), by the clusters ``scope`` names."""

    component: str
    version: str
    cluster: str
    operation: str
    reason: str
    time: datetime
    until: datetime
    #: A halt an earlier Ichor recorded had no scope: it held the fleet.
    scope: HaltScope = HaltScope.FLEET
    #: A person lifted it before ``until`` (``ichor autopatch unhalt``): it holds nothing.
    #: It stays in the record until ``until`` so its failure is not recorded again.
    lifted_by: str | None = None
    lifted_at: datetime | None = None

    @property
    def namespace(self) -> str:
        """The failing cluster's namespace (``cluster`` is ``namespace/name``)."""
        return self.cluster.partition("/")[0]

    def holds(self, *, component: str, version: str, namespace: str, now: datetime) -> bool:
        """Whether it keeps a cluster of ``namespace`` from starting ``component version``."""
        return (
            self.component == component
            and self.version == version
            and self.until > now
            and self.lifted_by is None
            and (self.scope is HaltScope.FLEET or self.namespace == namespace)
        )


class SeenRelease(ApiModel):
    """When auto-patch first found a version in the recorded release list."""

    component: str
    version: str
    first_seen: datetime


class FleetAutoPatchStatus(ApiModel):
    """``IchorInstallation.status.autoPatch``."""

    halts: tuple[Halt, ...] = ()
    seen: tuple[SeenRelease, ...] = ()


@dataclass(frozen=True)
class Unhalt:
    """What a value of ``UNHALT_ANNOTATION`` asks: lift the halts of one version, or all."""

    component: str | None = None
    version: str | None = None

    @property
    def everything(self) -> bool:
        return self.component is None

    def matches(self, halt: Halt) -> bool:
        return self.everything or (
            halt.component == self.component and halt.version == self.version
        )

    def __str__(self) -> str:
        return UNHALT_ALL if self.everything else f"{self.component}/{self.version}"


#: The longest value of ``UNHALT_ANNOTATION`` read.
MAX_UNHALT_LENGTH = 128
_UNHALT_VERSION = re.compile(r"v[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,6}")
_UNHALTED_COMPONENTS = (AutoPatchComponent.TALOS.value, AutoPatchComponent.KUBERNETES.value)


def parse_unhalt(value: object) -> Unhalt:
    """The request a value of ``UNHALT_ANNOTATION`` makes; raises ``ValueError`` with a
    sentence saying what is wrong and the form it takes."""
    form = (
        f"{UNHALT_ANNOTATION} takes <component>/<version> (talos/v1.14.5, "
        f"kubernetes/v1.36.7) or {UNHALT_ALL}"
    )
    if not isinstance(value, str):
        raise ValueError(f"{form}; it is not a string")
    if len(value) > MAX_UNHALT_LENGTH:
        raise ValueError(f"{form}; its value holds {len(value):,} characters")
    if value == UNHALT_ALL:
        return Unhalt()
    component, slash, version = value.partition("/")
    if not slash or component not in _UNHALTED_COMPONENTS or not _UNHALT_VERSION.fullmatch(version):
        raise ValueError(f"{form}, not {value!r}")
    return Unhalt(component=component, version=version)
