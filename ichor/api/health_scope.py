"""What an auto-patch health check may read: plain constants, no model.

Apart from ``ichor.api.autopatch`` (which re-exports them) so that the settings, and the
``ichor`` command that reads its own settings, need not load the API models to know them.
"""

from __future__ import annotations

#: Resources no health check reads, whatever the operator's settings allow: a check's
#: verdict is one bit its author reads from the condition, so a check over Secrets would
#: let whoever may write the spec test the workload's secret values one guess at a time.
NEVER_CHECKED = frozenset({"secrets"})
#: The resources a health check may read (``<apiVersion>/<resource>``) unless the operator
#: is told others (``ICHOR_HEALTH_CHECK_RESOURCES``, the chart's
#: ``autoPatchHealthCheckResources``): the workloads' readiness, nothing that holds secrets.
DEFAULT_HEALTH_CHECK_RESOURCES = (
    "v1/nodes",
    "v1/pods",
    "v1/configmaps",
    "apps/v1/deployments",
    "apps/v1/daemonsets",
    "apps/v1/statefulsets",
    "batch/v1/jobs",
    "policy/v1/poddisruptionbudgets",
)
