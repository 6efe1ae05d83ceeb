"""A TalosCluster's status, computed from its spec, what was observed and the release lists.

Pure: the same inputs give the same status and the same Events to post. It applies the
shared rules (``ichor.release``, ``ichor.upgrade``) to one cluster and words the result as
conditions: ``VersionsCompatible``, ``Ready``, the ``*UpgradeAvailable`` conditions with
``status.upgradeChoices``, and ``UpgradesBlocked`` with ``status.blockedReleases``. A spec
no rule can read gets ``InvalidSpec`` conditions; nothing here raises for a bad object.

More in docs/design/notes.md, "ichor/controller/taloscluster/status.py".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from ichor.api import ichorinstallation, taloscluster
from ichor.api.autopatch import AutoPatchStatus
from ichor.api.conditions import ClusterConditionType, ClusterReason, Condition, ConditionStatus
from ichor.api.events import ClusterEventReason, RecordEventReason
from ichor.api.taloscluster import (
    BlockedLine,
    BlockedReleases,
    ChoiceGroup,
    CNIPreset,
    CNIStatus,
    NodeVersions,
    TalosClusterSpec,
    TalosClusterStatus,
    UpgradeChoices,
)
from ichor.controller.declarative.decisions import ActiveOperation, Declared
from ichor.controller.observe import Observation
from ichor.kube import conditions
from ichor.kube.bodies import EventType, PlannedEvent
from ichor.release import steps
from ichor.release.observed import Unreadable
from ichor.release.policy import SitePolicy
from ichor.release.refusals import Refusal, Rule
from ichor.release.release_set import PINNED
from ichor.release.versions import VersionError, check_contract, check_spec_version
from ichor.upgrade import blocked, site
from ichor.upgrade import choices as upgrade_choices
from ichor.upgrade.rule import Component

Type = ClusterConditionType
Reason = ClusterReason


@dataclass(frozen=True)
class Failure:
    """Why the workload cluster could not be read this time."""

    reason: ClusterReason
    message: str


#: What the controller knows of the IchorInstallation singleton (read as the CLI reads it).
Installation = ichorinstallation.Installation


@dataclass(frozen=True)
class Outcome:
    status: TalosClusterStatus
    events: tuple[PlannedEvent, ...]
    #: The site policy entries that act on the cluster (``ichor.upgrade.site``), for the
    #: IchorInstallation's count; empty while no list can be judged.
    site_entries: frozenset[str] = frozenset()


def read_spec(raw: Mapping[str, Any]) -> tuple[TalosClusterSpec | None, tuple[str, ...]]:
    """The spec, and what is wrong with it (empty when the rules can read it)."""
    try:
        spec = TalosClusterSpec.model_validate(raw)
    except ValidationError as error:
        problems = tuple(
            f"spec.{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
            for item in error.errors()
        )
        return None, problems
    found: list[str] = []
    for field, value in (
        ("spec.talosVersion", spec.talos_version),
        ("spec.kubernetesVersion", spec.kubernetes_version),
    ):
        try:
            check_spec_version(value, field=field)
        except VersionError as error:
            found.append(str(error))
    try:
        check_contract(spec.version_contract)
    except VersionError as error:
        found.append(f"spec.versionContract: {error}")
    return spec, tuple(found)


class _Builder:
    def __init__(self, *, generation: int | None) -> None:
        self.generation = generation
        self.items: list[Condition] = []

    def add(
        self, type_: ClusterConditionType, status: ConditionStatus, reason: str, message: str
    ) -> None:
        self.items.append(
            Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message,
                observed_generation=self.generation,
                # replaced by conditions.merge with the right transition time
                last_transition_time=datetime.min,
            )
        )


T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN


def _ready(
    builder: _Builder,
    *,
    spec_unreadable: bool,
    observation: Observation | None,
    failure: Failure | None,
) -> None:
    if failure is not None:
        builder.add(Type.READY, F, failure.reason, failure.message)
        return
    if observation is None:
        message = "the workload cluster has not been read yet"
        if spec_unreadable:
            message = "the spec cannot be read, so the workload cluster is not read"
            builder.add(Type.READY, F, Reason.INVALID_SPEC, message)
        else:
            builder.add(Type.READY, U, Reason.WORKLOAD_UNREACHABLE, message)
        return
    nodes = observation.nodes
    if nodes.unreadable:  # before NoNodes: a Node list that cannot be read counts none
        builder.add(Type.READY, F, Reason.NODE_VERSION_UNREADABLE, "; ".join(nodes.unreadable))
        return
    if nodes.count == 0:
        builder.add(Type.READY, F, Reason.NO_NODES, "the workload cluster has no Nodes")
        return
    if nodes.differ:
        message = (
            f"nodes differ (an upgrade half done?): Talos {', '.join(nodes.talos_versions)}; "
            f"Kubernetes {', '.join(nodes.kubernetes_versions)}; status shows the lowest"
        )
        builder.add(Type.READY, T, Reason.NODES_DIFFER, message)
        return
    noun = "node runs" if nodes.count == 1 else "nodes run"
    builder.add(
        Type.READY,
        T,
        Reason.OBSERVED,
        f"{nodes.count} {noun} Talos {nodes.talos} and Kubernetes {nodes.kubernetes}",
    )


def _refusal_reason(refusal: Refusal) -> ClusterReason:
    if refusal.rule is Rule.UNKNOWN_VERSION:
        return Reason.UNKNOWN_VERSION
    if refusal.rule is Rule.CILIUM_KUBERNETES:
        return Reason.CILIUM_KUBERNETES_INCOMPATIBLE
    if refusal.rule is Rule.FORM:
        return Reason.INVALID_SPEC
    return Reason.TALOS_KUBERNETES_INCOMPATIBLE


def _compatible(builder: _Builder, *, spec: TalosClusterSpec, cni: CNIStatus) -> None:
    """The spec's pair and the running Cilium, judged by the shared Kubernetes step.

    A Cilium seen whose release cannot be read leaves the question open (Unknown, reason
    ``CiliumVersionUnreadable``): nothing says whether it runs the spec's Kubernetes, and
    every Kubernetes step is refused until it can be read."""
    talos, kubernetes = spec.talos_version, spec.kubernetes_version
    cilium = steps.cilium_release(
        preset=spec.cni.preset.value,
        detected=cni.detected,
        version=cni.detected_version,
        unreadable=cni.unreadable,
    )
    try:
        refusal = steps.check_kubernetes_step(talos=talos, kubernetes=kubernetes, cilium=cilium)
    except VersionError as error:
        builder.add(Type.VERSIONS_COMPATIBLE, F, Reason.INVALID_SPEC, str(error))
        return
    if refusal is not None and refusal.rule is Rule.UNREADABLE_VERSION:
        assert isinstance(cilium, Unreadable)
        builder.add(
            Type.VERSIONS_COMPATIBLE,
            U,
            Reason.CILIUM_VERSION_UNREADABLE,
            f"{cilium.what}, so whether it runs Kubernetes {kubernetes} is unknown and every "
            f"Kubernetes and Cilium step is refused (no override passes it); {cilium.step}",
        )
        return
    skipped = _skipped_cilium(spec=spec, cni=cni)
    if refusal is not None:
        message = refusal.message + (f" {skipped}" if skipped else "")
        builder.add(Type.VERSIONS_COMPATIBLE, F, _refusal_reason(refusal), message)
        return
    message = f"Talos {talos} runs Kubernetes {kubernetes}"
    if skipped:
        builder.add(Type.VERSIONS_COMPATIBLE, T, Reason.UNMANAGED_CILIUM, f"{message}; {skipped}")
        return
    if cilium is not None:
        message += f", and Cilium {cilium} runs it too"
    elif spec.cni.preset is CNIPreset.UNMANAGED:
        message += "; the CNI is unmanaged, so Ichor does not judge it"
    elif cni.detected:
        message += f"; the CNI is {cni.detected}, which Ichor does not judge"
    else:
        message += "; the CNI is not observed yet, so Cilium is not judged"
    builder.add(Type.VERSIONS_COMPATIBLE, T, Reason.COMPATIBLE, message)


def _skipped_cilium(*, spec: TalosClusterSpec, cni: CNIStatus) -> str | None:
    """The sentence of a Cilium seen on a cluster whose ``spec.cni.preset`` is unmanaged
    (the Cilium rule is skipped there): what runs, and what the rule would say of the
    spec's Kubernetes; None for any other cluster."""
    if spec.cni.preset is not CNIPreset.UNMANAGED or not steps.is_cilium(cni.detected):
        return None
    seen = steps.seen_cilium(version=cni.detected_version, unreadable=cni.unreadable)
    runs = f"Cilium {seen} runs on the cluster" if isinstance(seen, str) else seen.what
    try:
        said = steps.skipped_cilium_half(
            preset=spec.cni.preset.value,
            detected=cni.detected,
            version=cni.detected_version,
            unreadable=cni.unreadable,
            kubernetes=spec.kubernetes_version,
        )
    except VersionError:
        said = None
    judged = (
        f"the Cilium rule would refuse Kubernetes {spec.kubernetes_version} ({said.message})"
        if said is not None
        else f"the Cilium rule would accept Kubernetes {spec.kubernetes_version}"
    )
    return (
        f"{runs}, and spec.cni.preset is unmanaged, so Ichor does not judge it: "
        f"{judged}; every Kubernetes step it would refuse is recorded as a Warning "
        f"Event {RecordEventReason.CILIUM_RULE_SKIPPED} naming the user"
    )


