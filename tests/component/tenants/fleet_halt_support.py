"""What the fleet-halt and marks tests share: a second tenant's namespace, clusters with
and without credentials, a failure played as the kubelet and the Job controller report
it, users with a role of their own, and ``ichor`` run as one of them."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import yaml

from ichor.api import kinds
from ichor.cli.main import main
from ichor.settings import CliSettings
from tests.component.operations.conftest import Objects, running_job
from tests.harness import account, controlplane
from tests.support import rbac

#: The role of a tenant who may write TalosClusters and TalosOperations in their
#: namespace (and read, nothing more).
TENANT_VERBS = ["get", "list", "watch", "create", "update", "patch"]


@contextlib.contextmanager
def namespace(plane: controlplane.ControlPlane, prefix: str) -> Iterator[str]:
    """Another tenant's namespace, deleted afterwards without waiting. Its default
    ServiceAccount, which reads its clusters (they have no kubeconfig), holds the chart's
    ``ichor-tenant-reader``, as the test's own namespace's does."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    plane.kubectl("create", "namespace", name)
    binding = account.bind_tenant_reader(plane, namespace=name)
    try:
        yield name
    finally:
        account.unbind(plane, binding)
        plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


async def create_cluster(
    objects: Objects, name: str, *, talosconfig: bool = True, **spec: Any
) -> dict[str, Any]:
    """A TalosCluster; ``talosconfig=False``: the misconfigured one, with no credentials."""
    if talosconfig:
        return await objects.create_cluster(name, **spec)
    body = {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_CLUSTER,
        "metadata": {"name": name},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
            **spec,
        },
    }
    created: dict[str, Any] = cast(
        dict[str, Any],
        await objects.custom.create_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, objects.namespace, kinds.Plural.TALOS_CLUSTERS, body
        ),
    )
    return created


async def ran_and_failed(objects: Objects, operation: str) -> None:
    """The operation's Job ran its first upgrade step against a node, and it failed: the
    kubelet reports the container terminated after it started, then the Job fails."""
    _, job = await running_job(objects, operation)
    name = job["metadata"]["name"]
    await objects.play_failed_pod(name, container="upgrade-000", log="node cp-1 did not boot")
    await objects.play_job(name, succeeded=False, message="node cp-1 did not boot")


async def never_started(objects: Objects, operation: str) -> None:
    """The operation's Job never ran a step: its image could not be pulled until the
    deadline passed."""
    _, job = await running_job(objects, operation)
    name = job["metadata"]["name"]
    body = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-x1", "labels": {"job-name": name}},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "versions", "image": "example.invalid/talosctl"}]},
    }  # fmt: skip
    await objects.core.create_namespaced_pod(objects.namespace, body)  # type: ignore[arg-type]
    status = {
        "phase": "Pending",
        "initContainerStatuses": [{
            "name": "upgrade-000", "image": "example.invalid/talosctl", "imageID": "",
            "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff",
                                  "message": "Back-off pulling image"}},
        }],
    }  # fmt: skip
    await objects.core.patch_namespaced_pod_status(
        f"{name}-x1", objects.namespace, {"status": status}
    )
    await asyncio.sleep(3)  # the executor looks at the pod (every 2 s here)
    text = "Job was active longer than specified deadline"
    await objects.batch.patch_namespaced_job_status(
        name, objects.namespace,
        {"status": {"startTime": _now(), "active": 0, "failed": 1, "conditions": [
            _condition("FailureTarget", "DeadlineExceeded", text),
            _condition("Failed", "DeadlineExceeded", text)]}},
    )  # fmt: skip


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(type_: str, reason: str, message: str) -> dict[str, str]:
    now = _now()
    return {"type": type_, "status": "True", "reason": reason, "message": message,
            "lastProbeTime": now, "lastTransitionTime": now}  # fmt: skip


@contextlib.contextmanager
def granted(plane: controlplane.ControlPlane, objects: Sequence[dict[str, Any]]) -> Iterator[None]:
    manifest = yaml.safe_dump_all(list(objects))
    plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield
    finally:
        plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


def tenant_role(name: str, namespace: str, user: str) -> list[dict[str, Any]]:
    """A Role and RoleBinding: ``user`` writes TalosClusters and TalosOperations in
    ``namespace``, the tenant's everyday rights."""
    role = {
        "apiVersion": rbac.API_VERSION, "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": [{"apiGroups": [kinds.GROUP],
                   "resources": ["talosclusters", "talosoperations"], "verbs": TENANT_VERBS}],
    }  # fmt: skip
    binding = {
        "apiVersion": rbac.API_VERSION, "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }  # fmt: skip
    return [role, binding]


def installation_role(name: str, user: str, verbs: Sequence[str]) -> list[dict[str, Any]]:
    """``verbs`` on the IchorInstallation for ``user``."""
    role = rbac.cluster_role(
        name,
        [{"apiGroups": [kinds.GROUP], "resources": ["ichorinstallations"], "verbs": list(verbs)}],
    )
    return [role, rbac.binding(name, [user])]


@dataclass
class Ran:
    code: int
    out: str
    err: str


def _run(argv: list[str], kubeconfig: Path) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv, settings=CliSettings(kubeconfig=str(kubeconfig)))
    return Ran(code=code, out=out.getvalue(), err=err.getvalue())


async def ichor(kubeconfig: Path, *argv: str) -> Ran:
    """``ichor`` as the user of ``kubeconfig``, in a thread (it blocks while it waits for
    the operator, which runs in the test's loop)."""
    ran = await asyncio.to_thread(_run, list(argv), kubeconfig)
    assert "Traceback" not in ran.err, ran.err
    return ran


def events_on_installation(plane: controlplane.ControlPlane, reason: str) -> list[dict[str, Any]]:
    listed = plane.kubectl(
        "get", "events", "-A", "-o", "json",
        f"--field-selector=involvedObject.kind=IchorInstallation,reason={reason}",
    )  # fmt: skip
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


def one_sentence(text: str) -> bool:
    """A message the CLI prints: one line, no stack."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return len(lines) == 1 and not re.search(r"Traceback|File \"", text)
