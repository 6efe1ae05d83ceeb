"""A version that is seen but cannot be read is unknown, and the unmanaged CNI leaves a trace.

The tenant attacks, on the real API server with the webhook in the path and the
operator running as the chart's identity, against a workload cluster of its own:

* the workload's Cilium DaemonSet runs ``quay.io/cilium/cilium@sha256:...`` and no Helm
  release names its chart, so the status shows Cilium detected with no version; a user
  without the override verb moved Kubernetes to v1.37.2 past it (Cilium 1.20 runs 1.33 to
  1.36). Now the TalosCluster write, the plan (server-side dry run and ``ichor upgrade
  kubernetes --dry-run``) and the executor refuse every step the Cilium rule judges, for
  a holder of the verb with ``override: true`` too, and status stays the operator's;
* deleting a managed TalosCluster and creating it again with ``cni.preset: unmanaged``
  let a Kubernetes step past the running Cilium 1.20.4 run with Normal Events only. Now
  the condition shows the Cilium on an unmanaged cluster, and each such step posts a
  Warning Event naming the user and the rule's sentence; a step the rule accepts posts
  none, and neither does a dry run.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ichor.api import kinds
from ichor.cli.main import main
from tests.component.operations.conftest import (
    Objects,
    Operator,
    condition,
    eventually,
    phase,
    running_job,
)
from tests.component.tenants.unreadable_support import (
    DIGEST_ONLY,
    FORGER,
    HOLDER,
    PLAIN,
    SEEN,
    TAGGED,
    Workload,
    cni,
    objects,
    operator,
    users,
    webhook,
    workload,
    workload_secret,
)
from tests.component.webhook import harness
from tests.harness import controlplane

__all__ = ["objects", "operator", "users", "webhook", "workload"]  # fixtures, used by name

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

#: Every refusal of a Cilium whose release cannot be read ends this way.
STEP = "tag the image with its release or deploy it with Helm, then try again"
NEVER = "no override passes a release that cannot be read"


def _cluster(namespace: str, secret: str, *, preset: str = "cilium", **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": kinds.API_VERSION,
            "kind": "TalosCluster",
            "metadata": {"name": "prod", "namespace": namespace},
            "spec": {
                "talosVersion": "v1.14.3",
                "kubernetesVersion": "v1.36.6",
                "versionContract": "v1.14",
                "cni": {"preset": preset},
                "kubeconfigSecretRef": {"name": secret},
                "talosconfigSecretRef": {"name": secret},
                **spec,
            },
        }
    )


def _operation(namespace: str, name: str, type_: str, version: str | None, **spec: Any) -> str:
    body: dict[str, Any] = {"clusterRef": {"name": "prod"}, "type": type_, **spec}
    if version is not None:
        body["version"] = version
    return json.dumps(
        {
            "apiVersion": kinds.API_VERSION,
            "kind": "TalosOperation",
            "metadata": {"name": name, "namespace": namespace},
            "spec": body,
        }
    )


def _patch(
    plane: controlplane.ControlPlane, namespace: str, spec: dict[str, Any], **kw: Any
) -> Any:
    return plane.kubectl(
        "patch", "taloscluster", "prod", "-n", namespace, "--type=merge",
        "-p", json.dumps({"spec": spec}), check=False, **kw,
    )  # fmt: skip


async def _observed_unreadable(objects: Objects) -> dict[str, Any]:
    """Once the status shows Cilium detected and no release (what the code before this
    test's fix showed too, so the gates below are what fails there)."""
    return await eventually(
        objects.cluster,
        lambda c: cni(c).get("detected") == "cilium" and not cni(c).get("detectedVersion"),
        what="Cilium observed with its release unreadable",
    )


async def test_a_digest_only_cilium_is_shown_as_it_is_and_refused_at_the_webhook_and_the_plan(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    users: dict[str, Path],
    control_plane: controlplane.ControlPlane,
    capsys: pytest.CaptureFixture[str],
) -> None:
    workload.cilium(DIGEST_ONLY)
    namespace = objects.namespace
    secret = await workload_secret(objects, workload)
    control_plane.kubectl("create", "-f", "-", input=_cluster(namespace, secret), as_user=PLAIN)
    await _observed_unreadable(objects)

    # The TalosCluster write: a user without the verb, and the holder, are refused.
    for user in (PLAIN, HOLDER):
        moved = _patch(control_plane, namespace, {"kubernetesVersion": "v1.37.2"}, as_user=user)
        assert moved.returncode != 0, (user, moved.stdout)
        assert f"Kubernetes v1.37.2 is refused: {SEEN}; {STEP}; {NEVER}." in moved.stderr, (
            user,
            moved.stderr,
        )
    # Not even a step its Cilium would run (1.20 runs 1.36): what runs is unknown.
    patch_step = _patch(control_plane, namespace, {"kubernetesVersion": "v1.36.7"}, as_user=PLAIN)
    assert patch_step.returncode != 0
    assert NEVER in patch_step.stderr
    # Nor a release of the Cilium from its table by the preset, by the holder.
    released = _patch(control_plane, namespace, {"cni": {"preset": "unmanaged"}}, as_user=HOLDER)
    assert released.returncode != 0
    assert NEVER in released.stderr

    # The plan: the server-side dry run, without and with override: true.
    plain = control_plane.kubectl(
        "create", "--dry-run=server", "-f", "-", as_user=PLAIN, check=False,
        input=_operation(namespace, "k8s", "kubernetes", "v1.37.2"),
    )  # fmt: skip
    assert plain.returncode != 0
    assert f"{SEEN}; {STEP}" in plain.stderr, plain.stderr
    held = control_plane.kubectl(
        "create", "--dry-run=server", "-f", "-", as_user=HOLDER, check=False,
        input=_operation(namespace, "k8s", "kubernetes", "v1.37.2", override=True),
    )  # fmt: skip
    assert held.returncode != 0
    assert "`override: true` does not pass it" in held.stderr, held.stderr
    cni_step = control_plane.kubectl(
        "create", "--dry-run=server", "-f", "-", as_user=HOLDER, check=False,
        input=_operation(namespace, "chart", "cni", None, override=True),
    )  # fmt: skip
    assert cni_step.returncode != 0
    assert "Cilium 1.20.4 is refused: " + SEEN in cni_step.stderr, cni_step.stderr
    # ... and the CLI's plan, which is that dry run.
    for user, extra in ((PLAIN, ()), (HOLDER, ("--override",))):
        capsys.readouterr()
        code = main(
            ["--kubeconfig", str(users[user]), "-n", namespace,
             "upgrade", "kubernetes", "prod", "v1.37.2", "--dry-run", *extra]
        )  # fmt: skip
        err = capsys.readouterr().err
        assert code == 1, err
        assert SEEN in err, err
    # Nothing was stored or started.
    seen = await objects.cluster()
    assert seen["spec"]["kubernetesVersion"] == "v1.36.6"
    assert await objects.jobs() == []
    # The status is honest: Cilium detected, no version, and a condition says why.
    assert cni(seen) == {"detected": "cilium", "unreadable": SEEN}
    compatible = condition(seen, "VersionsCompatible")
    assert (compatible["status"], compatible["reason"]) == ("Unknown", "CiliumVersionUnreadable")
    assert compatible["message"].startswith(SEEN)
    found = await eventually(
        lambda: objects.events("prod"),
        lambda events: any(e["reason"] == "CiliumVersionUnreadable" for e in events),
        what="the Warning Event of a Cilium whose release cannot be read",
    )
    assert [e["type"] for e in found if e["reason"] == "CiliumVersionUnreadable"] == ["Warning"]


async def test_a_user_cannot_make_the_release_readable_by_writing_status(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    users: dict[str, Path],
    control_plane: controlplane.ControlPlane,
) -> None:
    workload.cilium(DIGEST_ONLY)
    namespace = objects.namespace
    secret = await workload_secret(objects, workload)
    control_plane.kubectl("create", "-f", "-", input=_cluster(namespace, secret))
    await _observed_unreadable(objects)
    for status in (
        {"cni": {"detectedVersion": "1.20.4"}},  # a release the rule would read
        {"cni": {"unreadable": None}},
        {"cni": {"detected": "flannel"}},  # "no Cilium": the rule would skip it
    ):
        forged = control_plane.kubectl(
            "patch", "taloscluster", "prod", "-n", namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": status}), as_user=FORGER, check=False,
        )  # fmt: skip
        assert forged.returncode != 0, forged.stdout
        assert f"refused for user '{FORGER}'" in forged.stderr, forged.stderr
    assert "detectedVersion" not in cni(await objects.cluster())
    moved = _patch(control_plane, namespace, {"kubernetesVersion": "v1.37.2"}, as_user=PLAIN)
    assert moved.returncode != 0
    assert NEVER in moved.stderr


async def test_an_operation_stored_before_the_release_became_unreadable_is_refused_at_execution(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:
    """Admitted while Cilium 1.20.4 could be read, waiting behind another operation; the
    image is then pinned by digest only: the executor refuses it, and creates no Job."""
    workload.cilium(TAGGED)
    namespace = objects.namespace
    secret = await workload_secret(objects, workload)
    control_plane.kubectl("create", "-f", "-", input=_cluster(namespace, secret))
    await eventually(
        objects.cluster, lambda c: cni(c).get("detectedVersion") == "1.20.4", what="Cilium 1.20.4"
    )
    control_plane.kubectl(
        "create", "-f", "-", input=_operation(namespace, "first", "talos", "v1.14.4")
    )
    _, first_job = await running_job(objects, "first")
    # admitted by the plan: Cilium 1.20.4 runs Kubernetes 1.36; an admitted override too
    control_plane.kubectl(
        "create", "-f", "-",
        input=_operation(namespace, "k8s", "kubernetes", "v1.36.7", override=True),
    )  # fmt: skip
    waiting = await eventually(
        lambda: objects.operation("k8s"),
        lambda b: condition(b, "Accepted").get("reason") == "Waiting",
        what="k8s waits behind first",
    )
    assert "ichor.dev/override-by" in waiting["metadata"]["annotations"]

    workload.cilium(DIGEST_ONLY)
    await _observed_unreadable(objects)
    await objects.play_job(first_job["metadata"]["name"], succeeded=False)
    refused = await eventually(
        lambda: objects.operation("k8s"), lambda b: phase(b) == "Failed", what="k8s refused"
    )
    accepted = condition(refused, "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "UnreadableVersion")
    assert accepted["message"].startswith("Refused at execution (UnreadableVersion): ")
    assert SEEN in accepted["message"]
    assert "jobName" not in refused["status"]
    assert [job["metadata"]["name"] for job in await objects.jobs()] == [
        first_job["metadata"]["name"]
    ]


# --- the unmanaged CNI leaves a trace --------------------------------------------------------


def _skipped(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in found if e["reason"] == "CiliumRuleSkipped"]


async def test_a_cluster_created_again_unmanaged_records_each_step_past_its_cilium(
    webhook: harness.Webhook,
    operator: Operator,
    workload: Workload,
    objects: Objects,
    control_plane: controlplane.ControlPlane,
) -> None:
    workload.cilium(TAGGED)
    namespace = objects.namespace
    secret = await workload_secret(objects, workload)
    control_plane.kubectl("create", "-f", "-", input=_cluster(namespace, secret), as_user=PLAIN)
    await eventually(
        objects.cluster, lambda c: cni(c).get("detectedVersion") == "1.20.4", what="Cilium 1.20.4"
    )
    managed = _patch(control_plane, namespace, {"kubernetesVersion": "v1.37.2"}, as_user=PLAIN)
    assert managed.returncode != 0, "the managed cluster refuses the step"
    assert "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36" in managed.stderr

    # The re-creation: the same cluster, unmanaged.
    control_plane.kubectl("delete", "taloscluster", "prod", "-n", namespace, as_user=PLAIN)
    await eventually(
        lambda: asyncio.to_thread(
            control_plane.kubectl, "get", "taloscluster", "prod", "-n", namespace, check=False
        ),
        lambda result: result.returncode != 0,
        what="prod deleted",
    )
    control_plane.kubectl(
        "create", "-f", "-", input=_cluster(namespace, secret, preset="unmanaged"), as_user=PLAIN
    )
    seen = await eventually(
        objects.cluster,
        lambda c: condition(c, "VersionsCompatible").get("reason") == "UnmanagedCilium",
        what="the condition shows Cilium on an unmanaged cluster",
    )
    shown = condition(seen, "VersionsCompatible")
    assert shown["status"] == "True"
    assert "Cilium 1.20.4 runs on the cluster, and spec.cni.preset is unmanaged" in shown["message"]

    # A step the rule accepts (Cilium 1.20 runs 1.36): no Warning.
    accepted = _patch(control_plane, namespace, {"kubernetesVersion": "v1.36.7"}, as_user=PLAIN)
    assert accepted.returncode == 0, accepted.stderr
    # A dry run of a step the rule refuses: no Warning either.
    control_plane.kubectl(
        "patch", "taloscluster", "prod", "-n", namespace, "--type=merge", "--dry-run=server",
        "-p", json.dumps({"spec": {"kubernetesVersion": "v1.37.2"}}), as_user=PLAIN,
    )  # fmt: skip
    # The step past the Cilium: admitted (the preset allows it), and a Warning Event.
    moved = _patch(control_plane, namespace, {"kubernetesVersion": "v1.37.2"}, as_user=PLAIN)
    assert moved.returncode == 0, moved.stderr
    found = await eventually(
        lambda: objects.events("prod"), lambda e: bool(_skipped(e)), what="the Warning Event"
    )
    (event,) = _skipped(found)
    assert event["type"] == "Warning"
    assert event["message"].startswith(
        f"User {PLAIN} wrote TalosCluster {namespace}/prod (update spec.kubernetesVersion to "
        "v1.37.2)"
    )
    assert "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36" in event["message"]

    # An operation past it: the same trace, naming the creator.
    control_plane.kubectl(
        "create", "-f", "-", as_user=PLAIN,
        input=_operation(namespace, "k8s", "kubernetes", "v1.37.3"),
    )  # fmt: skip
    found = await eventually(
        lambda: objects.events("prod"),
        lambda e: len(_skipped(e)) == 2,
        what="the Warning Event of the operation",
    )
    (created,) = [e for e in _skipped(found) if "TalosOperation" in e["message"]]
    assert created["message"].startswith(
        f"User {PLAIN} created TalosOperation {namespace}/k8s (kubernetes to v1.37.3 on "
        f"TalosCluster {namespace}/prod)"
    )
    assert "Cilium 1.20.4" in created["message"]
    # The dry run and the accepted step left none: two Warnings, for the two real steps.
    await asyncio.sleep(2)
    assert len(_skipped(await objects.events("prod"))) == 2
