"""The Job manifests that run an upgrade against a workload cluster, built as plain data.

One Kubernetes Job per operation, owned by the TalosOperation: ``talosctl upgrade`` once
per node (one init container each, control plane first), ``talosctl upgrade-k8s``, or
``helm upgrade`` of Cilium to the embedded chart. The Job's name is a function of the
operation's name and uid, credentials are mounted from the named Secrets, never copied,
and a Job never retries on its own (``backoffLimit: 0``). Pure: no I/O.

More in docs/design/notes.md, "ichor/controller/talosoperation/jobs.py".
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypedDict

from ichor.api import kinds
from ichor.api.talosoperation import OperationType
from ichor.release import steps
from ichor.release.release_set import PINNED
from ichor.release.versions import VersionError
from ichor.settings import ExecutorSettings

#: Labels and annotations on every Job (a label value holds at most 63 characters, so
#: names that may be longer go into annotations).
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "ichor"
OPERATION_UID_LABEL = "ichor.dev/operation-uid"
OPERATION_ANNOTATION = "ichor.dev/operation"
CLUSTER_ANNOTATION = "ichor.dev/cluster"
TYPE_ANNOTATION = "ichor.dev/operation-type"
#: The Node a Talos operation's per-node Job upgrades.
NODE_ANNOTATION = "ichor.dev/node"

TALOSCONFIG_DIR = "/var/run/ichor/talos"
KUBECONFIG_DIR = "/var/run/ichor/kube"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
#: The environment variable naming the Node a Talos Job's init container upgrades.
NODE_ENV = "ICHOR_NODE"

_NAME_LIMIT = 63
_UNSAFE = re.compile(r"[^a-z0-9-]+")


class JobMeta(TypedDict, total=False):
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[dict[str, Any]]


class JobManifest(TypedDict):
    """A batch/v1 Job as the API server takes it (the pod template stays a plain dict)."""

    apiVersion: str
    kind: str
    metadata: JobMeta
    spec: dict[str, Any]


class NodeRole(StrEnum):
    CONTROL_PLANE = "control-plane"
    WORKER = "worker"


@dataclass(frozen=True, slots=True)
class TargetNode:
    """A node of the workload cluster, as ``talosctl --nodes`` reaches it."""

    name: str
    address: str
    role: NodeRole


#: Address types ``talosctl --nodes`` is given, in order of preference.
ADDRESS_PREFERENCE = ("InternalIP", "ExternalIP", "Hostname")


@dataclass(frozen=True, slots=True)
class NodeList:
    """The nodes an upgrade reaches, and the names of those it could not address."""

    nodes: tuple[TargetNode, ...]
    unaddressable: tuple[str, ...] = ()

    @property
    def control_plane(self) -> tuple[TargetNode, ...]:
        return tuple(n for n in upgrade_order(self.nodes) if n.role is NodeRole.CONTROL_PLANE)


def target_nodes(items: Iterable[Mapping[str, Any]]) -> NodeList:
    """The workload cluster's Nodes (raw ``items`` of a NodeList) as upgrade targets."""
    found: list[TargetNode] = []
    missing: list[str] = []
    for item in items:
        meta: Mapping[str, Any] = item.get("metadata") or {}
        name = str(meta.get("name", ""))
        labels: Mapping[str, str] = meta.get("labels") or {}
        addresses: list[Mapping[str, str]] = (item.get("status") or {}).get("addresses") or []
        by_type = {a.get("type"): a.get("address") for a in addresses if a.get("address")}
        address = next((by_type[t] for t in ADDRESS_PREFERENCE if by_type.get(t)), None)
        if address is None:
            missing.append(name)
            continue
        role = NodeRole.CONTROL_PLANE if CONTROL_PLANE_LABEL in labels else NodeRole.WORKER
        found.append(TargetNode(name=name, address=str(address), role=role))
    return NodeList(nodes=upgrade_order(found), unaddressable=tuple(sorted(missing)))


def upgrade_order(nodes: Iterable[TargetNode]) -> tuple[TargetNode, ...]:
    """Control plane first, then workers; by name within each, so the order is stable."""
    return tuple(sorted(nodes, key=lambda n: (n.role is not NodeRole.CONTROL_PLANE, n.name)))


