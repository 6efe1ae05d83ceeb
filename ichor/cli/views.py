"""What the CLI shows, computed from the API objects with the shared rule functions.

Pure: raw TalosCluster and IchorInstallation bodies in, frozen values out, each with a
``to_json()`` for ``--output json|yaml``. The choices, the "Not offered" lines and the
plans are the functions of ``ichor.upgrade`` (the ones the controller and the webhook
call), applied to the recorded release list, so ``ichor upgrade ... --list`` cannot
disagree with ``status.upgradeChoices`` or with the server's plan.

It refuses to judge anything itself: a version question goes to ``ichor.upgrade``, with
the site's policy read from the IchorInstallation as the controller reads it; a list that
cannot be used says why (``upgrade_choices.availability``) instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from ichor.api import ichorinstallation, taloscluster
from ichor.api.reading import read_model
from ichor.api.taloscluster import (
    ChoiceGroup,
    CNIStatus,
    NodeImages,
    TalosClusterSpec,
    TalosClusterStatus,
)
from ichor.release import steps
from ichor.release.policy import NO_POLICY, SitePolicy
from ichor.upgrade import blocked
from ichor.upgrade import choices as upgrade_choices
from ichor.upgrade import path_plan as plans
from ichor.upgrade.rule import ClusterVersions, Component


@dataclass(frozen=True)
class Cluster:
    """A TalosCluster as the CLI reads it (spec as written, status as observed)."""

    name: str
    namespace: str
    spec: TalosClusterSpec
    status: TalosClusterStatus

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Cluster:
        meta = body.get("metadata") or {}
        name = f"{meta.get('namespace', '?')}/{meta.get('name', '?')}"
        try:
            spec = TalosClusterSpec.model_validate(body.get("spec") or {})
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(
                f"TalosCluster {name} has a spec the CLI cannot read (spec.{where}: {first['msg']})"
            ) from None
        status = read_model(TalosClusterStatus, body.get("status")) or TalosClusterStatus()
        return cls(
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            spec=spec,
            status=status,
        )

    @property
    def versions(self) -> ClusterVersions:
        """What the rules read: the spec's versions and the CNI the controller observed."""
        return taloscluster.cluster_versions(spec=self.spec, cni=self.status.cni)

    def judged(self, policy: SitePolicy) -> ClusterVersions:
        """``versions`` with the site's policy, which the rules read with the table."""
        return taloscluster.cluster_versions(spec=self.spec, cni=self.status.cni, policy=policy)

    def condition(self, type_: str) -> tuple[str, str] | None:
        """(status, message) of a condition, if set."""
        for found in self.status.conditions:
            if found.type == type_:
                return str(found.status), found.message
        return None


@dataclass(frozen=True)
class ReleaseList:
    """One recorded list (Talos or Kubernetes) and whether it can be used."""

    tags: tuple[str, ...]
    availability: upgrade_choices.Availability


def release_list(installation: Mapping[str, Any] | None, component: Component) -> ReleaseList:
    """The recorded releases of ``component`` from the IchorInstallation's status.

    The same reading as the controller's: a failure of this list only (``talosError``
    or ``kubernetesError``) marks it stale; a status an earlier Ichor wrote with only
    ``error`` counts against both lists.
    """
    found = ichorinstallation.Installation.from_body(installation).recorded(component)
    return ReleaseList(tags=tuple(found.releases or ()), availability=found.availability)


def site_policy(installation: Mapping[str, Any] | None) -> SitePolicy:
    """The site's policy (``spec.policy``), read as the controller and the webhook read it."""
    return ichorinstallation.Installation.from_body(installation).policy


def _blocked_json(line: blocked.BlockedRelease) -> dict[str, Any]:
    return {
        "version": line.version.tag,
        "blocker": str(line.blocker),
        "reason": line.reason,
        "step": line.step,
        "overridable": line.overridable,
        "releasesNotOffered": line.not_offered,
        "needsNewerIchor": line.needs_newer_ichor,
        "message": line.message,
    }