def _group(
    choices: upgrade_choices.Choices, availability: upgrade_choices.Availability
) -> ChoiceGroup:
    return ChoiceGroup(
        recommended=choices.recommended.tag if choices.recommended else None,
        patch=tuple(v.tag for v in choices.patch),
        next_minor=tuple(v.tag for v in choices.next_minor),
        default=choices.default.tag if choices.default else None,
        available=availability.available,
        unavailable_reason=availability.reason,
    )


def _offer_message(name: str, choices: upgrade_choices.Choices) -> str:
    parts = []
    if choices.default is not None:
        parts.append(f"{name} {choices.default.tag} is the default choice")
    if choices.recommended is not None:
        parts.append(f"recommended {choices.recommended.tag}")
    if choices.patch:
        parts.append("patch " + ", ".join(v.tag for v in choices.patch))
    if choices.next_minor:
        parts.append("next minor " + ", ".join(v.tag for v in choices.next_minor))
    return "; ".join(parts)


def _upgrades(
    builder: _Builder,
    *,
    spec: TalosClusterSpec,
    cni: CNIStatus,
    installation: Installation,
) -> tuple[UpgradeChoices, list[blocked.BlockedRelease] | None]:
    """The choices, and the blocked lines of the lists that can be used (None: none can).

    The site's policy is read with the table: a release it denies is not offered (the
    default moves to the next one), and a policy that cannot be read offers nothing."""
    cluster = taloscluster.cluster_versions(spec=spec, cni=cni, policy=installation.policy)
    groups: dict[str, ChoiceGroup] = {}
    lines: list[blocked.BlockedRelease] | None = None
    for name, type_, component in (
        ("Talos", Type.TALOS_UPGRADE_AVAILABLE, Component.TALOS),
        ("Kubernetes", Type.KUBERNETES_UPGRADE_AVAILABLE, Component.KUBERNETES),
    ):
        recorded = installation.recorded(component)
        releases, availability = recorded.releases, recorded.availability
        if not availability.available:
            groups[name] = _group(upgrade_choices.Choices(), availability)
            builder.add(type_, U, Reason.LIST_UNAVAILABLE, availability.reason or "")
            continue
        lines = (lines or []) + blocked.blocked_releases(
            component=component, cluster=cluster, releases=releases or ()
        )
        if name == "Talos":
            choices = upgrade_choices.talos_choices(cluster=cluster, releases=releases or ())
        else:
            hold = upgrade_choices.kubernetes_hold(cluster)
            if hold is not None:
                groups[name] = _group(upgrade_choices.Choices(), availability)
                held = (
                    Reason.CILIUM_VERSION_UNREADABLE
                    if isinstance(cluster.cilium, Unreadable)
                    else Reason.CNI_NOT_OBSERVED
                )
                builder.add(type_, U, held, f"no Kubernetes is offered: {hold}")
                continue
            choices = upgrade_choices.kubernetes_choices(cluster=cluster, releases=releases or ())
        groups[name] = _group(choices, availability)
        stale = f" ({availability.reason})" if availability.reason else ""
        if installation.policy.unreadable is not None:
            builder.add(
                type_,
                U,
                Reason.SITE_POLICY_UNREADABLE,
                f"no {name} is offered: this site's policy (IchorInstallation ichor, "
                f"spec.policy) cannot be read ({installation.policy.unreadable}); correct it",
            )
            continue
        if choices.offered:
            builder.add(type_, T, Reason.UPGRADE_AVAILABLE, _offer_message(name, choices) + stale)
        else:
            running = spec.talos_version if name == "Talos" else spec.kubernetes_version
            builder.add(
                type_,
                F,
                Reason.UP_TO_DATE,
                f"no published {name} newer than {running} passes the upgrade rules{stale}",
            )
    return UpgradeChoices(talos=groups["Talos"], kubernetes=groups["Kubernetes"]), lines


