"""The webhook's decisions, as pure functions: which rule refuses a write, and the answer.

* ``review_cluster`` / ``review_operation`` call the rules of ``ichor.release`` and
  ``ichor.upgrade`` (never a copy of them) in the order a person should meet them, and
  return a ``Verdict``.
* ``answer_cluster`` / ``answer_operation`` turn a verdict, the override request and the
  SubjectAccessReview's answer into an ``Answer``.

Nothing here does I/O, so it is tested without a server. More in docs/design/notes.md,
"ichor/webhook/decisions.py".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from ichor.api import celbudget, kinds, records, talosoperation
from ichor.api.autopatch import MAX_EXPRESSION_LENGTH, MAX_HEALTH_CHECKS
from ichor.api.talosoperation import OperationType
from ichor.release import compat, observed, steps, versions
from ichor.release.policy import NO_POLICY, PolicyComponent, SitePolicy
from ichor.release.refusals import Refusal, Rule, Verdict, judge, refuse
from ichor.upgrade import node_images
from ichor.upgrade import rule as upgrade_target
from ichor.webhook.reviews import (
    ClusterObject,
    NamespacedName,
    OperationSpec,
    Requester,
    SecretRef,
    StoredOperation,
)

VERB = "override"
GROUP = "ichor.dev"
RESOURCE = "talosclusters"
#: The longest warning the API server passes on untruncated.
WARNING_LIMIT = 256


class Code(IntEnum):
    """The HTTP code a denial carries to the user (kubectl prints its reason)."""

    FORBIDDEN = 403  # a rule refuses the write
    BAD_REQUEST = 400  # the review or the object is not in the shape the webhook reads
    UNAVAILABLE = 503  # the webhook could not decide (an API read failed): retry


@dataclass(frozen=True)
class Answer:
    """The webhook's answer to one review, before it is sent.

    ``admitted`` is the admission record this write adds (``ichor.api.records``: the
    operator posts it as a Warning Event once the object is stored), ``record`` its
    Event's sentence; both None when nothing was passed that needs recording.
    ``traced`` is a second record, of a Kubernetes step past a Cilium the rule skips on
    an unmanaged cluster (``cilium_trace``), posted the same way.
    """

    allowed: bool
    message: str = ""
    code: int = 200
    warnings: tuple[str, ...] = ()
    record: str | None = None
    cluster: NamespacedName | None = field(default=None)
    admitted: records.Record | None = None
    traced: records.Record | None = None
    #: Why a denial denies, for the metrics: the rule, or a name of ``metrics.DENIAL_REASONS``.
    reason: str = ""
    #: A denial ``override: true`` would pass for a holder of the verb: the endpoint
    #: names it in the answer's causes (``talosoperation.OVERRIDE_WOULD_PASS``).
    overridable: bool = False


def _passed_refusals(verdict: Verdict) -> tuple[records.Passed, ...]:
    return tuple(records.Passed(rule=str(r.rule), message=r.message) for r in verdict.overridable)


def _admitting(
    record: records.Record,
    kind: str,
    named: NamespacedName,
    *,
    cluster: NamespacedName,
    warnings: tuple[str, ...],
) -> Answer:
    """An allowed write of the ``kind`` object ``named``, admitted with ``record``."""
    return Answer(
        allowed=True,
        warnings=warnings,
        record=records.message(record, kind=kind, namespace=named.namespace, name=named.name),
        cluster=cluster,
        admitted=record,
    )


def _verdict(refusals: list[Refusal | Verdict]) -> Verdict:
    """The shared composition (``refusals.judge``): a rule no override passes wins."""
    return judge(refusals)


def _form(error: versions.VersionError) -> Refusal:
    return refuse(Rule.FORM, f"{error}.")


def _form_refusals(cluster: ClusterObject, *, old: ClusterObject | None) -> list[Refusal]:
    """Form of each version field the write sets (an unchanged value is always allowed)."""
    refusals: list[Refusal] = []
    for name, value, before in (
        ("spec.talosVersion", cluster.talos, old.talos if old else None),
        ("spec.kubernetesVersion", cluster.kubernetes, old.kubernetes if old else None),
    ):
        if value == before:
            continue
        try:
            versions.check_spec_version(value, field=name)
        except versions.VersionError as error:
            refusals.append(_form(error))
    if old is None or cluster.contract != old.contract:
        try:
            versions.check_contract(cluster.contract)
        except versions.VersionError as error:
            refusals.append(_form(error))
    return refusals


def _fields(cluster: ClusterObject) -> steps.VersionFields:
    return steps.VersionFields(
        talos=cluster.talos, kubernetes=cluster.kubernetes, contract=cluster.contract
    )


def review_cluster(
    *, new: ClusterObject, old: ClusterObject | None, policy: SitePolicy = NO_POLICY
) -> Verdict:
    """A TalosCluster create (``old`` None) or update: form, downgrade, pair, Cilium step,
    then the site's policy.

    No path or skew check: a TalosCluster write may jump (adopt, a repair), and the plan
    and the executors apply the path rules to an upgrade. The site's ``policy`` judges an
    update's moved version fields only: a create takes what it names (``ichor init``'s
    release set, an adoption's running versions), and is warned instead
    (``site_warnings``).
    """
    form = _form_refusals(new, old=old)
    if form:
        return judge(form)
    # every rule is asked, as before the chain: a rule after a blocking one still runs
    return judge(tuple(_cluster_rules(new, old=old, policy=policy)))


def _cluster_rules(
    new: ClusterObject, *, old: ClusterObject | None, policy: SitePolicy
) -> Iterator[Refusal | Verdict | None]:
    """The rules of a well-formed TalosCluster write, in the order a person meets them:
    the downgrade, the table's steps of the moved fields, then the site's policy."""
    moved = _Moved(
        talos=old is None or new.talos != old.talos,
        kubernetes=old is None or new.kubernetes != old.kubernetes,
    )
    yield _downgrade(new, old=old)
    cilium = _write_cilium(new, old=old)
    yield from _table_steps(new, old=old, cilium=cilium, moved=moved)
    if old is not None:  # on top of the table: every refusal without it is one with it
        yield _site_step(
            new, policy=policy, cilium=cilium, talos=moved.talos, kubernetes=moved.kubernetes
        )


@dataclass(frozen=True)
class _Moved:
    """Which version fields a write moves (both, on a create)."""

    talos: bool
    kubernetes: bool


def _downgrade(new: ClusterObject, *, old: ClusterObject | None) -> Refusal | None:
    """The refusal of an update that moves a version back, or None."""
    if old is None:
        return None
    try:
        return steps.check_update(old=_fields(old), new=_fields(new))
    except versions.VersionError:
        # A stored value the rules cannot read (written before this webhook ran) is
        # being replaced: nothing to compare it with, and the form check passed.
        return None


def _write_cilium(new: ClusterObject, *, old: ClusterObject | None) -> steps.CiliumRelease:
    """The Cilium a write is judged with. The Cilium half holds when the cluster is
    managed before *or* after the write: a write that flips the preset is judged by the
    table it leaves as well."""
    managed = old is not None and steps.is_cilium(old.cni_preset)
    return steps.cilium_release(
        preset=steps.CILIUM if managed else new.cni_preset,
        detected=new.detected_cni,
        version=new.detected_cni_version,
        unreadable=new.cni_unreadable,
    )


def _table_steps(
    new: ClusterObject,
    *,
    old: ClusterObject | None,
    cilium: steps.CiliumRelease,
    moved: _Moved,
) -> tuple[Refusal | Verdict | None, ...]:
    """The table's answers to the moved fields: the preset's step, then the versions'.
    An unchanged field the rules cannot read (stored before this webhook ran) is a form
    refusal instead of both."""
    try:
        step = _version_step(new, cilium=cilium, moved=moved)
        preset = _preset_step(new, old=old, moved=moved)
    except versions.VersionError as error:
        return (_form(error),)
    return (preset, step)


def _version_step(
    new: ClusterObject, *, cilium: steps.CiliumRelease, moved: _Moved
) -> Refusal | Verdict | None:
    """A moved Kubernetes: the step, which holds the Talos pair and behind it the Cilium
    that runs (if Cilium); a moved Talos alone: the pair; nothing moved: nothing."""
    if moved.kubernetes:
        return steps.kubernetes_step(talos=new.talos, kubernetes=new.kubernetes, cilium=cilium)
    if moved.talos:
        return compat.talos_kubernetes_error(talos=new.talos, kubernetes=new.kubernetes)
    return None


def _preset_step(new: ClusterObject, *, old: ClusterObject | None, moved: _Moved) -> Verdict | None:
    """An update's move of ``spec.cni.preset``; a Kubernetes that moves is judged by the
    version step, with the same Cilium."""
    if old is None:
        return None
    return steps.cni_preset_step(
        old_preset=old.cni_preset,
        new_preset=new.cni_preset,
        detected=new.detected_cni,
        version=new.detected_cni_version,
        kubernetes=None if moved.kubernetes else new.kubernetes,
        unreadable=new.cni_unreadable,
    )


def _site_step(
    new: ClusterObject,
    *,
    policy: SitePolicy,
    cilium: steps.CiliumRelease,
    talos: bool,
    kubernetes: bool,
) -> Verdict:
    """What the site's policy says of the version fields a write moves."""
    moved = [
        component
        for component, changed in (
            (PolicyComponent.TALOS, talos),
            (PolicyComponent.KUBERNETES, kubernetes),
        )
        if changed
    ]
    return judge(
        policy.step(moved=component, talos=new.talos, kubernetes=new.kubernetes, cilium=cilium)
        for component in moved
    )