@dataclass(frozen=True)
class ChoiceList:
    """``ichor upgrade talos|kubernetes CLUSTER --list``: the groups, the default, why a
    list is unavailable, and the recorded newer releases not offered."""

    cluster: str
    namespace: str
    component: Component
    running: str
    choices: upgrade_choices.Choices
    availability: upgrade_choices.Availability
    not_offered: tuple[blocked.BlockedRelease, ...]
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "namespace": self.namespace,
            "component": str(self.component),
            "running": self.running,
            "available": self.availability.available,
            "unavailableReason": self.availability.reason,
            "recommended": self.choices.recommended.tag if self.choices.recommended else None,
            "patch": [v.tag for v in self.choices.patch],
            "nextMinor": [v.tag for v in self.choices.next_minor],
            "default": self.choices.default.tag if self.choices.default else None,
            "note": self.note,
            "notOffered": [_blocked_json(line) for line in self.not_offered],
        }


def choice_list(
    cluster: Cluster,
    component: Component,
    releases: ReleaseList,
    *,
    policy: SitePolicy = NO_POLICY,
) -> ChoiceList:
    """The choices of one component, with the same functions the controller uses."""
    versions = cluster.judged(policy)
    running = versions.talos if component is Component.TALOS else versions.kubernetes
    note: str | None = None
    if not releases.availability.available:
        choices = upgrade_choices.Choices()
        lines: list[blocked.BlockedRelease] = []
    else:
        if component is Component.TALOS:
            choices = upgrade_choices.talos_choices(cluster=versions, releases=releases.tags)
        else:
            choices = upgrade_choices.kubernetes_choices(cluster=versions, releases=releases.tags)
            hold = upgrade_choices.kubernetes_hold(versions)
            if hold is not None:
                note = f"no Kubernetes is offered: {hold}"
        lines = blocked.blocked_releases(
            component=component, cluster=versions, releases=releases.tags
        )
    return ChoiceList(
        cluster=cluster.name,
        namespace=cluster.namespace,
        component=component,
        running=running,
        choices=choices,
        availability=releases.availability,
        not_offered=tuple(lines),
        note=note,
    )


def _step_json(step: plans.PlanStep) -> dict[str, Any]:
    return {
        "component": str(step.component),
        "target": step.target,
        "command": step.command,
        "why": step.why,
    }


def plan_json(result: plans.PathPlan) -> dict[str, Any]:
    return {
        "outcome": str(result.outcome),
        "goal": {
            "talos": result.goal.talos.tag if result.goal and result.goal.talos else None,
            "kubernetes": (
                result.goal.kubernetes.tag if result.goal and result.goal.kubernetes else None
            ),
            "defaulted": bool(result.goal and result.goal.defaulted),
        },
        "steps": [_step_json(step) for step in result.steps],
        "reason": result.reason,
        "blocked": _blocked_json(result.blocked) if result.blocked else None,
        "warnings": list(result.warnings),
        "instead": plan_json(result.instead) if result.instead else None,
    }


def path_plan(
    cluster: Cluster,
    *,
    talos: ReleaseList,
    kubernetes: ReleaseList,
    talos_goal: str | None,
    kubernetes_goal: str | None,
    policy: SitePolicy = NO_POLICY,
) -> plans.PathPlan:
    """``ichor upgrade plan``: the shared planner over the recorded releases."""
    return plans.plan_path(
        cluster=cluster.judged(policy),
        talos_releases=talos.tags,
        kubernetes_releases=kubernetes.tags,
        talos=talos_goal,
        kubernetes=kubernetes_goal,
        name=cluster.name,
        talos_availability=talos.availability,
        kubernetes_availability=kubernetes.availability,
    )


