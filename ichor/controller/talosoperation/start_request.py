"""What an operation the controller starts by itself looks like, as pure data.

Auto-patch and the declarative mode start an ordinary TalosOperation, judged by the same
webhook. ``operation_name`` is deterministic (a restart meets the first one: 409),
``manifest`` labels it with ``STARTED_BY`` and never sets ``override: true``, and
``judge_existing`` says whether an operation of that name is the controller's own.

More in docs/design/notes.md, "ichor/controller/talosoperation/start_request.py".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ichor.api import kinds, owed
from ichor.api.talosoperation import (
    ATTEMPT_ANNOTATION,
    STARTED_BY_LABEL,
    STARTED_FOR_ANNOTATION,
    OperationType,
    StartedBy,
)

#: Label on an operation the controller started: who started it (``StartedBy``). Only
#: the operator's identity may set, change or remove it (the webhook refuses the rest).
STARTED_BY = STARTED_BY_LABEL
#: Annotation: the attempt token the name was made from, and why it was started.
ATTEMPT = ATTEMPT_ANNOTATION
REASON = STARTED_FOR_ANNOTATION

#: A TalosOperation name is kept to a label value's length (the Job's name and labels
#: are derived from it).
NAME_LIMIT = 63
_UNSAFE = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class ClusterTarget:
    """The TalosCluster an operation is started for (read from its stored body)."""

    namespace: str
    name: str
    uid: str

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ClusterTarget:
        meta: Mapping[str, Any] = body.get("metadata") or {}
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
        )


@dataclass(frozen=True)
class StartRequest:
    """One operation to start: for ``cluster``, upgrade ``type`` to ``version``."""

    cluster: ClusterTarget
    type: OperationType
    version: str
    started_by: StartedBy
    #: Part of the name: the same request with the same attempt is the same operation.
    attempt: str = "1"
    #: A sentence for the annotation (the window, the spec bump).
    reason: str = ""

    def __post_init__(self) -> None:
        if self.type is OperationType.CNI:
            raise ValueError("a cni operation takes no version; the controller starts none")
        if not self.version:
            raise ValueError("an operation the controller starts names a version")
        if not (self.cluster.name and self.cluster.namespace and self.cluster.uid):
            raise ValueError("the cluster's namespace, name and uid are needed")


def operation_name(request: StartRequest) -> str:
    """``auto-patch-prod-talos-v1-14-4-1a2b3c4d``: readable, at most ``NAME_LIMIT``
    characters, and a function of the request alone (the hash holds the cluster's uid,
    so a cluster deleted and created again under its name gets other names)."""
    digest = hashlib.sha256(
        "\0".join(
            (
                request.cluster.uid,
                request.started_by.value,
                request.type.value,
                request.version,
                request.attempt,
            )
        ).encode()
    ).hexdigest()[:8]
    readable = _UNSAFE.sub(
        "-",
        f"{request.started_by.value}-{request.cluster.name}-{request.type.value}-"
        f"{request.version}".lower(),
    ).strip("-")
    head = readable[: NAME_LIMIT - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}"


def manifest(
    request: StartRequest, *, owes: Mapping[str, owed.OwedEvent] | None = None
) -> dict[str, Any]:
    """The TalosOperation the controller creates for ``request`` (never an override);
    ``owes``: the Events its create owes, in ``owed.OWED_ANNOTATION``."""
    cluster = request.cluster
    annotations = {ATTEMPT: request.attempt}
    if request.reason:
        annotations[REASON] = request.reason[:1024]
    if owes:
        annotations[owed.OWED_ANNOTATION] = owed.dump(owes)
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_OPERATION.value,
        "metadata": {
            "name": operation_name(request),
            "namespace": cluster.namespace,
            "labels": {STARTED_BY: request.started_by.value},
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": kinds.API_VERSION,
                    "kind": kinds.Kind.TALOS_CLUSTER.value,
                    "name": cluster.name,
                    "uid": cluster.uid,
                }
            ],
        },
        "spec": {
            "clusterRef": {"name": cluster.name},
            "type": request.type.value,
            "version": request.version,
            "override": False,
        },
    }


def started_by(body: Mapping[str, Any]) -> StartedBy | None:
    """Who started a stored operation, from its label (None: a person, or unreadable)."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    value = labels.get(STARTED_BY) if isinstance(labels, Mapping) else None
    try:
        return StartedBy(value) if isinstance(value, str) else None
    except ValueError:
        return None


def judge_existing(request: StartRequest, body: Mapping[str, Any]) -> str | None:
    """None when ``body`` (found under the request's name) is the operation this request
    creates; else why it is not, as a sentence."""
    meta: Mapping[str, Any] = body.get("metadata") or {}
    spec: Mapping[str, Any] = body.get("spec") or {}
    name = operation_name(request)
    what = f"TalosOperation {request.cluster.namespace}/{name}"
    if started_by(body) is not request.started_by:
        return f"{what} exists and was not started by {request.started_by.value}"
    owners = meta.get("ownerReferences") or ()
    if not any(isinstance(o, Mapping) and o.get("uid") == request.cluster.uid for o in owners):
        return f"{what} exists and is not owned by TalosCluster {request.cluster.name}"
    if (
        (spec.get("clusterRef") or {}).get("name") != request.cluster.name
        or spec.get("type") != request.type.value
        or spec.get("version") != request.version
        or spec.get("override")
    ):
        return f"{what} exists for another upgrade than {request.type.value} {request.version}"
    return None