def site_warnings(new: ClusterObject, *, policy: SitePolicy) -> tuple[str, ...]:
    """What the site's policy says of the versions a TalosCluster is created with, as
    warnings: a create is no step (``ichor init`` writes the release set, ``ichor adopt``
    what runs), so it is told, not refused; every later move is judged."""
    cilium = steps.cilium_release(
        preset=new.cni_preset,
        detected=new.detected_cni,
        version=new.detected_cni_version,
        unreadable=new.cni_unreadable,
    )
    said = _site_step(new, policy=policy, cilium=cilium, talos=True, kubernetes=True)
    return tuple(
        f"created as it is, though this site's policy refuses it (later moves are judged by "
        f"it): {r.message}"[:WARNING_LIMIT]
        for r in said.refusals
    )


def cni_version_refusal(spec: OperationSpec) -> Refusal:
    """The refusal of a cni operation that names a version: Cilium moves only to the embedded
    chart (docs/design/decisions.md)."""
    named = spec.cni_image_version if spec.cni_image_version is not None else spec.version
    return upgrade_target.cni_version_refusal(
        operation=f"TalosOperation {spec.namespace}/{spec.name}", named=named
    )


_COMPONENTS = {
    OperationType.TALOS: upgrade_target.Component.TALOS,
    OperationType.KUBERNETES: upgrade_target.Component.KUBERNETES,
    OperationType.CNI: upgrade_target.Component.CNI,
}


