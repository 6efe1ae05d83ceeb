"""Node by node, as pure decisions: the batches, the policy, what a failure says."""

from __future__ import annotations

import pytest

from ichor.api.taloscluster import (
    DEFAULT_UPGRADE_POLICY,
    RebootMode,
    UpgradePolicy,
    effective_policy,
)
from ichor.api.talosoperation import NodePolicy, OperationNodes, OperationType, PlannedNode
from ichor.controller.talosoperation import jobs, nodesteps
from ichor.controller.talosoperation.jobs import NodeRole, TargetNode
from ichor.settings import ExecutorSettings

ORDER = (
    PlannedNode(name="cp-1", address="10.0.0.1", control_plane=True),
    PlannedNode(name="cp-2", address="10.0.0.2", control_plane=True),
    PlannedNode(name="w-1", address="10.0.0.11"),
    PlannedNode(name="w-2", address="10.0.0.12"),
    PlannedNode(name="w-3", address="10.0.0.13"),
)


def plan(*, done: tuple[str, ...] = (), most: int = 1) -> OperationNodes:
    return OperationNodes(
        order=ORDER, policy=NodePolicy(max_unavailable_workers=most), done=done or None
    )


@pytest.mark.parametrize(
    ("done", "most", "expected"),
    [
        ((), 3, ("cp-1",)),
        (("cp-1",), 3, ("cp-2",)),
        (("cp-1", "cp-2"), 1, ("w-1",)),
        (("cp-1", "cp-2"), 2, ("w-1", "w-2")),
        (("cp-1", "cp-2", "w-1"), 5, ("w-2", "w-3")),
        (("cp-1", "cp-2", "w-1", "w-2", "w-3"), 2, ()),
    ],
)
def test_control_plane_one_by_one_then_workers_as_the_policy_says(
    done: tuple[str, ...], most: int, expected: tuple[str, ...]
) -> None:
    assert tuple(n.name for n in nodesteps.next_batch(plan(done=done, most=most))) == expected


def test_the_policy_is_the_clusters_then_the_fleets_then_talosctls() -> None:
    own = UpgradePolicy(drain_timeout="90s")
    fleet = UpgradePolicy(drain=False, drain_timeout="10m", max_unavailable_workers=3)
    found = effective_policy(own, fleet)
    assert found == UpgradePolicy(
        drain=False, drain_timeout="90s", reboot_mode=RebootMode.DEFAULT, max_unavailable_workers=3
    )
    assert effective_policy(None, None) == DEFAULT_UPGRADE_POLICY


def test_a_single_node_cluster_is_never_drained() -> None:
    single = nodesteps.policy_for(DEFAULT_UPGRADE_POLICY, nodes=1)
    assert single.single_node is True
    assert single.drain is False
    assert nodesteps.policy_for(DEFAULT_UPGRADE_POLICY, nodes=2).drain is True
    said = nodesteps.single_node_statement(version="v1.14.4", drain=True)
    assert "every workload, the Kubernetes API and this cluster's etcd are down" in said
    assert "it is not drained" in said


@pytest.mark.parametrize(
    ("log", "timed_out"),
    [
        ('error draining node "w-1": global timeout reached: 5m0s', True),
        ('error draining node "w-1": context deadline exceeded', True),
        ("error during upgrade: rpc error: code = Unavailable", False),
        ("", False),
    ],
)
def test_talosctls_drain_failure_is_told_from_other_failures(log: str, timed_out: bool) -> None:
    assert nodesteps.drain_timed_out(log) is timed_out


def test_a_drain_that_timed_out_names_the_node_the_staged_image_and_the_commands() -> None:
    said = nodesteps.drain_message(
        node=ORDER[2], image="f/metal-installer/s:v1.14.4", timeout="5m", failure="x",
        version="v1.14.4",
    )  # fmt: skip
    assert said.startswith("the drain of w-1 did not finish within 5m: f/metal-installer/s:v1.14.4")
    assert "talosctl --nodes 10.0.0.11 reboot, then kubectl uncordon w-1" in said
    assert "talosctl --nodes 10.0.0.11 rollback" in said


def test_a_failure_between_nodes_says_which_are_done_reached_and_left() -> None:
    nodes = plan(done=("cp-1",)).model_copy(update={"current": ("cp-2",)})
    said = nodesteps.failed_between(
        check="etcd on cp-2 reports: x", when="after", node="cp-2", nodes=nodes, step="Fix it."
    )
    assert said == (
        "stopped after cp-2: etcd on cp-2 reports: x; done: cp-1; upgraded, its checks not "
        "passed: cp-2; not upgraded: w-1, w-2, w-3. Fix it."
    )


def test_a_nodes_job_runs_talosctl_with_its_image_and_the_policy_and_avoids_its_node() -> None:
    ref = jobs.OperationRef(
        namespace="n", name="up", uid="u", cluster="c", type=OperationType.TALOS
    )
    target = TargetNode(name="w-1", address="10.0.0.11", role=NodeRole.WORKER)
    common = {
        "operation": ref, "name": "j", "version": "v1.14.4", "node": target, "image": "img",
        "drain": True, "drain_timeout": "90s", "reboot_mode": "powercycle",
        "talosconfig": jobs.SecretMount(secret="s", key="talosconfig"),
        "settings": ExecutorSettings(),
    }  # fmt: skip
    job = jobs.node_job(avoid_node=True, **common)  # type: ignore[arg-type]
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == [
        "upgrade", "--nodes", "10.0.0.11", "--image", "img", "--wait", "--drain=true",
        "--drain-timeout=90s", "--reboot-mode=powercycle",
    ]  # fmt: skip
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == {
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["w-1"]}]
    }
    assert job["metadata"]["annotations"][jobs.NODE_ANNOTATION] == "w-1"
    # a workload of its own (a kubeconfig Secret): its nodes are not this cluster's
    plain = jobs.node_job(avoid_node=False, **common)  # type: ignore[arg-type]
    assert "affinity" not in plain["spec"]["template"]["spec"]


def test_the_kept_off_node_is_added_to_every_term_of_a_given_affinity() -> None:
    terms_given = [
        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
    ]
    given = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms_given}
        }
    }
    merged = jobs._merged_affinity(given, "w-1")
    terms = merged["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert len(terms) == 2
    for term in terms:
        assert {"key": "metadata.name", "operator": "NotIn", "values": ["w-1"]} in term[
            "matchFields"
        ]