def _blocked(
    builder: _Builder, lines: list[blocked.BlockedRelease] | None
) -> BlockedReleases | None:
    """``UpgradesBlocked`` and ``status.blockedReleases`` from the blocked lines."""
    if lines is None:
        builder.add(
            Type.UPGRADES_BLOCKED,
            U,
            Reason.LIST_UNAVAILABLE,
            "no release list can be used, so no blocked release is known",
        )
        return None
    summary = blocked.summarize(lines)
    if summary.count:
        builder.add(Type.UPGRADES_BLOCKED, T, Reason.RELEASES_NOT_OFFERED, summary.message)
    else:
        builder.add(Type.UPGRADES_BLOCKED, F, Reason.ALL_OFFERED, summary.message)
    return BlockedReleases(
        count=summary.count,
        releases=summary.releases,
        nearest=tuple(
            BlockedLine(
                component=str(line.component),
                version=line.version.tag,
                blocker=str(line.blocker),
                message=line.message,
            )
            for line in summary.nearest
        ),
    )


def _frozen_patch(override: str | None) -> tuple[str | None, str]:
    """(override to keep, sentence for the condition). One the chart reached is cleared
    with no Event: the status field and ``CiliumUpgradeAvailable`` say what is."""
    if not override:
        return None, ""
    try:
        newer = steps.frozen_patch(override) is not None
    except VersionError:
        return override, f"; a recorded image patch {override!r} cannot be read"
    if newer:
        chart = PINNED.cilium_chart
        return (
            override,
            f"; Cilium runs patch {override} over chart {chart} (set by an earlier Ichor); "
            f"it stays until an Ichor embedding {override} or newer",
        )
    return None, ""