def _readable(version: str | None) -> str | None:
    if version is None:
        return None
    try:
        versions.parse(version)
    except versions.VersionError:
        return None
    return version


def review_operation(
    *, spec: OperationSpec, cluster: ClusterObject, policy: SitePolicy = NO_POLICY
) -> Verdict:
    """A TalosOperation create: the plan, i.e. the full target rule for the cluster it
    names, read with the site's ``policy``."""
    if spec.type is OperationType.CNI:
        if spec.version is not None or spec.cni_image_version is not None:
            return _verdict([cni_version_refusal(spec)])
        target = ""  # the embedded chart: the rule knows it
    elif spec.version is None:
        return _verdict(
            [
                refuse(
                    Rule.FORM,
                    f"a {spec.type} operation needs spec.version, a final release vX.Y.Z "
                    "(`ichor upgrade` fills in the default choice).",
                )
            ]
        )
    else:
        target = spec.version
    talos, kubernetes = cluster.talos, cluster.kubernetes
    if cluster.declarative:
        # The spec is the desired state (already the target): the step is judged from
        # what the Nodes run, which only the operator writes (status); while a Node's
        # versions cannot be read, what they run is unknown, and no override passes it.
        if cluster.nodes_unreadable:
            unknown = observed.nodes(cluster.nodes_unreadable)
            what = f"TalosOperation {spec.namespace}/{spec.name} ({spec.type} to {_target(spec)})"
            return _verdict([unknown.refusal(what)])
        talos = _readable(cluster.observed_talos) or talos
        kubernetes = _readable(cluster.observed_kubernetes) or kubernetes
    running = upgrade_target.ClusterVersions(
        talos=talos,
        kubernetes=kubernetes,
        cilium=steps.cilium_release(
            preset=cluster.cni_preset,
            detected=cluster.detected_cni,
            version=cluster.detected_cni_version,
            unreadable=cluster.cni_unreadable,
        ),
        cni=cluster.detected_cni,
        preset=cluster.cni_preset,
        policy=policy,
    )
    return upgrade_target.judge_target(
        component=_COMPONENTS[spec.type], target=target, cluster=running
    )


def _trace(refusal: Refusal | None, *, requester: Requester, detail: str) -> records.Record | None:
    if refusal is None:
        return None
    return records.Record(
        kind=records.RecordKind.CILIUM_RULE_SKIPPED,
        user=requester.username,
        detail=detail,
        passed=(records.Passed(rule=str(refusal.rule), message=refusal.message),),
    )


