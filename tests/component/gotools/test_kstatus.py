"""kstatus (the real Go package, tests/gotools/kstatus) reads objects of the test API server.

What the status tests of the three kinds build on: a Deployment whose status the test
writes through the status subresource (no controller-manager runs here) goes through
kstatus's states, and so does a TalosCluster with the conditions it carries today (a
``Ready`` condition and ``status.observedGeneration``). Both ways in agree: the program
reading the object itself (``read``) and the object handed to it (``compute``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ichor.api import kinds
from tests.harness import binaries, controlplane
from tests.support import kstatus
from tests.support.kstatus import Ref, Status

NOW = "2026-01-01T00:00:00Z"


def _deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]},
            },
        },
    }


def _status(
    plane: controlplane.ControlPlane, kind: str, name: str, namespace: str, status: Any
) -> None:
    plane.kubectl(
        "patch", kind, name, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def _available(
    generation: int, *, progressing: str = "True", reason: str = "NewReplicaSetAvailable"
) -> dict[str, Any]:
    return {
        "observedGeneration": generation,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability.", "lastUpdateTime": NOW,
             "lastTransitionTime": NOW},
            {"type": "Progressing", "status": progressing, "reason": reason,
             "message": f"progress: {reason}", "lastUpdateTime": NOW, "lastTransitionTime": NOW},
        ],
    }  # fmt: skip


def _read_both(plane: controlplane.ControlPlane, ref: Ref, kind: str) -> kstatus.Result:
    """kstatus of the object read by the program, checked equal to kstatus of the same
    object as kubectl returns it."""
    (direct,) = kstatus.read(plane.kubeconfig, [ref])
    body = json.loads(
        plane.kubectl("get", kind, ref.name, "-n", ref.namespace, "-o", "json").stdout
    )
    (given,) = kstatus.compute([body])
    assert given == direct
    return direct


def test_a_deployment_goes_through_kstatus_states_as_its_status_is_written(
    control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    plane = control_plane
    plane.kubectl("apply", "-f", "-", input=json.dumps(_deployment("web", namespace)))
    ref = Ref("apps", "v1", "deployments", namespace, "web")

    fresh = _read_both(plane, ref, "deployment")
    assert (fresh.kind, fresh.name, fresh.namespace, fresh.generation) == (
        "Deployment", "web", namespace, 1
    )  # fmt: skip
    assert fresh.status is Status.IN_PROGRESS, fresh

    _status(plane, "deployment", "web", namespace, _available(1))
    current = _read_both(plane, ref, "deployment")
    assert current.status is Status.CURRENT, current
    assert current.message == "Deployment is available. Replicas: 1"

    # A spec change the controller has not observed yet.
    plane.kubectl(
        "patch", "deployment", "web", "-n", namespace, "--type=merge",
        "-p", json.dumps({"spec": {"replicas": 2}}),
    )  # fmt: skip
    behind = _read_both(plane, ref, "deployment")
    assert behind.status is Status.IN_PROGRESS, behind
    assert behind.message == "Deployment generation is 2, but latest observed generation is 1"
    reconciling = behind.condition("Reconciling")
    assert reconciling is not None
    assert reconciling.reason == "LatestGenerationNotObserved"

    _status(
        plane, "deployment", "web", namespace,
        _available(2, progressing="False", reason="ProgressDeadlineExceeded"),
    )  # fmt: skip
    failed = _read_both(plane, ref, "deployment")
    assert failed.status is Status.FAILED, failed
    stalled = failed.condition("Stalled")
    assert stalled is not None
    assert stalled.status == "True"


def _cluster(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_CLUSTER.value,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
        },
    }


def _ready(status: str, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {
        "observedGeneration": generation,
        "conditions": [
            {"type": "Ready", "status": status, "reason": reason, "message": message,
             "observedGeneration": generation, "lastTransitionTime": NOW},
        ],
    }  # fmt: skip


def test_a_taloscluster_reads_as_kstatus_sees_its_status_today(
    control_plane: controlplane.ControlPlane, crds: None, namespace: str
) -> None:
    """Today's TalosCluster status: kstatus reads its ``Ready`` condition and
    ``status.observedGeneration`` (the Reconciling/Stalled shape comes later)."""
    plane = control_plane
    plane.kubectl("apply", "-f", "-", input=json.dumps(_cluster("prod", namespace)))
    plural = kinds.PLURALS[kinds.Kind.TALOS_CLUSTER].value
    ref = Ref(kinds.GROUP, kinds.VERSION, plural, namespace, "prod")
    kind = f"{plural}.{kinds.GROUP}"

    # No status yet: kstatus assumes current (it cannot tell a kind without conditions).
    fresh = _read_both(plane, ref, kind)
    assert (fresh.status, fresh.message) == (Status.CURRENT, "Resource is current")
    assert fresh.kind == "TalosCluster"

    unreachable = "the workload API server did not answer"
    _status(plane, kind, "prod", namespace, _ready("False", "WorkloadUnreachable", unreachable, 1))
    waiting = _read_both(plane, ref, kind)
    assert (waiting.status, waiting.message) == (Status.IN_PROGRESS, unreachable)

    _status(plane, kind, "prod", namespace, _ready("True", "Observed", "versions read", 1))
    ready = _read_both(plane, ref, kind)
    assert (ready.status, ready.message) == (Status.CURRENT, "Resource is Ready")

    plane.kubectl(
        "patch", kind, "prod", "-n", namespace, "--type=merge",
        "-p", json.dumps({"spec": {"kubernetesVersion": "v1.36.7"}}),
    )  # fmt: skip
    behind = _read_both(plane, ref, kind)
    assert behind.status is Status.IN_PROGRESS
    assert behind.message == "TalosCluster generation is 2, but latest observed generation is 1"


def test_several_objects_in_one_run_answer_in_order_with_a_missing_one_not_found(
    control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    plane = control_plane
    plane.kubectl("create", "configmap", "settings", "-n", namespace)
    plane.kubectl("apply", "-f", "-", input=json.dumps(_deployment("api", namespace)))
    refs = [
        Ref("", "v1", "configmaps", namespace, "settings"),
        Ref("", "v1", "configmaps", namespace, "absent"),
        Ref("apps", "v1", "deployments", namespace, "api"),
    ]
    results = kstatus.read(plane.kubeconfig, refs)
    assert [(r.name, r.status) for r in results] == [
        ("settings", Status.CURRENT),
        ("absent", Status.NOT_FOUND),
        ("api", Status.IN_PROGRESS),
    ]
    # A List (kubectl get -o json) counts as its items.
    listed = json.loads(
        plane.kubectl("get", "configmaps,deployments", "-n", namespace, "-o", "json").stdout
    )
    assert {(r.kind, r.name) for r in kstatus.compute([listed])} >= {
        ("ConfigMap", "settings"), ("Deployment", "api"),
    }  # fmt: skip


def test_a_cluster_scoped_object_is_read_with_an_empty_namespace(
    control_plane: controlplane.ControlPlane, crds: None
) -> None:
    crd = kinds.crd_name(kinds.Kind.TALOS_CLUSTER)
    (result,) = kstatus.read(
        control_plane.kubeconfig,
        [Ref("apiextensions.k8s.io", "v1", "customresourcedefinitions", "", crd)],
    )
    assert (result.kind, result.name, result.status) == (
        "CustomResourceDefinition", crd, Status.CURRENT
    )  # fmt: skip


def test_a_field_of_the_wrong_type_is_unknown_with_kstatus_reason() -> None:
    thing = {
        "apiVersion": "example.dev/v1",
        "kind": "Thing",
        "metadata": {"name": "x", "generation": 1},
        "status": {"observedGeneration": "one"},
    }
    (result,) = kstatus.compute([thing])
    assert result.status is Status.UNKNOWN
    assert result.error is not None
    assert "status.observedGeneration" in result.error


def test_what_the_program_cannot_do_is_an_error_naming_the_cause(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    with pytest.raises(kstatus.KstatusError, match=r"is not GROUP/VERSION/RESOURCE"):
        kstatus.read(control_plane.kubeconfig, [Ref("apps", "v1", "deployments", "x", "")])
    missing = tmp_path / "no-such.kubeconfig"
    with pytest.raises(kstatus.KstatusError, match=r"no-such\.kubeconfig"):
        kstatus.read(missing, [Ref("", "v1", "configmaps", "default", "x")])
    with pytest.raises(kstatus.KstatusError, match=r"stdin value 1 is not JSON"):
        kstatus._run(["compute"], stdin="{not json", expected=1)


def test_an_unbuilt_program_names_make_testenv(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ICHOR_TESTENV", str(tmp_path / "empty"))
    with pytest.raises(binaries.MissingBinaryError, match=r"kstatus is not built.*`make testenv`"):
        kstatus.compute([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}])