def _cilium(
    builder: _Builder, *, spec: TalosClusterSpec | None, cni: CNIStatus, frozen: str
) -> None:
    chart = PINNED.cilium_chart
    type_ = Type.CILIUM_UPGRADE_AVAILABLE
    if spec is not None and spec.cni.preset is CNIPreset.UNMANAGED:
        builder.add(
            type_, F, Reason.NOT_CILIUM, "the CNI is unmanaged: Ichor installs no Cilium" + frozen
        )
        return
    if cni.detected is None:
        builder.add(type_, U, Reason.CNI_NOT_OBSERVED, "no CNI is observed yet" + frozen)
        return
    if not steps.is_cilium(cni.detected):
        builder.add(
            type_, F, Reason.NOT_CILIUM, f"the cluster runs {cni.detected}, not Cilium" + frozen
        )
        return
    running = steps.seen_cilium(version=cni.detected_version, unreadable=cni.unreadable)
    if isinstance(running, Unreadable):
        builder.add(
            type_,
            U,
            Reason.CILIUM_VERSION_UNREADABLE,
            f"{running.what}, so the chart upgrade is refused too (it could step Cilium "
            f"back); {running.step}" + frozen,
        )
        return
    try:
        older = steps.cilium_behind_chart(running, chart=chart)
    except VersionError:
        builder.add(
            type_,
            U,
            Reason.CILIUM_VERSION_UNREADABLE,
            f"the running Cilium release {running!r} cannot be read" + frozen,
        )
        return
    if older:
        builder.add(
            type_,
            T,
            Reason.CHART_NEWER,
            f"Cilium {running} runs; this Ichor embeds chart {chart}: run `ichor cni upgrade`"
            + frozen,
        )
    else:
        builder.add(
            type_,
            F,
            Reason.UP_TO_DATE,
            f"Cilium {running} runs, not older than chart {chart} this Ichor embeds" + frozen,
        )