def cilium_trace_of_write(
    *, new: ClusterObject, old: ClusterObject | None, requester: Requester, operation: str
) -> records.Record | None:
    """The record of a TalosCluster write that moves ``spec.kubernetesVersion`` of a
    cluster left unmanaged (before and after the write) past the Cilium its status shows,
    when the Cilium rule would have refused the step; None otherwise.

    The decision record lets ``spec.cni.preset: unmanaged`` skip the Cilium rule, not
    without a trace: the operator posts this as a Warning Event naming the user (the
    rule's sentence names the Cilium) once the write is stored; a dry run leaves none.
    """
    if old is not None and (new.kubernetes == old.kubernetes or steps.is_cilium(old.cni_preset)):
        return None
    refusal = _skipped_cilium(new, kubernetes=new.kubernetes)  # None: the form rule refuses it
    detail = f"{operation.lower()} spec.kubernetesVersion to {new.kubernetes}"
    return _trace(refusal, requester=requester, detail=detail)


def _skipped_cilium(cluster: ClusterObject, *, kubernetes: str) -> Refusal | None:
    """What the Cilium rule would say of ``kubernetes`` on this cluster left unmanaged
    (None: nothing, or a version that does not parse)."""
    try:
        return steps.skipped_cilium_half(
            preset=cluster.cni_preset,
            detected=cluster.detected_cni,
            version=cluster.detected_cni_version,
            unreadable=cluster.cni_unreadable,
            kubernetes=kubernetes,
        )
    except versions.VersionError:
        return None


def cilium_trace_of_operation(
    *, spec: OperationSpec, cluster: ClusterObject, requester: Requester, started_by: str | None
) -> records.Record | None:
    """The record of a kubernetes TalosOperation (a person's, auto-patch's or the
    declarative mode's: ``started_by``) on a cluster left unmanaged past the Cilium its
    status shows, when the Cilium rule would have refused it (``cilium_trace_of_write``)."""
    if spec.type is not OperationType.KUBERNETES or spec.version is None:
        return None
    refusal = _skipped_cilium(cluster, kubernetes=spec.version)  # None: the plan refuses its form
    if refusal is None:
        return None
    detail = f"kubernetes to {spec.version} on TalosCluster {spec.cluster_ref}"
    if started_by:
        detail += f", started by {started_by}"
    return _trace(refusal, requester=requester, detail=detail)


def needs_access_review(verdict: Verdict, *, override_requested: bool) -> bool:
    """Whether the answer depends on the verb: only then is a SubjectAccessReview sent.

    An operation requests the override with ``override: true``, and then the verb is asked
    whatever its plan says: a plan clean at creation can meet a refusal at execution, and
    the executor passes it only because the creator's verb was checked here. A cluster
    write requests it when it has a refusal the verb may pass. Nothing is asked when a
    refusal no override passes decides the answer anyway.
    """
    return verdict.blocking is None and override_requested


def _verb_text(cluster: NamespacedName) -> str:
    return (
        f"the RBAC verb `{VERB}` on `{RESOURCE}` in API group `{GROUP}` for TalosCluster {cluster}"
    )


def _warning(requester: Requester, refusal: Refusal) -> str:
    text = f"override by {requester.username} ({refusal.rule}): {refusal.message}"
    if len(text) > WARNING_LIMIT:
        text = text[: WARNING_LIMIT - 3] + "..."
    return text


def _passed(
    verdict: Verdict,
    *,
    requester: Requester,
    cluster: NamespacedName,
    kind: str,
    namespace: str,
    name: str,
    detail: str,
) -> Answer:
    record = records.Record(
        kind=records.RecordKind.OVERRIDE,
        user=requester.username,
        detail=detail,
        passed=_passed_refusals(verdict),
    )
    warnings = tuple(_warning(requester, r) for r in verdict.overridable)
    named = NamespacedName(namespace, name)
    return _admitting(record, kind, named, cluster=cluster, warnings=warnings)


#: The TalosCluster spec field each operation type moves when it succeeds.
_SPEC_FIELDS = {OperationType.TALOS: "talosVersion", OperationType.KUBERNETES: "kubernetesVersion"}


def carried_override(
    *, new: ClusterObject, old: ClusterObject, operations: Sequence[StoredOperation]
) -> StoredOperation | None:
    """The operation whose override the operator's spec write carries, if there is one.

    The executor moves a cluster's spec to an operation's target once its Job succeeded;
    when the target passed a compatibility refusal under ``override: true``, that write
    meets the same refusal, and the operator does not hold the verb (the chart grants it
    none). It passes only for an operation of this cluster, read from the API (never
    from the write), that was admitted with ``override: true`` (which the webhook grants
    only to a holder of the verb, and records as ``ichor.dev/override-by``), whose Job
    the operator recorded as succeeded, and whose target is exactly the one version
    field this write moves (nothing else: not the contract, not the preset).
    """
    moved = [
        (field, value)
        for field, value, before in (
            ("talosVersion", new.talos, old.talos),
            ("kubernetesVersion", new.kubernetes, old.kubernetes),
        )
        if value != before
    ]
    if (
        len(moved) != 1
        or new.contract != old.contract
        or steps.is_cilium(new.cni_preset) != steps.is_cilium(old.cni_preset)
    ):
        return None
    ((field, value),) = moved
    for stored in operations:
        if (
            stored.cluster == new.ref.name
            and stored.override
            and stored.override_by is not None
            and stored.job_succeeded
            and _SPEC_FIELDS.get(stored.type) == field
            and stored.version == value
        ):
            return stored
    return None


