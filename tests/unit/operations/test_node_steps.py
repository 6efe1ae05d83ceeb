"""Node by node, as pure decisions: the batches, the policy, what a failure says."""

from __future__ import annotations

import pytest

from ichor.api.taloscluster import (
    DEFAULT_UPGRADE_POLICY,
    RebootMode,
    UpgradePolicy,
    effective_policy,
)
from ichor.api.talosoperation import (
    ImageNodes,
    NodePolicy,
    OperationNodes,
    OperationType,
    PlannedNode,
)
from ichor.controller.talosoperation import jobs, lifecycle, nodesteps
from ichor.controller.talosoperation.jobs import NodeRole, TargetNode
from ichor.settings import ExecutorSettings
from ichor.upgrade.node_images import ImagePlan, NodeImage, NodePlan

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


def node(name: str, talos: str, *, ready: bool = True) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "status": {
            "nodeInfo": {"osImage": f"Talos ({talos})", "kubeletVersion": "v1.33.1"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_not_on_target_passes_a_batch_ready_on_the_target() -> None:
    items = [node("cp-1", "v1.10.3"), node("w-1", "v1.10.3")]
    assert nodesteps.not_on_target(ORDER[:1], items, target="v1.10.3") is None


@pytest.mark.parametrize(
    ("items", "reason", "said"),
    [
        ([node("w-1", "v1.10.3")], "NodesNotUpgraded", "Node cp-1 is no longer in the workload"),
        ([node("cp-1", "v1.10.2")], "NodesNotUpgraded", "Node cp-1 reports v1.10.2, not v1.10.3"),
        (
            [{"metadata": {"name": "cp-1"}}],
            "NodesNotUpgraded",
            "Node cp-1 reports no readable Talos, not v1.10.3",
        ),
        ([node("cp-1", "v1.10.3", ready=False)], "CheckFailed", "Node cp-1 is not Ready"),
    ],
)
def test_not_on_target_names_the_first_node_not_back(
    items: list[object], reason: str, said: str
) -> None:
    found = nodesteps.not_on_target(ORDER[:2], items, target="v1.10.3")
    assert found is not None
    assert found[0] == reason
    assert found[1].startswith(said)


def test_not_on_target_names_the_first_of_the_batch_in_order() -> None:
    items = [node("cp-1", "v1.10.2"), node("cp-2", "v1.10.3", ready=False)]
    found = nodesteps.not_on_target(ORDER[1::-1], items, target="v1.10.3")
    assert found == ("CheckFailed", "Node cp-2 is not Ready")


def test_checked_keeps_the_passed_in_order_and_the_failure_with_its_attempt() -> None:
    checked = nodesteps.Checked().passes("a").passes("b")
    assert checked.passed == ("a", "b")
    assert checked.failing is None
    assert not checked.new_attempt
    failed = checked.fails("CheckFailed", "etcd", new_attempt=True)
    assert failed.passed == ("a", "b")
    assert failed.failing == ("CheckFailed", "etcd")
    assert failed.new_attempt
    assert not nodesteps.Checked().fails("CheckFailed", "x").new_attempt


def outcome(state: str, message: str = "", reason: str = "") -> lifecycle.JobOutcome:
    return lifecycle.JobOutcome(lifecycle.JobState(state), reason=reason, message=message)


def imaged(*, drain: bool = True) -> OperationNodes:
    return OperationNodes(
        order=ORDER,
        policy=NodePolicy(drain=drain, drain_timeout="90s"),
        images=(ImageNodes(image="factory/installer:v1.10.3", nodes=tuple(n.name for n in ORDER)),),
        current=("w-1", "w-2"),
    )


def test_failed_node_is_none_while_no_job_failed() -> None:
    outcomes = {"w-1": (outcome("Running"), "j1"), "w-2": (nodesteps.ALREADY_THERE, "")}
    assert nodesteps.failed_node(ORDER[2:4], outcomes, nodes=imaged(), version="v1.10.3") is None


def test_failed_node_names_the_first_failed_node_of_the_batch() -> None:
    outcomes = {"w-1": (outcome("Running"), "j1"), "w-2": (outcome("Failed", "exit 1"), "j2")}
    found = nodesteps.failed_node(ORDER[2:4], outcomes, nodes=imaged(), version="v1.10.3")
    assert found is not None
    reason, message = found
    assert reason == "JobFailed"
    assert message.startswith("the upgrade of w-2 failed: exit 1; ")
    assert message.endswith("the TalosCluster spec is unchanged")


def test_failed_node_tells_a_drain_that_did_not_finish_only_under_drain() -> None:
    failed = {"w-1": (outcome("Failed", "error draining node w-1: timeout"), "j1")}
    found = nodesteps.failed_node(ORDER[2:3], failed, nodes=imaged(), version="v1.10.3")
    assert found is not None
    assert found[0] == "DrainTimedOut"
    assert "factory/installer:v1.10.3 is staged on it" in found[1]
    assert "within 90s" in found[1]
    plain = nodesteps.failed_node(ORDER[2:3], failed, nodes=imaged(drain=False), version="v")
    assert plain is not None
    assert plain[0] == "JobFailed"


def test_still_running_says_each_running_jobs_words_or_its_name() -> None:
    outcomes = {
        "w-1": (outcome("Running", "drains w-1"), "j1"),
        "w-2": (outcome("Running"), "j2"),
        "w-3": (outcome("Succeeded"), "j3"),
    }
    assert nodesteps.still_running(outcomes) == ["w-1: drains w-1", "w-2: Job j2 runs"]


def test_skipped_names_only_the_nodes_already_there() -> None:
    outcomes = {"w-1": (nodesteps.ALREADY_THERE, ""), "w-2": (outcome("Succeeded"), "j2")}
    found = nodesteps.skipped(["w-1", "w-2", "w-3"], outcomes, version="v1.10.3")
    assert found == ["w-1 already runs v1.10.3: not upgraded again"]


def test_planned_nodes_records_the_order_the_images_grouped_and_the_changing() -> None:
    own = NodeImage(platform="metal", secure_boot=False, schematic="s1", factory="f")
    plan = ImagePlan(
        nodes=(
            NodePlan(name="cp-1", image="i:1", own=own, schematic="s1"),
            NodePlan(name="w-1", image="i:2", own=own, schematic="s2"),
            NodePlan(name="w-2", image="i:1", own=own, schematic="s1"),
        )
    )
    read = jobs.NodeList(
        nodes=(
            TargetNode(name="cp-1", address="10.0.0.1", role=NodeRole.CONTROL_PLANE),
            TargetNode(name="w-1", address="10.0.0.11", role=NodeRole.WORKER),
            TargetNode(name="w-2", address="10.0.0.12", role=NodeRole.WORKER),
        )
    )
    found = nodesteps.planned_nodes(read, plan)
    assert found.order == (ORDER[0], ORDER[2], ORDER[3])
    assert found.images == (
        ImageNodes(image="i:1", nodes=("cp-1", "w-2")),
        ImageNodes(image="i:2", nodes=("w-1",)),
    )
    assert found.changing == ("w-1",)
    assert found.changes == plan.changes
    unchanged = nodesteps.planned_nodes(read, ImagePlan(nodes=plan.nodes[:1]))
    assert unchanged.changing is None
    assert unchanged.changes is None


def test_images_refused_says_every_refusal_and_how_an_empty_read_ended() -> None:
    plan = ImagePlan(refusals=("Node a is unread", "Node b runs no factory image"))
    said = nodesteps.images_refused(plan, what="op (x)", read_nothing=True, failure="exit 1")
    assert said == (
        "op (x) is refused before any node is upgraded: each node is upgraded to the image "
        "it runs, and Node a is unread. Node b runs no factory image. The read ended: exit 1."
    )
    read = nodesteps.images_refused(plan, what="op", read_nothing=False, failure="exit 1")
    assert "The read ended" not in read
    clean = nodesteps.images_refused(plan, what="op", read_nothing=True, failure="")
    assert "The read ended" not in clean