def evaluate(
    *,
    spec: Mapping[str, Any],
    generation: int | None,
    previous: TalosClusterStatus,
    observation: Observation | None,
    failure: Failure | None,
    installation: Installation,
    now: datetime,
    active: Sequence[ActiveOperation] = (),
    declared: Declared | None = None,
) -> Outcome:
    """The status to write and the Events to post, from what is known now.

    ``observation`` is the last successful read of the workload cluster (kept across a
    failure, so the status keeps what was last seen); ``failure`` the current failure;
    ``active`` the cluster's operations that are Pending or Running; ``declared``
    where a ``Declarative`` cluster stands against its spec (None in ``Operations``).
    Auto-patch's part is added by ``with_auto_patch``, at the same ``now``.

    Under ``Declarative``, ``Ready`` is True only once the Nodes run the spec's
    versions: ``kubectl wait --for=condition=Ready`` after a spec bump waits for it.
    """
    cluster_spec, problems = read_spec(spec)
    builder = _Builder(generation=generation)
    _ready(
        builder,
        spec_unreadable=cluster_spec is None,
        observation=observation,
        failure=failure,
    )
    kept_override, frozen = _frozen_patch(previous.cni.image_override if previous.cni else None)
    seen = _seen(observation, previous, image_override=kept_override)
    cni = seen.cni
    site_entries: frozenset[str] = frozenset()
    if cluster_spec is None or problems:
        _unjudged(builder, problems)
        upgrade_choices, blocked_releases = None, None
    else:
        _compatible(builder, spec=cluster_spec, cni=cni)
        upgrade_choices, lines = _upgrades(
            builder, spec=cluster_spec, cni=cni, installation=installation
        )
        blocked_releases = _blocked(builder, lines)
        site_entries = _site_entries(spec=cluster_spec, cni=cni, installation=installation)
    _cilium(builder, spec=cluster_spec, cni=cni, frozen=frozen)
    if declared is not None:
        _declared(builder, declared)
    progress = _progress(
        declared=declared,
        generation=generation,
        problems=problems or (("the spec cannot be read",) if cluster_spec is None else ()),
        builder_items=builder.items,
        observation=observation,
        active=active,
    )
    status = TalosClusterStatus(
        observed_generation=generation,
        talos_version=seen.talos,
        kubernetes_version=seen.kubernetes,
        nodes=seen.nodes,
        cni=cni,
        upgrade_choices=upgrade_choices,
        blocked_releases=blocked_releases,
        # auto-patch's own: ``with_auto_patch`` writes its part (Operations mode only)
        auto_patch=previous.auto_patch if declared is None else None,
        # the Talos operations' read writes it; carried over unchanged
        node_images=previous.node_images,
        conditions=_conditions(previous, builder, progress, declared=declared, now=now),
    )
    return Outcome(
        status=status, events=tuple(_events(previous, status)), site_entries=site_entries
    )


def policy_tally(
    *, policy: SitePolicy, generation: int | None, acting: Sequence[frozenset[str]]
) -> ichorinstallation.SitePolicyStatus:
    """``IchorInstallation.status.sitePolicy``: each entry of ``policy`` and how many of the
    judged clusters it acts on (``acting``: one set of entry names per cluster)."""
    counts = Counter(name for names in acting for name in names)
    return ichorinstallation.SitePolicyStatus(
        observed_generation=generation,
        clusters=len(acting),
        entries=tuple(
            ichorinstallation.PolicyEntryStatus(
                name=entry.name,
                kind=entry.kind.value,
                component=entry.component.value,
                clusters=counts[entry.name],
            )
            for entry in policy.entries
        ),
        unreadable=policy.unreadable,
    )


def _site_entries(
    *, spec: TalosClusterSpec, cni: CNIStatus, installation: Installation
) -> frozenset[str]:
    """The policy entries that act on the cluster, over the lists that can be used."""
    listed = {
        component: installation.recorded(component)
        for component in (Component.TALOS, Component.KUBERNETES)
    }
    return site.acting_entries(
        cluster=taloscluster.cluster_versions(spec=spec, cni=cni, policy=installation.policy),
        talos_releases=listed[Component.TALOS].releases or (),
        kubernetes_releases=listed[Component.KUBERNETES].releases or (),
    )


@dataclass(frozen=True)
class _Seen:
    """What the workload cluster was last seen to run."""

    talos: str | None
    kubernetes: str | None
    nodes: NodeVersions | None
    cni: CNIStatus