def _carried(
    verdict: Verdict, *, requester: Requester, cluster: NamespacedName, carried: StoredOperation
) -> Answer:
    record = records.Record(
        kind=records.RecordKind.CARRIED,
        user=carried.override_by or "",
        detail="update",
        passed=_passed_refusals(verdict),
        carried_from=carried.name,
        field=_SPEC_FIELDS[carried.type],
        value=carried.version,
    )
    warnings = tuple(_warning(requester, r) for r in verdict.overridable)
    return _admitting(record, "TalosCluster", cluster, cluster=cluster, warnings=warnings)


def _adopted(verdict: Verdict, *, requester: Requester, cluster: NamespacedName) -> Answer:
    record = records.Record(
        kind=records.RecordKind.ADOPTION,
        user=requester.username,
        detail="create",
        passed=_passed_refusals(verdict),
    )
    warnings = tuple(
        (
            f"adopted as it runs ({r.rule}): {r.message} Upgrades are judged as usual from "
            f"here; one that keeps the pair incompatible needs the verb `{VERB}`."
        )[:WARNING_LIMIT]
        for r in verdict.overridable
    )
    return _admitting(record, "TalosCluster", cluster, cluster=cluster, warnings=warnings)


#: Said to the writer of a Declarative TalosCluster that sets spec.autoPatch: admitted
#: (the field is valid, and may be meant for a later switch back), but it does nothing.
AUTO_PATCH_IGNORED = (
    "spec.autoPatch is ignored: upgradeStrategy is Declarative, so only a spec change "
    "starts an upgrade (an auto-patch would move the Nodes past a spec nobody writes); "
    "remove spec.autoPatch, or bump the spec (e.g. with Renovate)"
)


def cluster_warnings(cluster: ClusterObject) -> tuple[str, ...]:
    """What an admitted TalosCluster write is told besides its answer: a setting of
    it that the controller ignores."""
    if cluster.declarative and cluster.auto_patch:
        return (AUTO_PATCH_IGNORED,)
    return ()


def answer_cluster(
    verdict: Verdict,
    *,
    requester: Requester,
    cluster: NamespacedName,
    holds_verb: bool | None,
    operation: str,
    carried: StoredOperation | None = None,
    adoption: bool = False,
    declarative: bool = False,
) -> Answer:
    """A TalosCluster write: an overridable refusal passes when the user holds the verb,
    when the operator's write carries the override of an operation (``carried``), or on
    a create marked as an adoption (``adoption``: the cluster is taken as it runs, and
    only its compatibility refusals pass; an unknown version never does). The marker is
    read on a create only, and refused on a ``declarative`` spec (``upgradeStrategy:
    Declarative``): an adoption stores what runs, a Declarative spec is a desired state.

    ``holds_verb`` is the SubjectAccessReview's answer, None when none was needed.
    """
    adopting = adoption and operation == "CREATE"
    if adopting and declarative:
        return Answer(
            allowed=False,
            message=(
                f"TalosCluster {cluster} is refused: it is marked as an adoption "
                f"({records.ADOPTION}), which stores the versions the cluster runs, and "
                f"its spec sets upgradeStrategy: Declarative, which makes the spec a "
                f"desired state the operator moves the cluster to; adopt with "
                f"upgradeStrategy Operations (the default, what `ichor adopt` writes), "
                f"then switch the stored cluster to Declarative."
            ),
            code=Code.FORBIDDEN,
            cluster=cluster,
            reason="Adoption",
        )
    if verdict.blocking is not None:
        return _denied(verdict.blocking, verdict.blocking.message, cluster=cluster)
    if not verdict.overridable:
        return Answer(allowed=True, cluster=cluster)
    if carried is not None:
        return _carried(verdict, requester=requester, cluster=cluster, carried=carried)
    if holds_verb:
        return _passed(
            verdict,
            requester=requester,
            cluster=cluster,
            kind="TalosCluster",
            namespace=cluster.namespace,
            name=cluster.name,
            detail=operation.lower(),
        )
    if adopting:
        return _adopted(verdict, requester=requester, cluster=cluster)
    first = verdict.overridable[0]
    # Says whether the requester holds the verb: right for the real user, and an oracle
    # for a forged review's caller, so the endpoint must be reachable by the API server
    # alone (mutual TLS and the ingress NetworkPolicy, docs/install.md).
    return _denied(
        first,
        f"{first.message} Only a user holding {_verb_text(cluster)} can pass this "
        f"refusal, and user {requester.username!r} does not.",
        cluster=cluster,
    )