@dataclass(frozen=True, slots=True)
class OperationRef:
    """The operation a Job belongs to (its owner) and the cluster it upgrades."""

    namespace: str
    name: str
    uid: str
    cluster: str
    type: OperationType


@dataclass(frozen=True, slots=True)
class SecretMount:
    """A key of a Secret in the operation's namespace, mounted read-only."""

    secret: str
    key: str


def job_name(*, operation: str, uid: str, type_: OperationType, step: str = "") -> str:
    """``ichor-<type>-<operation>[-<step>]-<8 hex>``, at most 63 characters: the hex is of
    the operation's uid and the step (a read, a check, a node's upgrade).

    A function of the operation (and step) alone: the same operation always names the
    same Job, and two operations of one name (one deleted, one created again) never
    share one.
    """
    digest = hashlib.sha256(f"{uid}/{step}".encode() if step else uid.encode()).hexdigest()[:8]
    head = f"ichor-{type_.value}-"
    room = _NAME_LIMIT - len(head) - len(digest) - 1
    tail = _UNSAFE.sub("-", step.lower()).strip("-")[:24] if step else ""
    base = _UNSAFE.sub("-", operation.lower()).strip("-")
    if tail:
        base = base[: max(room - len(tail) - 1, 0)].strip("-")
        slug = f"{base}-{tail}" if base else tail
    else:
        slug = base[:room].strip("-")
    return f"{head}{slug}-{digest}" if slug else f"{head}{digest}"


def talosctl_image(*, version: str, settings: ExecutorSettings) -> str:
    return settings.talosctl_image.format(version=version)


def _metadata(operation: OperationRef, *, settings: ExecutorSettings) -> JobMeta:
    labels = dict(settings.extra_labels)
    labels[MANAGED_BY_LABEL] = MANAGED_BY
    labels[OPERATION_UID_LABEL] = operation.uid
    return JobMeta(
        name=job_name(operation=operation.name, uid=operation.uid, type_=operation.type),
        namespace=operation.namespace,
        labels=labels,
        annotations={
            OPERATION_ANNOTATION: operation.name,
            CLUSTER_ANNOTATION: operation.cluster,
            TYPE_ANNOTATION: operation.type.value,
        },
        ownerReferences=[
            {
                "apiVersion": kinds.API_VERSION,
                "kind": kinds.Kind.TALOS_OPERATION.value,
                "name": operation.name,
                "uid": operation.uid,
                "controller": True,
                # the operation's own finalizer stops a Running Job; blocking the owner's
                # deletion would only need `update` on talosoperations/finalizers
                "blockOwnerDeletion": False,
            }
        ],
    )


_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "runAsGroup": 65534,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _container(
    name: str,
    *,
    image: str,
    args: Sequence[str],
    env: Sequence[Mapping[str, str]],
    mounts: Sequence[Mapping[str, Any]],
    settings: ExecutorSettings,
) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": settings.image_pull_policy,
        "args": list(args),
        "env": [dict(e) for e in env],
        "volumeMounts": [dict(m) for m in mounts],
        # the last lines of a failed container's log land in its status, where the
        # operation's failure message is read from
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": dict(_SECURITY),
        # the chart's executor.resources (ICHOR_EXECUTOR_RESOURCES), else 50m/64Mi/256Mi
        "resources": copy.deepcopy(dict(settings.resources)),
    }


def _secret_volume(name: str, mount: SecretMount, *, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "secret": {
            "secretName": mount.secret,
            "items": [{"key": mount.key, "path": path}],
            "defaultMode": 0o400,
        },
    }