def _seen(
    observation: Observation | None, previous: TalosClusterStatus, *, image_override: str | None
) -> _Seen:
    """The observation's versions, or without one the last status's; ``image_override``:
    the Cilium image patch kept (``_frozen_patch``)."""
    if observation is None:
        old = previous.cni or CNIStatus()
        detected, version, unreadable = old.detected, old.detected_version, old.unreadable
        talos, kubernetes, nodes = (
            previous.talos_version,
            previous.kubernetes_version,
            previous.nodes,
        )
    else:
        read = observation.nodes
        talos, kubernetes = read.talos, read.kubernetes
        nodes = NodeVersions(
            count=read.count,
            talos_versions=read.talos_versions,
            kubernetes_versions=read.kubernetes_versions,
            differ=read.differ,
            unreadable=read.unreadable or None,
        )
        detected, version = observation.cni.detected, observation.cni.version
        unreadable = observation.cni.unreadable
    cni = CNIStatus(
        detected=detected,
        detected_version=version,
        image_override=image_override,
        unreadable=unreadable if steps.is_cilium(detected) and not version else None,
    )
    return _Seen(talos=talos, kubernetes=kubernetes, nodes=nodes, cni=cni)


def _unjudged(builder: _Builder, problems: Sequence[str]) -> None:
    """A spec no rule can read: every judged condition says what is wrong with it."""
    message = "; ".join(problems)
    builder.add(Type.VERSIONS_COMPATIBLE, F, Reason.INVALID_SPEC, message)
    for type_ in (
        Type.TALOS_UPGRADE_AVAILABLE,
        Type.KUBERNETES_UPGRADE_AVAILABLE,
        Type.UPGRADES_BLOCKED,
    ):
        builder.add(type_, U, Reason.INVALID_SPEC, message)


def _conditions(
    previous: TalosClusterStatus,
    builder: _Builder,
    progress: tuple[Condition | None, Condition | None],
    *,
    declared: Declared | None,
    now: datetime,
) -> tuple[Condition, ...]:
    """The conditions built now merged over the previous ones, with ``Reconciling`` and
    ``Stalled`` present only while True."""
    merged = conditions.merge(previous.conditions, builder.items, now=now)
    if declared is None:  # back in Operations: the mode's own condition goes
        merged = tuple(c for c in merged if c.type != Type.SPEC_REACHED)
    reconciling, stalled = progress
    merged = conditions.while_true(merged, Type.RECONCILING, reconciling, now=now)
    merged = conditions.while_true(merged, Type.STALLED, stalled, now=now)
    if declared is not None:
        # Declarative: auto-patch does not run, so nothing of it is shown (what the
        # Operations mode wrote would stay at its generation, saying what no longer holds)
        merged = tuple(c for c in merged if c.type != Type.AUTO_PATCH_READY)
    return merged


def with_auto_patch(
    status: TalosClusterStatus,
    *,
    auto_patch: AutoPatchStatus | None,
    condition: Condition | None,
    generation: int | None,
    now: datetime,
) -> TalosClusterStatus:
    """``status`` (``evaluate``'s, at the same ``now``) with what auto-patch decided:
    its status, and its condition at this generation (None: the condition goes)."""
    if condition is None:
        merged = tuple(c for c in status.conditions if c.type != Type.AUTO_PATCH_READY)
    else:
        update = condition.model_copy(update={"observed_generation": generation})
        merged = conditions.merge(status.conditions, [update], now=now)
    return status.model_copy(update={"auto_patch": auto_patch, "conditions": merged})


def _declared(builder: _Builder, declared: Declared) -> None:
    """``SpecReached``, and ``Ready`` False while the spec is not reached (a Ready the
    workload read made True; a failed read stays as it is)."""
    builder.add(Type.SPEC_REACHED, T if declared.reached else F, declared.reason, declared.message)
    if declared.reached:
        return
    for index, item in enumerate(builder.items):
        if item.type == Type.READY and item.status == T:
            builder.items[index] = item.model_copy(
                update={"status": F, "reason": declared.reason, "message": declared.message}
            )


