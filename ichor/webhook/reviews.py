"""What the webhook reads from an AdmissionReview, and nothing it has to guess.

The API server sends raw JSON. Everything the rules need is taken out of it here into
small frozen values (who asks, which cluster, which versions), and every shape the webhook
cannot read raises ``MalformedReview`` with a sentence naming the field: the caller turns
it into a denial. This module refuses to default a missing version field or coerce a
wrong type into a string; it never judges a version either (the rules in
``ichor.release``/``ichor.upgrade`` do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from ichor.api import records
from ichor.api.conditions import OperationConditionType, OperationReason
from ichor.api.talosoperation import OperationType, Phase


class MalformedReview(ValueError):
    """The review or the object under review is not in the shape the webhook reads."""


class UserInfo(TypedDict):
    """``request.userInfo`` of an AdmissionReview (authentication.k8s.io/v1 UserInfo)."""

    username: str
    uid: NotRequired[str]
    groups: NotRequired[list[str]]
    extra: NotRequired[dict[str, list[str]]]


@dataclass(frozen=True)
class Requester:
    """The user behind a write, exactly as the API server authenticated them.

    Kept whole (uid, groups, extra) because a SubjectAccessReview built from less could
    answer for a different identity than the one that made the request.
    """

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class NamespacedName:
    """A TalosCluster by namespace and name, as the webhook asks about it (a read, a
    SubjectAccessReview, a cached answer): hashable, printed ``namespace/name``. The
    API's ``ichor.api.talosoperation.ClusterRef`` is the spec field, which names the
    cluster only (the operation's namespace is implied)."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class SecretRef:
    """A Secret a TalosCluster names for the operator to read: the spec field that
    names it, the Secret (in the cluster's namespace) and its key (None: the default)."""

    field: str
    name: str
    key: str | None = None


#: The spec fields that name a Secret the operator reads for the cluster.
SECRET_REF_FIELDS = ("kubeconfigSecretRef", "talosconfigSecretRef")


@dataclass(frozen=True)
class ClusterObject:
    """The version fields of a TalosCluster and the CNI its status shows."""

    ref: NamespacedName
    talos: str
    kubernetes: str
    contract: str
    cni_preset: str = "cilium"
    detected_cni: str | None = None
    detected_cni_version: str | None = None
    #: ``spec.upgradeStrategy: Declarative``: the spec is the desired state, so an
    #: operation is judged from what the Nodes run (``status``, the operator's alone).
    declarative: bool = False
    observed_talos: str | None = None
    observed_kubernetes: str | None = None
    #: ``spec.autoPatch`` is set (the cluster's own auto-patch settings).
    auto_patch: bool = False
    #: The Secrets its spec names (``kubeconfigSecretRef``, ``talosconfigSecretRef``).
    secret_refs: tuple[SecretRef, ...] = ()
    #: The operator's sentence of a detected Cilium whose release cannot be read
    #: (``status.cni.unreadable``): words only, the rules decide from the CNI fields.
    cni_unreadable: str | None = None
    #: The operator's sentences of Nodes whose versions cannot be read
    #: (``status.nodes.unreadable``): while any is there, what the Nodes run is unknown.
    nodes_unreadable: tuple[str, ...] = ()
    #: ``spec.autoPatch.healthChecks`` as (name, expression) pairs, in order; an entry
    #: without both strings is left out (the CRD's schema requires them).
    health_checks: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OperationSpec:
    """A TalosOperation as created: which cluster, which component, which target."""

    namespace: str
    name: str
    cluster: str
    type: OperationType
    version: str | None
    override: bool
    cni_image_version: str | None

    @property
    def cluster_ref(self) -> NamespacedName:
        return NamespacedName(self.namespace, self.cluster)


@dataclass(frozen=True)
class StoredOperation:
    """A TalosOperation as stored, read back by the webhook (never from the write it judges).

    ``job_succeeded``: the operator recorded its Job as succeeded (phase Succeeded, or
    Running while it moves the cluster's spec); status is the operator's alone.
    """

    name: str
    cluster: str
    type: OperationType
    version: str | None
    override: bool
    job_succeeded: bool
    #: The user the webhook admitted it for under ``override: true`` (its stamp).
    override_by: str | None = None


def _mapping(value: object, *, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedReview(f"{where} must be an object, not {_kind(value)}")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "missing"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
    }.get(type(value), type(value).__name__)


def _string(obj: Mapping[str, Any], key: str, *, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise MalformedReview(f"{where}.{key} must be a string, not {_kind(value)}")
    return value


def _optional_string(obj: Mapping[str, Any], key: str, *, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedReview(f"{where}.{key} must be a string, not {_kind(value)}")
    return value


def _lenient(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _name(obj: Mapping[str, Any], *, where: str) -> tuple[str, str]:
    metadata = _mapping(obj.get("metadata"), where=f"{where}.metadata")
    namespace = _optional_string(metadata, "namespace", where=f"{where}.metadata") or ""
    name = _optional_string(metadata, "name", where=f"{where}.metadata") or ""
    if not name:
        generate = _optional_string(metadata, "generateName", where=f"{where}.metadata")
        name = generate or ""
    return namespace, name


def object_name(body: object, *, where: str = "object") -> tuple[str, str]:
    """(namespace, name) of any object under review; the namespace is empty for a
    cluster-scoped kind."""
    return _name(_mapping(body, where=where), where=where)


def requester(userinfo: object) -> Requester:
    """The ``request.userInfo`` of a review; a username is required."""
    info = _mapping(userinfo, where="request.userInfo")
    username = _string(info, "username", where="request.userInfo")
    if not username:
        raise MalformedReview("request.userInfo.username is empty")
    uid = _optional_string(info, "uid", where="request.userInfo") or ""
    groups_raw = info.get("groups") or []
    if not isinstance(groups_raw, list) or not all(isinstance(g, str) for g in groups_raw):
        raise MalformedReview("request.userInfo.groups must be a list of strings")
    extra_raw = _mapping(info.get("extra") or {}, where="request.userInfo.extra")
    extra: list[tuple[str, tuple[str, ...]]] = []
    for key, values in sorted(extra_raw.items()):
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise MalformedReview(f"request.userInfo.extra[{key!r}] must be a list of strings")
        extra.append((str(key), tuple(values)))
    return Requester(username=username, uid=uid, groups=tuple(groups_raw), extra=tuple(extra))


def cluster_versions(body: object, *, where: str = "object") -> ClusterObject:
    """The versions of a TalosCluster body (``object``, ``oldObject`` or a read)."""
    obj = _mapping(body, where=where)
    namespace, name = _name(obj, where=where)
    spec = _mapping(obj.get("spec"), where=f"{where}.spec")
    cni = _mapping(spec.get("cni") or {}, where=f"{where}.spec.cni")
    status = _mapping(obj.get("status") or {}, where=f"{where}.status")
    status_cni = _mapping(status.get("cni") or {}, where=f"{where}.status.cni")
    return ClusterObject(
        ref=NamespacedName(namespace, name),
        talos=_string(spec, "talosVersion", where=f"{where}.spec"),
        kubernetes=_string(spec, "kubernetesVersion", where=f"{where}.spec"),
        contract=_string(spec, "versionContract", where=f"{where}.spec"),
        cni_preset=_optional_string(cni, "preset", where=f"{where}.spec.cni") or "cilium",
        detected_cni=_optional_string(status_cni, "detected", where=f"{where}.status.cni"),
        detected_cni_version=_optional_string(
            status_cni, "detectedVersion", where=f"{where}.status.cni"
        ),
        declarative=spec.get("upgradeStrategy") == "Declarative",
        # read leniently: only an operation review uses them, and a cluster review must
        # answer as before whatever else the status holds
        observed_talos=_lenient(status.get("talosVersion")),
        observed_kubernetes=_lenient(status.get("kubernetesVersion")),
        auto_patch=spec.get("autoPatch") is not None,
        secret_refs=_secret_refs(spec, where=f"{where}.spec"),
        cni_unreadable=_lenient(status_cni.get("unreadable")),
        nodes_unreadable=_sentences(status.get("nodes")),
        health_checks=_health_checks(spec.get("autoPatch")),
    )


def _sentences(nodes: object) -> tuple[str, ...]:
    """``status.nodes.unreadable``, read leniently: a list that is not one of sentences
    still says a Node could not be read (only the operator writes status)."""
    found = nodes.get("unreadable") if isinstance(nodes, Mapping) else None
    if not found:
        return ()
    if not isinstance(found, list):
        return ("status.nodes.unreadable is set",)
    return tuple(item for item in found if isinstance(item, str)) or (
        "status.nodes.unreadable is set",
    )


def _secret_refs(spec: Mapping[str, Any], *, where: str) -> tuple[SecretRef, ...]:
    found = []
    for field in SECRET_REF_FIELDS:
        if spec.get(field) is None:
            continue
        ref = _mapping(spec[field], where=f"{where}.{field}")
        name = _string(ref, "name", where=f"{where}.{field}")
        if not name:
            raise MalformedReview(f"{where}.{field}.name is empty")
        key = _optional_string(ref, "key", where=f"{where}.{field}")
        found.append(SecretRef(field=field, name=name, key=key))
    return tuple(found)


def _health_checks(auto_patch: object) -> tuple[tuple[str, str], ...]:
    """The (name, expression) pairs of ``spec.autoPatch.healthChecks``, read leniently."""
    checks = auto_patch.get("healthChecks") if isinstance(auto_patch, Mapping) else None
    if not isinstance(checks, list):
        return ()
    return tuple(
        (check["name"], check["expression"])
        for check in checks
        if isinstance(check, Mapping)
        and isinstance(check.get("name"), str)
        and isinstance(check.get("expression"), str)
    )


def stored_operation(body: object) -> StoredOperation | None:
    """A stored TalosOperation, or None for one the webhook cannot read (never trusted)."""
    try:
        spec = operation_spec(body, where="stored TalosOperation")
    except MalformedReview:
        return None
    status = body.get("status") if isinstance(body, Mapping) else None
    status = status if isinstance(status, Mapping) else {}
    phase = status.get("phase")
    complete = next(
        (
            c
            for c in status.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == OperationConditionType.COMPLETE
        ),
        None,
    )
    updating = (
        phase == Phase.RUNNING.value
        and complete is not None
        and complete.get("status") == "False"
        and complete.get("reason") == OperationReason.SPEC_UPDATING.value
    )
    return StoredOperation(
        name=spec.name,
        cluster=spec.cluster,
        type=spec.type,
        version=spec.version,
        override=spec.override,
        job_succeeded=phase == Phase.SUCCEEDED.value or updating,
        override_by=_stamp(body),
    )


def _stamp(body: object) -> str | None:
    found = records.annotations_of(body).get(records.OVERRIDE_BY)
    return found if isinstance(found, str) and found else None


def operation_spec(body: object, *, where: str = "object") -> OperationSpec:
    """The spec of a TalosOperation body under review."""
    obj = _mapping(body, where=where)
    namespace, name = _name(obj, where=where)
    spec = _mapping(obj.get("spec"), where=f"{where}.spec")
    ref = _mapping(spec.get("clusterRef"), where=f"{where}.spec.clusterRef")
    cluster = _string(ref, "name", where=f"{where}.spec.clusterRef")
    if not cluster:
        raise MalformedReview(f"{where}.spec.clusterRef.name is empty")
    raw_type = _string(spec, "type", where=f"{where}.spec")
    try:
        kind = OperationType(raw_type)
    except ValueError:
        choices = ", ".join(t.value for t in OperationType)
        raise MalformedReview(f"{where}.spec.type {raw_type!r} is not one of {choices}") from None
    override = spec.get("override", False)
    if override is None:
        override = False
    if not isinstance(override, bool):
        raise MalformedReview(f"{where}.spec.override must be a boolean, not {_kind(override)}")
    cni = _mapping(spec.get("cni") or {}, where=f"{where}.spec.cni")
    return OperationSpec(
        namespace=namespace,
        name=name,
        cluster=cluster,
        type=kind,
        version=_optional_string(spec, "version", where=f"{where}.spec"),
        override=override,
        cni_image_version=_optional_string(cni, "imageVersion", where=f"{where}.spec.cni"),
    )