def _denied(
    refusal: Refusal, message: str, *, cluster: NamespacedName, overridable: bool = False
) -> Answer:
    """A write denied by ``refusal``'s rule, in ``message``."""
    return Answer(
        allowed=False,
        message=message,
        code=Code.FORBIDDEN,
        cluster=cluster,
        reason=str(refusal.rule),
        overridable=overridable,
    )


def answer_operation(
    verdict: Verdict,
    *,
    spec: OperationSpec,
    requester: Requester,
    holds_verb: bool | None,
) -> Answer:
    """A TalosOperation create: a refusal passes only with ``override: true`` and the verb."""
    cluster = spec.cluster_ref
    if verdict.blocking is not None:
        message = verdict.blocking.message
        if spec.override:
            message += (
                f" `override: true` does not pass it: the {verdict.blocking.rule} rule is "
                "never overridable."
            )
        return _denied(verdict.blocking, message, cluster=cluster)
    if not verdict.overridable:
        if spec.override:
            return _clean_override(spec=spec, requester=requester, holds_verb=holds_verb)
        return Answer(allowed=True, cluster=cluster)
    first = verdict.overridable[0]
    if not spec.override:
        return _denied(
            first,
            f"{first.message} Setting {kinds.OVERRIDE_WOULD_PASS_WORDS} "
            f"this refusal for a user holding {_verb_text(cluster)}.",
            cluster=cluster,
            overridable=True,
        )
    if not holds_verb:
        return _denied(
            first,
            f"{first.message} `override: true` is set, but user {requester.username!r} "
            f"does not hold {_verb_text(cluster)}, which the override needs.",
            cluster=cluster,
        )
    return _passed(
        verdict,
        requester=requester,
        cluster=cluster,
        kind="TalosOperation",
        namespace=spec.namespace,
        name=spec.name,
        detail=f"{spec.type} to {_target(spec)}",
    )


def policy_refused(what: str, problems: Sequence[str]) -> Answer:
    """A write of ``spec.policy`` that cannot be read: refused, every problem named (the
    rules would refuse every step under it)."""
    shown = "; ".join(problems[:8]) + (
        f"; and {len(problems) - 8} more" if len(problems) > 8 else ""
    )
    return Answer(
        allowed=False,
        message=(
            f"{what} is refused: its site policy (spec.policy) cannot be read: {shown}. A site "
            f"policy only refuses more than the compatibility table (deny entries and "
            f"highestMinor entries, each with a reason); correct the entries and write it again"
        ),
        code=Code.FORBIDDEN,
        reason=str(Rule.SITE_POLICY_UNREADABLE),
    )


def answer_status(
    *,
    kind: str,
    namespace: str,
    name: str,
    requester: Requester,
    operator: str,
    matches: bool | None = None,
) -> Answer:
    """A write of the status subresource: the operator's own, or refused.

    Status is what the operator observed (the Nodes' versions, the CNI it detected) and
    decided (an operation's phase, the release lists); every rule reads it as that. A
    person who may write it could make a rule read a value nobody observed, so only the
    identity the operator's own requests carry (``operator``) writes it, whatever a role
    grants on ``<kind>/status``. ``matches``: whether the requester is the operator by
    its whole identity (its groups and uid too, ``judgement.is_operator``); None: by
    username.
    """
    if (requester.username == operator) if matches is None else matches:
        return Answer(allowed=True)
    what = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    return Answer(
        allowed=False,
        message=(
            f"the status of {what} is refused for user {requester.username!r}: status is "
            f"what the ichor operator observed and decided, and only the operator "
            f"({operator}) writes it, whatever a role grants on the status subresource; "
            f"change the spec instead, or let the operator write the status"
        ),
        code=Code.FORBIDDEN,
        reason="StatusWrite",
    )


def _target(spec: OperationSpec) -> str:
    return spec.version if spec.version is not None else "the embedded chart"