@dataclass(frozen=True)
class StatusRow:
    """One line of ``ichor status``."""

    namespace: str
    name: str
    talos: str
    kubernetes: str
    cilium: str
    compatible: str
    talos_upgrade: str
    kubernetes_upgrade: str
    ready: str
    message: str
    #: One cell: "-" (not configured), "suspended", "failed", "open until ...", "next ...".
    auto_patch: str = "-"
    auto_patch_json: dict[str, Any] | None = None
    #: One cell: "-" (not read yet), "1 image", "3 images" (the nodes differ).
    images: str = "-"
    images_json: dict[str, Any] | None = None
    #: Per image group when the nodes differ: "metal, SecureBoot, schematic abc…
    #: (iscsi-tools): cp-1, cp-2".
    image_lines: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "talos": self.talos,
            "kubernetes": self.kubernetes,
            "cilium": self.cilium,
            "compatible": self.compatible,
            "talosUpgrade": self.talos_upgrade,
            "kubernetesUpgrade": self.kubernetes_upgrade,
            "ready": self.ready,
            "message": self.message,
            "autoPatch": self.auto_patch_json,
            "nodeImages": self.images_json,
        }


def _moment(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%MZ")


def auto_patch_cell(cluster: Cluster) -> tuple[str, dict[str, Any] | None, str]:
    """The AUTO-PATCH cell, its JSON and the message a person must read (or "")."""
    recorded = cluster.status.auto_patch
    if recorded is None:
        return "-", None, ""
    ready = cluster.condition("AutoPatchReady")
    message = ready[1] if ready is not None and ready[0] == "False" else ""
    window = recorded.next_window
    if not recorded.enabled:
        cell = "off"
    elif recorded.suspension is not None:
        cell = "failed"
    elif recorded.reason == "Suspended":
        cell = "suspended"
    elif recorded.window_open and window is not None:
        cell = f"open until {_moment(window.end)}"
    elif window is not None:
        cell = f"next {_moment(window.start)}"
    else:
        cell = recorded.reason or "-"
    return cell, recorded.to_api(), message


def _running(spec: str, observed: str | None) -> str:
    if observed is None or observed == spec:
        return spec
    return f"{observed} (spec {spec})"


def status_row(cluster: Cluster) -> StatusRow:
    """What runs, whether it holds together and what it can move to, from the status the
    controller wrote (the choices are ``status.upgradeChoices``)."""
    status = cluster.status
    compatible = cluster.condition("VersionsCompatible")
    ready = cluster.condition("Ready")
    choices = status.upgrade_choices
    auto_cell, auto_json, auto_message = auto_patch_cell(cluster)
    return StatusRow(
        namespace=cluster.namespace,
        name=cluster.name,
        talos=_running(cluster.spec.talos_version, status.talos_version),
        kubernetes=_running(cluster.spec.kubernetes_version, status.kubernetes_version),
        cilium=_cilium_cell(status.cni),
        compatible=compatible[0] if compatible else "Unknown",
        talos_upgrade=_default_cell(choices.talos if choices else None),
        kubernetes_upgrade=_default_cell(choices.kubernetes if choices else None),
        ready=ready[0] if ready else "Unknown",
        message=_status_message(compatible, ready) or auto_message,
        auto_patch=auto_cell,
        auto_patch_json=auto_json,
        **_images(status.node_images),
    )


def _images(recorded: NodeImages | None) -> dict[str, Any]:
    """The IMAGES cell, its JSON and, when the nodes differ, one line per image."""
    if recorded is None:
        return {}
    lines = []
    if recorded.differ or recorded.unreadable:
        for group in recorded.groups:
            parts = [group.platform] + (["SecureBoot"] if group.secure_boot else [])
            schematic = f"schematic {group.schematic[:12]}" if group.schematic else "no schematic"
            if group.factory and group.factory != "factory.talos.dev":
                schematic += f" of {group.factory}"
            extensions = ", ".join(group.extensions) or "no extensions"
            nodes = ", ".join(group.nodes[:5]) + (
                f" and {len(group.nodes) - 5} more" if len(group.nodes) > 5 else ""
            )
            lines.append(f"{', '.join(parts)}, {schematic} ({extensions}): {nodes}")
        lines.extend(recorded.unreadable)
    return {
        "images": recorded.summary or "-",
        "images_json": recorded.to_api(),
        "image_lines": tuple(lines),
    }


def _cilium_cell(cni: CNIStatus | None) -> str:
    """The CILIUM cell: its version, ``-`` when no CNI was seen, another CNI in brackets."""
    if cni is None or not cni.detected:
        return "-"
    if steps.is_cilium(cni.detected):
        return cni.detected_version or "cilium (version unread)"
    return f"({cni.detected})"


def _default_cell(choice: ChoiceGroup | None) -> str:
    """An UPGRADE cell: the default choice of the component, else ``-``."""
    return choice.default if choice and choice.default else "-"


def _status_message(compatible: tuple[str, str] | None, ready: tuple[str, str] | None) -> str:
    """The MESSAGE of a cluster: why it is not compatible, else why it is not ready."""
    if compatible is not None and compatible[0] != "True":
        return compatible[1]
    if ready is not None and ready[0] != "True":
        return ready[1]
    return ""


def status_rows(bodies: Sequence[Mapping[str, Any]]) -> list[StatusRow]:
    rows: list[StatusRow] = []
    for body in bodies:
        try:
            rows.append(status_row(Cluster.of(body)))
        except ValueError as error:
            meta = body.get("metadata") or {}
            rows.append(
                StatusRow(
                    namespace=str(meta.get("namespace", "")),
                    name=str(meta.get("name", "")),
                    talos="?",
                    kubernetes="?",
                    cilium="?",
                    compatible="Unknown",
                    talos_upgrade="-",
                    kubernetes_upgrade="-",
                    ready="Unknown",
                    message=str(error),
                )
            )
    return rows


def age(since: datetime, now: datetime) -> str:
    """kubectl's AGE (apimachinery's ``duration.HumanDuration``): ``45s``, ``5m30s``,
    ``2h10m``, ``3d4h``, ``2y12d``."""
    seconds = int((now - since).total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return _two(minutes, "m", seconds % 60, "s")
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return _two(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return _two(hours // 24, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        return _two(hours // 24 // 365, "y", (hours // 24) % 365, "d")
    return f"{hours // 24 // 365}y"


def _two(big: int, unit: str, rest: int, small: str) -> str:
    """``5m30s``, or ``5m`` when the smaller unit's ``rest`` is 0."""
    return f"{big}{unit}{rest}{small}" if rest else f"{big}{unit}"


@dataclass(frozen=True)
class OperationRow:
    """One line of ``ichor operations``."""

    namespace: str
    name: str
    cluster: str
    type: str
    version: str
    phase: str
    age: str
    created: str
    job: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "cluster": self.cluster,
            "type": self.type,
            "version": self.version or None,
            "phase": self.phase,
            "createdAt": self.created or None,
            "job": self.job or None,
            "message": self.message or None,
        }


def _created(body: Mapping[str, Any]) -> datetime | None:
    stamp = (body.get("metadata") or {}).get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")) if stamp else None
    except ValueError:
        return None


def operation_rows(
    bodies: Sequence[Mapping[str, Any]], *, cluster: str | None, now: datetime
) -> list[OperationRow]:
    """The operations (of ``cluster`` alone when given), oldest first, as read: an
    unset field is ``-``; nothing is judged."""
    rows = [
        (_created(body) or datetime.min.replace(tzinfo=UTC), _operation_row(body, now=now))
        for body in bodies
        if cluster is None or _target(body) == cluster
    ]
    rows.sort(key=lambda pair: (pair[0], pair[1].namespace, pair[1].name))
    return [row for _, row in rows]


def _target(body: Mapping[str, Any]) -> str:
    """The name of the cluster an operation names, or ``""``."""
    return str(((body.get("spec") or {}).get("clusterRef") or {}).get("name") or "")


def _operation_row(body: Mapping[str, Any], *, now: datetime) -> OperationRow:
    """One operation as read: an unset field is ``-`` (or empty in JSON)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    created = _created(body)
    return OperationRow(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        cluster=_target(body) or "-",
        type=str(spec.get("type") or "-"),
        version=str(spec.get("version") or ""),
        phase=str(status.get("phase") or "Pending"),
        age=age(created, now) if created else "-",
        created=str(meta.get("creationTimestamp") or ""),
        job=str(status.get("jobName") or ""),
        message=str(status.get("message") or ""),
    )