def _scheduling(settings: ExecutorSettings) -> dict[str, Any]:
    """Where the Jobs' Pods may run and what they pull with: the chart's
    ``executor.nodeSelector``, ``tolerations``, ``affinity``, ``priorityClassName`` and
    ``imagePullSecrets``, each only when set."""
    found: dict[str, Any] = {}
    if settings.node_selector:
        found["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        found["tolerations"] = [copy.deepcopy(dict(t)) for t in settings.tolerations]
    if settings.affinity:
        found["affinity"] = copy.deepcopy(dict(settings.affinity))
    if settings.priority_class:
        found["priorityClassName"] = settings.priority_class
    if settings.image_pull_secrets:
        found["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    return found


def _job(
    operation: OperationRef,
    *,
    init: Sequence[dict[str, Any]],
    main: dict[str, Any],
    volumes: Sequence[dict[str, Any]],
    in_cluster: bool,
    settings: ExecutorSettings,
    name: str | None = None,
    side: Sequence[dict[str, Any]] = (),
) -> JobManifest:
    """The Job of ``operation`` (named ``name``, else the operation's own Job name);
    ``side``: more containers that run beside ``main``."""
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": in_cluster,
        "securityContext": {"runAsNonRoot": True, "fsGroup": 65534},
        "containers": [main, *side],
        "volumes": [{"name": "tmp", "emptyDir": {}}, *volumes],
    }
    if init:
        pod["initContainers"] = list(init)
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    pod.update(_scheduling(settings))
    metadata = _metadata(operation, settings=settings)
    if name is not None:
        metadata["name"] = name
    return JobManifest(
        apiVersion="batch/v1",
        kind="Job",
        metadata=metadata,
        spec={
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.active_deadline_seconds,
            "template": {
                "metadata": {
                    "labels": dict(metadata.get("labels", {})),
                    "annotations": dict(metadata.get("annotations", {})),
                },
                "spec": pod,
            },
        },
    )


_TMP = {"name": "tmp", "mountPath": "/tmp"}
_TALOS_MOUNT = {"name": "talosconfig", "mountPath": TALOSCONFIG_DIR, "readOnly": True}
_TALOS_ENV = (
    {"name": "TALOSCONFIG", "value": f"{TALOSCONFIG_DIR}/config"},
    {"name": "HOME", "value": "/tmp"},
)


def talos_job(
    *,
    operation: OperationRef,
    version: str,
    nodes: Iterable[TargetNode],
    images: Mapping[str, str],
    talosconfig: SecretMount,
    settings: ExecutorSettings,
) -> JobManifest:
    """``talosctl upgrade`` per node, one init container each, control plane first, each
    with its own installer (``images``, by Node name).

    The main container prints the versions of every node once all moved.
    """
    ordered = upgrade_order(nodes)
    if not ordered:
        raise ValueError("a Talos upgrade needs at least one node")
    missing = [n.name for n in ordered if not images.get(n.name)]
    if missing:
        raise ValueError(f"no installer image for {', '.join(missing)}")
    image = talosctl_image(version=version, settings=settings)
    mounts = (_TALOS_MOUNT, _TMP)
    init = [
        _container(
            f"upgrade-{index:03d}",
            image=image,
            args=[
                "upgrade",
                "--nodes",
                node.address,
                "--image",
                images[node.name],
                *settings.talos_upgrade_args,
            ],
            env=[*_TALOS_ENV, {"name": NODE_ENV, "value": node.name}],
            mounts=mounts,
            settings=settings,
        )
        for index, node in enumerate(ordered)
    ]
    main = _container(
        "versions",
        image=image,
        args=["version", "--nodes", ",".join(n.address for n in ordered)],
        env=_TALOS_ENV,
        mounts=mounts,
        settings=settings,
    )
    volume = _secret_volume("talosconfig", talosconfig, path="config")
    return _job(
        operation, init=init, main=main, volumes=[volume], in_cluster=False, settings=settings
    )


def read_job(
    *,
    operation: OperationRef,
    name: str,
    talos_version: str,
    reads: Sequence[tuple[str, Sequence[str]]],
    talosconfig: SecretMount,
    settings: ExecutorSettings,
) -> JobManifest:
    """A read of the Talos API: one container per ``(container name, talosctl args)``,
    side by side, with the talosctl of the version the cluster runs and the mounted
    talosconfig. A read changes nothing on a node."""
    if not reads:
        raise ValueError("a read needs at least one container")
    image = talosctl_image(version=talos_version, settings=settings)
    containers = [
        _container(
            container,
            image=image,
            args=args,
            env=_TALOS_ENV,
            mounts=(_TALOS_MOUNT, _TMP),
            settings=settings,
        )
        for container, args in reads
    ]
    volume = _secret_volume("talosconfig", talosconfig, path="config")
    job = _job(
        operation,
        init=(),
        main=containers[0],
        side=containers[1:],
        volumes=[volume],
        in_cluster=False,
        settings=settings,
        name=name,
    )
    job["spec"]["ttlSecondsAfterFinished"] = READ_TTL_SECONDS
    return job


#: How long after it finishes Kubernetes keeps a read Job. The executor deletes one once
#: read; this removes one it never reads (a create stored after the read, when the API
#: server came back). An operator down longer than this makes the read anew.
READ_TTL_SECONDS = 3600


#: Pods of a Job that upgrades a node of the cluster it runs in stay off that node: the
#: drain talosctl runs before the reboot would evict the Job's own Pod mid-upgrade.
NODE_NAME_FIELD = "metadata.name"


def avoiding(node: str) -> dict[str, Any]:
    """The affinity that keeps a Pod off Node ``node``."""
    term = {"matchFields": [{"key": NODE_NAME_FIELD, "operator": "NotIn", "values": [node]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip


def upgrade_args(
    *,
    node: TargetNode,
    image: str,
    drain: bool,
    drain_timeout: str,
    reboot_mode: str,
    settings: ExecutorSettings,
) -> list[str]:
    """``talosctl upgrade`` of one node with its own image, under the policy: talosctl
    v1.13's ``--drain``, ``--drain-timeout`` and ``--reboot-mode``
    (cmd/talosctl/cmd/talos/upgrade.go)."""
    return [
        "upgrade",
        "--nodes",
        node.address,
        "--image",
        image,
        *settings.talos_upgrade_args,
        f"--drain={'true' if drain else 'false'}",
        f"--drain-timeout={drain_timeout}",
        f"--reboot-mode={reboot_mode}",
    ]


def node_job(
    *,
    operation: OperationRef,
    name: str,
    version: str,
    node: TargetNode,
    image: str,
    drain: bool,
    drain_timeout: str,
    reboot_mode: str,
    avoid_node: bool,
    talosconfig: SecretMount,
    settings: ExecutorSettings,
) -> JobManifest:
    """The Job that upgrades one node: ``talosctl upgrade --wait`` with that node's own
    image and the operation's policy. ``avoid_node``: the node is one of the cluster the
    operator runs in, so the Job's Pod is kept off it."""
    container = _container(
        "upgrade",
        image=talosctl_image(version=version, settings=settings),
        args=upgrade_args(
            node=node,
            image=image,
            drain=drain,
            drain_timeout=drain_timeout,
            reboot_mode=reboot_mode,
            settings=settings,
        ),
        env=[*_TALOS_ENV, {"name": NODE_ENV, "value": node.name}],
        mounts=(_TALOS_MOUNT, _TMP),
        settings=settings,
    )
    volume = _secret_volume("talosconfig", talosconfig, path="config")
    manifest = _job(
        operation,
        init=(),
        main=container,
        volumes=[volume],
        in_cluster=False,
        settings=settings,
        name=name,
    )
    manifest["metadata"].setdefault("annotations", {})[NODE_ANNOTATION] = node.name
    manifest["spec"]["template"]["metadata"]["annotations"][NODE_ANNOTATION] = node.name
    if avoid_node:
        pod = manifest["spec"]["template"]["spec"]
        pod["affinity"] = _merged_affinity(pod.get("affinity"), node.name)
    return manifest


def _merged_affinity(given: object, node: str) -> dict[str, Any]:
    """``given`` (the chart's affinity, if any) with the node kept out of every term of
    its required node affinity (terms are ORed: each must exclude the node)."""
    affinity = dict(given) if isinstance(given, Mapping) else {}
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or ()] or [{}]
    excluded = {"key": NODE_NAME_FIELD, "operator": "NotIn", "values": [node]}
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or ()), excluded]
    required["nodeSelectorTerms"] = terms
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    return affinity


def upgraded_nodes(job: Mapping[str, Any]) -> tuple[str, ...]:
    """The Node names a Talos Job upgrades (its init containers' ``ICHOR_NODE``), in
    order; empty for the other Jobs."""

    def mapping(value: object) -> Mapping[str, Any]:
        return value if isinstance(value, Mapping) else {}

    pod = mapping(mapping(mapping(job.get("spec")).get("template")).get("spec"))
    names: list[str] = []
    for container in pod.get("initContainers") or ():
        for env in mapping(container).get("env") or ():
            if mapping(env).get("name") == NODE_ENV and mapping(env).get("value"):
                names.append(str(env["value"]))
    return tuple(names)


def kubernetes_job(
    *,
    operation: OperationRef,
    version: str,
    talos: str,
    control_plane: TargetNode,
    talosconfig: SecretMount,
    settings: ExecutorSettings,
) -> JobManifest:
    """``talosctl upgrade-k8s --to <version>`` through one control plane node.

    ``talos`` is the Talos the cluster runs: its talosctl drives the upgrade.
    """
    main = _container(
        "upgrade-k8s",
        image=talosctl_image(version=talos, settings=settings),
        args=[
            "upgrade-k8s",
            "--nodes",
            control_plane.address,
            "--to",
            version,
            *settings.upgrade_k8s_args,
        ],
        env=_TALOS_ENV,
        mounts=(_TALOS_MOUNT, _TMP),
        settings=settings,
    )
    volume = _secret_volume("talosconfig", talosconfig, path="config")
    return _job(
        operation, init=(), main=main, volumes=[volume], in_cluster=False, settings=settings
    )


def rendered_image_override(
    override: str | None, *, chart: str = PINNED.cilium_chart
) -> str | None:
    """The recorded Cilium image patch to render: only while newer than the chart
    (``steps.frozen_patch``); one that cannot be read is never rendered."""
    try:
        return steps.frozen_patch(override, chart=chart)
    except VersionError:
        return None


def cilium_values(*, image_override: str | None, chart: str) -> tuple[str, ...]:
    """``--set`` arguments for a recorded patch newer than the chart (none otherwise)."""
    patch = rendered_image_override(image_override, chart=chart)
    if patch is None:
        return ()
    tag = patch if patch.startswith("v") else f"v{patch}"
    pairs = []
    for prefix in ("image", "operator.image", "hubble.relay.image"):
        pairs += ["--set", f"{prefix}.tag={tag}", "--set", f"{prefix}.useDigest=false"]
    return tuple(pairs)


def cilium_job(
    *,
    operation: OperationRef,
    kubeconfig: SecretMount | None,
    image_override: str | None,
    settings: ExecutorSettings,
) -> JobManifest:
    """``helm upgrade`` of the Cilium release to the embedded chart.

    Without a kubeconfig Secret the workload is the cluster the operator runs in, and the
    Job uses its service account's token.
    """
    chart = settings.cilium_chart_version
    env: list[dict[str, str]] = [
        {"name": "HOME", "value": "/tmp"},
        {"name": "HELM_CACHE_HOME", "value": "/tmp/helm/cache"},
        {"name": "HELM_CONFIG_HOME", "value": "/tmp/helm/config"},
        {"name": "HELM_DATA_HOME", "value": "/tmp/helm/data"},
    ]
    mounts: list[dict[str, Any]] = [_TMP]
    volumes: list[dict[str, Any]] = []
    if kubeconfig is not None:
        env.append({"name": "KUBECONFIG", "value": f"{KUBECONFIG_DIR}/config"})
        mounts.append({"name": "kubeconfig", "mountPath": KUBECONFIG_DIR, "readOnly": True})
        volumes.append(_secret_volume("kubeconfig", kubeconfig, path="config"))
    main = _container(
        "helm-upgrade",
        image=settings.helm_image,
        args=[
            "upgrade",
            settings.cilium_release,
            settings.cilium_chart,
            "--version",
            chart,
            "--namespace",
            settings.cilium_namespace,
            *settings.helm_args,
            *cilium_values(image_override=image_override, chart=chart),
        ],
        env=env,
        mounts=mounts,
        settings=settings,
    )
    return _job(
        operation,
        init=(),
        main=main,
        volumes=volumes,
        in_cluster=kubeconfig is None,
        settings=settings,
    )


def commands(job: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(container, image, args) of a Job's pod in the order they run; for people and tests."""
    pod = job["spec"]["template"]["spec"]
    return [
        (c["name"], c["image"], list(c.get("args", [])))
        for c in [*pod.get("initContainers", []), *pod["containers"]]
    ]