def _clean_override(
    *, spec: OperationSpec, requester: Requester, holds_verb: bool | None
) -> Answer:
    """``override: true`` on a plan with no refusal: it still needs the verb, because the
    executor passes a refusal it meets at execution on this flag."""
    cluster = spec.cluster_ref
    what = f"TalosOperation {spec.namespace}/{spec.name}"
    if not holds_verb:
        return Answer(
            allowed=False,
            message=(
                f"{what} is refused: `override: true` is set, but user "
                f"{requester.username!r} does not hold {_verb_text(cluster)}, which "
                f"`override: true` needs even when the plan refuses nothing (the executor "
                f"would pass a refusal it meets at execution on it); the plan passes "
                f"without it, so remove `override: true`."
            ),
            code=Code.FORBIDDEN,
            cluster=cluster,
            reason="OverrideVerb",
        )
    warning = (
        f"override: true set by {requester.username}: the plan refuses nothing now; a "
        f"compatibility refusal met at execution will be passed and recorded"
    )
    record = records.Record(
        kind=records.RecordKind.OVERRIDE,
        user=requester.username,
        detail=f"{spec.type} to {_target(spec)}",
    )
    named = NamespacedName(spec.namespace, spec.name)
    warnings = (warning[:WARNING_LIMIT],)
    return _admitting(record, "TalosOperation", named, cluster=cluster, warnings=warnings)


def missing_cluster(spec: OperationSpec) -> Answer:
    """The plan of an operation whose cluster does not exist."""
    return Answer(
        allowed=False,
        message=(
            f"TalosOperation {spec.namespace}/{spec.name} is refused: TalosCluster "
            f"{spec.cluster_ref} does not exist; spec.clusterRef.name must name a TalosCluster "
            f"in namespace {spec.namespace!r}."
        ),
        code=Code.FORBIDDEN,
        reason="ClusterNotFound",
    )


def malformed(reason: str) -> Answer:
    """A review the webhook cannot read: denied, with what was wrong."""
    return Answer(
        allowed=False,
        message=f"the ichor admission webhook cannot read this request: {reason}",
        code=Code.BAD_REQUEST,
        reason="Unreadable",
    )


def undecided(reason: str) -> Answer:
    """The webhook could not decide (an API call failed): denied, the write may be retried."""
    return Answer(
        allowed=False,
        message=(
            f"the ichor admission webhook could not decide on this write ({reason}); "
            "nothing was changed, retry the write"
        ),
        code=Code.UNAVAILABLE,
        reason="Undecided",
    )


def queue_full(spec: OperationSpec, *, most: int) -> Answer:
    """The plan of an operation whose cluster already queues ``most`` not finished."""
    return Answer(
        allowed=False,
        message=talosoperation.queue_full_message(
            namespace=spec.namespace, name=spec.name, cluster=spec.cluster, most=most
        ),
        code=Code.FORBIDDEN,
        reason="QueueFull",
    )


#: What a user must hold on a Secret a TalosCluster names: the verb, and the resource
#: in the core API group ("").
SECRET_VERB = "get"
SECRET_RESOURCE = "secrets"


def secret_refs_to_review(
    *, new: ClusterObject, old: ClusterObject | None
) -> tuple[SecretRef, ...]:
    """The Secrets a TalosCluster write names anew, each to be asked of the requester
    (``get`` on that Secret): on a create every one, on an update each reference that
    changed (its Secret or its key). An update that leaves the references as they were
    asks nothing, so the operator's own follow-up writes (a spec it moves after an
    operation) never depend on its rights over the Secret."""
    before = {ref.field: ref for ref in old.secret_refs} if old is not None else {}
    return tuple(ref for ref in new.secret_refs if before.get(ref.field) != ref)


def unreadable_secret(ref: SecretRef, *, cluster: NamespacedName, requester: Requester) -> Answer:
    """A TalosCluster write that names a Secret its writer may not read: the operator
    would read it, and run its operations with it, for someone who could not."""
    secret = f"{cluster.namespace}/{ref.name}"
    return Answer(
        allowed=False,
        message=(
            f"TalosCluster {cluster} is refused: spec.{ref.field} names Secret {secret}, "
            f"which user {requester.username!r} may not read; the operator reads that "
            f"Secret for the cluster and mounts it into its Jobs, so it is used only for "
            f"a user who could read it: check with `kubectl auth can-i get "
            f"secret/{ref.name} -n {cluster.namespace}`, and get `get` on it or name a "
            f"Secret you may read."
        ),
        code=Code.FORBIDDEN,
        cluster=cluster,
        reason="SecretNotReadable",
    )