def _progress(
    *,
    declared: Declared | None,
    generation: int | None,
    problems: Sequence[str],
    builder_items: Sequence[Condition],
    observation: Observation | None,
    active: Sequence[ActiveOperation],
) -> tuple[Condition | None, Condition | None]:
    """``Reconciling`` and ``Stalled`` (None: absent; never both).

    Stalled while the spec cannot be read (nothing moves until a person fixes it);
    otherwise Reconciling while an operation for the cluster is Pending or Running, or
    while its Nodes differ (an upgrade half done).
    """

    def condition(type_: ClusterConditionType, reason: str, message: str) -> Condition:
        return Condition(
            type=type_,
            status=T,
            reason=reason,
            message=message,
            observed_generation=generation,
            last_transition_time=datetime.min,
        )

    if problems:
        return None, condition(Type.STALLED, Reason.INVALID_SPEC, "; ".join(problems))
    if declared is not None and declared.stalled:
        return None, condition(Type.STALLED, declared.reason, declared.message)
    if declared is not None and not declared.reached:
        return condition(Type.RECONCILING, declared.reason, declared.message), None
    if active:
        first, *others = sorted(active, key=lambda op: (op.phase != "Running", op.name))
        message = f"TalosOperation {first.name} ({first.what}) is {first.phase}"
        if others:
            message += f"; {len(others)} more wait"
        return condition(Type.RECONCILING, Reason.OPERATION_ACTIVE, message), None
    if observation is not None and observation.nodes.differ:
        ready = next((c for c in builder_items if c.type == Type.READY), None)
        message = ready.message if ready is not None else "the Nodes differ"
        return condition(Type.RECONCILING, Reason.NODES_DIFFER, message), None
    return None, None


_WARNING_READY = {
    Reason.WORKLOAD_UNREACHABLE: ClusterEventReason.UNREACHABLE,
    Reason.KUBECONFIG_UNUSABLE: ClusterEventReason.KUBECONFIG_UNUSABLE,
    Reason.NODE_VERSION_UNREADABLE: ClusterEventReason.NODE_VERSION_UNREADABLE,
    Reason.INVALID_SPEC: ClusterEventReason.INVALID_SPEC,
    Reason.SERVICE_ACCOUNT_UNUSABLE: ClusterEventReason.SERVICE_ACCOUNT_UNUSABLE,
}


#: SpecReached reasons that post a Warning (the cluster is Stalled under them).
_DECLARED_WARNINGS = {
    "Refused": ClusterEventReason.UPGRADE_REFUSED,
    "Failed": ClusterEventReason.SPEC_NOT_REACHED,
    "NodesAhead": ClusterEventReason.SPEC_NOT_REACHED,
    "Unreadable": ClusterEventReason.SPEC_NOT_REACHED,
}


def ready_events(old: Condition | None, new: Condition) -> list[PlannedEvent]:
    """``Ready`` changed: a Warning for a read that failed, the Nodes found to differ, or
    the cluster observed again."""
    if new.reason in _WARNING_READY:
        reason = _WARNING_READY[ClusterReason(new.reason)]
        return [PlannedEvent(EventType.WARNING, reason, new.message)]
    if new.reason == Reason.NODES_DIFFER:
        return [PlannedEvent(EventType.NORMAL, ClusterEventReason.NODES_DIFFER, new.message)]
    if new.status == T and (old is None or old.status != T):
        return [PlannedEvent(EventType.NORMAL, ClusterEventReason.OBSERVED, new.message)]
    return []


def compatibility_events(old: Condition | None, new: Condition) -> list[PlannedEvent]:
    """``VersionsCompatible`` changed: a Cilium shown and not judged, one that cannot be
    read, a pair refused, or compatible again."""
    if new.reason == Reason.UNMANAGED_CILIUM:
        return [PlannedEvent(EventType.NORMAL, ClusterEventReason.UNMANAGED_CILIUM, new.message)]
    if new.reason == Reason.CILIUM_VERSION_UNREADABLE:
        reason = ClusterEventReason.CILIUM_VERSION_UNREADABLE
        return [PlannedEvent(EventType.WARNING, reason, new.message)]
    if new.status == F:
        reason = (
            ClusterEventReason.INVALID_SPEC
            if new.reason == Reason.INVALID_SPEC
            else ClusterEventReason.INCOMPATIBLE
        )
        return [PlannedEvent(EventType.WARNING, reason, new.message)]
    if new.status == T and old is not None and old.status == F:
        return [PlannedEvent(EventType.NORMAL, ClusterEventReason.COMPATIBLE, new.message)]
    return []


def spec_reached_events(old: Condition | None, new: Condition) -> list[PlannedEvent]:
    """``SpecReached`` changed (Declarative): a Warning while it cannot be reached, a
    Normal Event once it is."""
    if new.reason in _DECLARED_WARNINGS:
        return [PlannedEvent(EventType.WARNING, _DECLARED_WARNINGS[new.reason], new.message)]
    if new.status == T and old is not None and old.status != T:
        return [PlannedEvent(EventType.NORMAL, ClusterEventReason.SPEC_REACHED, new.message)]
    return []


