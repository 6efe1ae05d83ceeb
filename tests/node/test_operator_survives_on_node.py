"""The operator's Pod goes away, a second replica comes, a Job runs out of time: on the node.

A Cilium operation is held Running for as long as the test wants: the stand-in chart,
installed with ``standIn.holdUpgrade`` (which the executor's ``--reset-then-reuse-values``
keeps), has a post-upgrade hook Job that nothing in the workload cluster runs, so the
Job's ``helm upgrade`` waits for it; the test writes that Job's status Complete, as the
Job controller would, to let the upgrade finish.

- The operator Pod deleted meanwhile: the Deployment starts another, which finds the
  operation's Job (its name is a function of the operation), so there is still exactly one
  Job, and the operation completes.
- Two replicas (kopf peering): both Pods Ready, both in the peering object; exactly one
  pauses in favour of the other (kopf logs it), only the other handles the operation and
  creates its Job (its log says so, the paused one's does not), and there is one Job.
- The Job's deadline (``ICHOR_JOB_DEADLINE``): Kubernetes fails the Job and the operation
  ends Failed saying so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from ichor.release.release_set import PINNED
from tests.component.chart import helm
from tests.harness import images, workload
from tests.node import story
from tests.node.conftest import CILIUM_CHART_PATH, OnNode, run_helm, wait_available

#: The node tier's session fixtures (node start, image build) are charged to the first
#: test that asks for them.
pytestmark = pytest.mark.timeout(1200)

HOLD_JOB = "stand-in-hold"


def _held_cilium(
    on_node: OnNode, registry: images.NodeRegistry, plane: workload.WorkloadPlane
) -> story.Cluster:
    """A workload cluster whose Cilium upgrade waits until the Node loses its label."""
    chart = images.push_chart(registry, chart=CILIUM_CHART_PATH, version=story.EDGE_CILIUM)
    images.push_chart(registry, chart=CILIUM_CHART_PATH, version=PINNED.cilium_chart)
    story.talos_node(plane, "edge-cp-1", address="10.201.1.10")
    story.helm_on(
        plane, "install", "cilium", chart, "--version", story.EDGE_CILIUM,
        "--namespace", "kube-system", "--plain-http", "--wait", "--timeout", "2m",
        "--set", "standIn.holdUpgrade=true",
    )  # fmt: skip
    return story.edge_cluster(on_node, plane)


def _release(plane: workload.WorkloadPlane) -> None:
    """Complete the hook Job as the Job controller would when its pod succeeds."""
    story.wait(
        "helm's post-upgrade hook Job",
        lambda: plane.kubectl("get", "job", HOLD_JOB, "-n", "kube-system", check=False).returncode,
        lambda code: code == 0,
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def condition(type_: str) -> dict[str, str]:
        return {
            "type": type_, "status": "True", "reason": "CompletionsReached",
            "message": "Reached expected number of succeeded pods",
            "lastProbeTime": now, "lastTransitionTime": now,
        }  # fmt: skip

    for status in (
        {"startTime": now, "active": 1, "ready": 0},
        {
            "active": 0, "ready": 0, "terminating": 0, "succeeded": 1, "completionTime": now,
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
            "uncountedTerminatedPods": {},
        },
    ):  # fmt: skip
        plane.kubectl(
            "patch", "job", HOLD_JOB, "-n", "kube-system", "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": status}),
        )  # fmt: skip


def _job_runs(operation: story.Operation) -> None:
    story.wait(
        "the Job's helm is waiting for its hook",
        lambda: [p["status"].get("phase") for p in operation.cluster.pods()],
        lambda phases: phases == ["Running"],
        explain=operation.explain,
    )


def _upgrade_release(on_node: OnNode, tmp_path: Path, change: dict[str, Any]) -> None:
    values = yaml.safe_load(on_node.values_file.read_text())
    for key, value in change.items():
        if key == "extraEnv":
            values["extraEnv"] = [*values["extraEnv"], *value]
        else:
            values[key] = value
    changed = tmp_path / "values.yaml"
    changed.write_text(yaml.safe_dump(values))
    run_helm(
        on_node.cluster, "upgrade", helm.RELEASE, str(helm.CHART), "-n", on_node.namespace,
        "-f", str(changed),
    )  # fmt: skip
    wait_available(on_node.cluster, on_node.namespace)


@pytest.fixture
def restore_release(on_node: OnNode) -> Iterator[None]:
    yield
    run_helm(
        on_node.cluster, "upgrade", helm.RELEASE, str(helm.CHART), "-n", on_node.namespace,
        "-f", str(on_node.values_file),
    )  # fmt: skip
    wait_available(on_node.cluster, on_node.namespace)
    story.wait("one operator Pod again", on_node.pods, lambda pods: len(pods) == 1)


def test_the_operator_pod_deleted_mid_operation_one_job_and_it_completes(
    on_node: OnNode, node_registry: images.NodeRegistry, workload_plane: workload.WorkloadPlane
) -> None:
    cluster = _held_cilium(on_node, node_registry, workload_plane)
    operation = cluster.start("edge-cni", type_="cni")
    _job_runs(operation)
    (first,) = cluster.jobs()
    old = on_node.pod()["metadata"]["name"]
    on_node.kubectl("delete", "pod", old, "-n", on_node.namespace, "--wait=true")
    story.wait(
        "a new operator Pod Ready",
        lambda: [
            p["metadata"]["name"]
            for p in on_node.pods()
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions", [])
            )
        ],
        lambda ready: len(ready) == 1 and ready[0] != old,
        explain=on_node.logs,
    )
    assert operation.phase() == "Running"
    _release(workload_plane)
    assert operation.wait_ended() == "Succeeded", operation.explain()
    (job,) = cluster.jobs()
    assert job["metadata"]["uid"] == first["metadata"]["uid"], "the same Job, not a second"


def test_two_replicas_share_the_work_through_peering_and_make_one_job(
    on_node: OnNode,
    node_registry: images.NodeRegistry,
    workload_plane: workload.WorkloadPlane,
    tmp_path: Path,
    restore_release: None,
) -> None:
    _upgrade_release(on_node, tmp_path, {"replicas": 2})
    story.wait("two operator Pods", on_node.pods, lambda pods: len(pods) == 2)
    peering = json.loads(
        on_node.kubectl("get", "clusterkopfpeerings", "-o", "json").stdout
    )["items"]  # fmt: skip
    assert len(peering) == 1, peering
    story.wait(
        "both replicas in the peering object",
        lambda: len(
            json.loads(
                on_node.kubectl(
                    "get", "clusterkopfpeering", peering[0]["metadata"]["name"], "-o", "json"
                ).stdout
            ).get("status", {})
        ),
        lambda peers: peers == 2,
    )
    names = sorted(p["metadata"]["name"] for p in on_node.pods())
    # kopf's words (kopf/_core/engines/peering.py). A replica starts paused and says
    # nothing while it stays so; it resumes (and says so) when no live peer outranks it,
    # and pauses again "in favour of" a peer that outranks it once it sees one. So the
    # active replica's last peering word is the resume, and the other one either never
    # resumed (no peering word at all) or last paused in favour of the active one.
    resuming, pausing = "Resuming operations after the pause", "Pausing operations in favour of"

    def roles(logs: dict[str, str]) -> dict[str, str]:
        last = {name: _peering_lines(text)[-1:] for name, text in logs.items()}
        return {
            name: "active" if lines and resuming in lines[0] else "paused"
            for name, lines in last.items()
        }

    logs = story.wait(
        "exactly one replica active",
        lambda: {name: _pod_log(on_node, name) for name in names},
        lambda found: sorted(roles(found).values()) == ["active", "paused"],
        within=90,
    )
    (active,) = [name for name, role in roles(logs).items() if role == "active"]
    (paused,) = set(names) - {active}
    paused_lines = _peering_lines(logs[paused])
    assert not paused_lines or (
        pausing in paused_lines[-1] and f"<Peer {active}:" in paused_lines[-1]
    ), paused_lines
    cluster = _held_cilium(on_node, node_registry, workload_plane)
    operation = cluster.start("edge-cni", type_="cni")
    _job_runs(operation)
    _release(workload_plane)
    assert operation.wait_ended() == "Succeeded", operation.explain()
    (job,) = cluster.jobs()
    logs = {name: _pod_log(on_node, name) for name in names}
    assert roles(logs) == {active: "active", paused: "paused"}, {
        name: _peering_lines(text) for name, text in logs.items()
    }
    # the executor's own line when it creates a Job (kopf's "Handler ... succeeded" does
    # not name the object with the operator's log format, and a replica may handle the
    # events of its first listing before it pauses)
    created = f"Job {cluster.namespace}/{job['metadata']['name']} created"
    assert [name for name, text in logs.items() if created in text] == [active], {
        name: text[-2000:] for name, text in logs.items()
    }


def _peering_lines(log: str) -> list[str]:
    """kopf's peering words in one operator log."""
    return [line for line in log.splitlines() if "engines.peering" in line]


def _pod_log(on_node: OnNode, pod: str) -> str:
    """The operator container's whole log of one Pod."""
    return on_node.kubectl(
        "logs", "-n", on_node.namespace, pod, "-c", "operator", check=False
    ).stdout


def test_a_job_past_its_deadline_fails_the_operation_saying_so(
    on_node: OnNode,
    node_registry: images.NodeRegistry,
    workload_plane: workload.WorkloadPlane,
    tmp_path: Path,
    restore_release: None,
) -> None:
    _upgrade_release(
        on_node, tmp_path, {"extraEnv": [{"name": "ICHOR_JOB_DEADLINE", "value": "30"}]}
    )
    cluster = _held_cilium(on_node, node_registry, workload_plane)
    operation = cluster.start("edge-cni", type_="cni")
    assert operation.wait_ended() == "Failed", operation.explain()
    message = operation.message()
    assert "DeadlineExceeded" in message, message
    (job,) = cluster.jobs()
    assert job["spec"]["activeDeadlineSeconds"] == 30