def health_check_refusal(new: ClusterObject, old: ClusterObject | None) -> Answer | None:
    """A TalosCluster write whose health checks would cost more than their budget
    (``ichor.api.celbudget``: evaluation steps, depth, nested macros), or that cannot be
    estimated because it does not compile. Only a check the write adds or changes is
    judged: one stored unchanged (written before this rule) is the controller's to refuse,
    and never blocks an unrelated write. No override passes it. None: nothing refused."""
    before = set(old.health_checks) if old is not None else set()
    if len(new.health_checks) > MAX_HEALTH_CHECKS:
        # the CRD's schema refuses this before the webhook is asked; a review that did
        # not come from the API server is not parsed check by check
        return Answer(
            allowed=False,
            message=(
                f"TalosCluster {new.ref} is refused: spec.autoPatch.healthChecks holds "
                f"{len(new.health_checks)} checks, at most {MAX_HEALTH_CHECKS}."
            ),
            code=Code.FORBIDDEN,
            cluster=new.ref,
            reason="HealthCheckBudget",
        )
    for name, expression in new.health_checks:
        if (name, expression) in before:
            continue
        problem = (
            f"has {len(expression):,} characters, more than {MAX_EXPRESSION_LENGTH:,}"
            if len(expression) > MAX_EXPRESSION_LENGTH
            else celbudget.judge(expression)
        )
        if problem is None:
            continue
        return Answer(
            allowed=False,
            message=(
                f'TalosCluster {new.ref} is refused: health check "{name[:63]}" '
                f"(spec.autoPatch.healthChecks) {problem}."
            ),
            code=Code.FORBIDDEN,
            cluster=new.ref,
            reason="HealthCheckBudget",
        )
    return None


# --- the plan of a Talos operation: each node's image ----------------------------------


def _schematics(spec: object) -> tuple[str | None, list[tuple[str, str]]]:
    """``spec.schematic`` and ``spec.nodeSchematics`` as (selector text, schematic),
    read leniently (the CRD checked their form)."""
    if not isinstance(spec, Mapping):
        return None, []
    schematic = spec.get("schematic")
    rules = []
    for entry in spec.get("nodeSchematics") or ():
        if not isinstance(entry, Mapping):
            continue
        selector = (entry.get("selector") or {}).get("matchLabels") or {}
        if isinstance(selector, Mapping) and isinstance(entry.get("schematic"), str):
            labels = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
            rules.append((labels, entry["schematic"]))
    return (schematic if isinstance(schematic, str) and schematic else None), rules


def _recorded_readings(status: object) -> tuple[node_images.NodeReading, ...]:
    """The nodes of ``status.nodeImages`` as the last read found them."""
    recorded = status.get("nodeImages") if isinstance(status, Mapping) else None
    groups = recorded.get("groups") if isinstance(recorded, Mapping) else None
    found = []
    for group in groups if isinstance(groups, list) else ():
        if not isinstance(group, Mapping) or not isinstance(group.get("platform"), str):
            continue
        image = node_images.NodeImage(
            platform=group["platform"],
            secure_boot=group.get("secureBoot") is True,
            schematic=group.get("schematic") if isinstance(group.get("schematic"), str) else None,
            factory=group.get("factory") if isinstance(group.get("factory"), str) else None,
            extensions=tuple(e for e in group.get("extensions") or () if isinstance(e, str)),
        )
        for name in group.get("nodes") or ():
            if isinstance(name, str):
                found.append(node_images.NodeReading(name=name, image=image))
    return tuple(found)


def image_plan_warnings(cluster_body: Mapping[str, object], *, version: str) -> tuple[str, ...]:
    """What the plan of a Talos operation says of each node's image, from the spec and
    what the last read recorded (``status.nodeImages``): the nodes whose schematic the
    spec changes, from what to what, and those it would refuse; for a cluster of one
    Node, what goes down and for how long. The operation reads
    every node again before it upgrades any, and decides from that read."""
    schematic, rules = _schematics(cluster_body.get("spec"))
    said: list[str] = []
    status = cluster_body.get("status")
    seen = status.get("nodes") if isinstance(status, Mapping) else None
    if isinstance(seen, Mapping) and seen.get("count") == 1:
        # one node: no drain can succeed, so none is made; say what goes down
        said.append(node_images.single_node_statement(version=version, drain=True))
    for index, (labels, named) in enumerate(rules):
        said.append(
            f"spec.nodeSchematics[{index}] changes the nodes labelled {labels} to schematic "
            f"{node_images.short(named)}: the operation names each, from what to what, "
            f"before it upgrades any"
        )
    if schematic is None:
        return tuple(said)
    readings = _recorded_readings(cluster_body.get("status"))
    if not readings:
        said.append(
            f"spec.schematic {node_images.short(schematic)} is installed on every node; no "
            f"read of the nodes is recorded yet: the operation reads them first and names "
            f"each change"
        )
        return tuple(said)
    plan = node_images.plan_images(
        readings, version=version, spec_schematic=schematic, default_factory="factory.talos.dev"
    )
    caveat = " (unless spec.nodeSchematics picks them)" if rules else ""
    said += [f"extensions change: {change}{caveat}" for change in plan.changes]
    said += [f"would be refused: {refusal}{caveat}" for refusal in plan.refusals]
    return tuple(said)