def cilium_upgrade_events(old: Condition | None, new: Condition) -> list[PlannedEvent]:
    """``CiliumUpgradeAvailable`` became True: the embedded chart is newer."""
    if new.status != T:
        return []
    return [PlannedEvent(EventType.NORMAL, ClusterEventReason.CILIUM_UPGRADE, new.message)]


#: The Events of one condition's change (``conditions.transitions``), by its type.
Transition = Callable[[Condition | None, Condition], list[PlannedEvent]]
TRANSITION_EVENTS: Mapping[str, Transition] = {
    Type.READY: ready_events,
    Type.VERSIONS_COMPATIBLE: compatibility_events,
    Type.SPEC_REACHED: spec_reached_events,
    Type.CILIUM_UPGRADE_AVAILABLE: cilium_upgrade_events,
}


def transition_events(
    previous: TalosClusterStatus, current: TalosClusterStatus
) -> list[PlannedEvent]:
    """The Events of each condition that changed, in the order of the conditions."""
    return [
        event
        for old, new in conditions.transitions(previous.conditions, current.conditions)
        if new.type in TRANSITION_EVENTS
        for event in TRANSITION_EVENTS[new.type](old, new)
    ]


def spec_refused_again_events(
    previous: TalosClusterStatus, current: TalosClusterStatus
) -> list[PlannedEvent]:
    """A start refused again for a new spec generation is judged afresh: one more Event
    though ``SpecReached`` did not change."""
    old = conditions.find(previous.conditions, Type.SPEC_REACHED)
    new = conditions.find(current.conditions, Type.SPEC_REACHED)
    if old is None or new is None:
        return []
    if (old.status, old.reason) != (new.status, new.reason):
        return []  # a change: ``transition_events`` posts it
    if old.observed_generation == new.observed_generation:
        return []
    return spec_reached_events(None, new)


def default_choice_events(
    previous: TalosClusterStatus, current: TalosClusterStatus
) -> list[PlannedEvent]:
    """A new default upgrade choice of Talos or Kubernetes."""
    return [
        PlannedEvent(
            EventType.NORMAL, reason, f"{name} {after} is available (the default upgrade choice)"
        )
        for name, reason, before, after in _defaults(previous, current)
        if after is not None and after != before
    ]


def version_change_events(
    previous: TalosClusterStatus, current: TalosClusterStatus
) -> list[PlannedEvent]:
    """What the cluster runs changed: Talos, Kubernetes or Cilium."""
    return [
        PlannedEvent(
            EventType.NORMAL,
            ClusterEventReason.VERSION_CHANGED,
            f"the cluster now runs {name} {after} (was {before})",
        )
        for name, before, after in (
            ("Talos", previous.talos_version, current.talos_version),
            ("Kubernetes", previous.kubernetes_version, current.kubernetes_version),
            (
                "Cilium",
                previous.cni.detected_version if previous.cni else None,
                current.cni.detected_version if current.cni else None,
            ),
        )
        if before is not None and after is not None and before != after
    ]


#: Where the Events of a status change come from, in the order they are posted.
EventStep = Callable[[TalosClusterStatus, TalosClusterStatus], list[PlannedEvent]]
EVENT_CHAIN: tuple[EventStep, ...] = (
    transition_events,
    spec_refused_again_events,
    default_choice_events,
    version_change_events,
)


def _events(previous: TalosClusterStatus, current: TalosClusterStatus) -> list[PlannedEvent]:
    """Events for the changes a person should see; none when nothing changed."""
    return [event for step in EVENT_CHAIN for event in step(previous, current)]


def _defaults(
    previous: TalosClusterStatus, current: TalosClusterStatus
) -> Sequence[tuple[str, ClusterEventReason, str | None, str | None]]:
    def default(status: TalosClusterStatus, name: str) -> str | None:
        choices = status.upgrade_choices
        group = getattr(choices, name) if choices else None
        return group.default if isinstance(group, ChoiceGroup) else None

    return (
        (
            "Talos",
            ClusterEventReason.TALOS_UPGRADE,
            default(previous, "talos"),
            default(current, "talos"),
        ),
        (
            "Kubernetes",
            ClusterEventReason.KUBERNETES_UPGRADE,
            default(previous, "kubernetes"),
            default(current, "kubernetes"),
        ),
    )
