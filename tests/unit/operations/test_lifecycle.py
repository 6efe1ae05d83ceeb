"""The operation lifecycle, without a cluster: order, the rule at execution, Job outcomes
and the status of each step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ichor.api.conditions import ConditionStatus, OperationReason
from ichor.api.conditions import OperationReason as Reason
from ichor.api.taloscluster import CNIPreset, CNISpec
from ichor.api.talosoperation import Phase
from ichor.controller.talosoperation import lifecycle
from ichor.controller.talosoperation.lifecycle import ClusterState, JobState, Operation
from ichor.release.refusals import Rule
from ichor.release.release_set import PINNED
from ichor.release.versions import parse
from tests.support import table

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 3, 8, 5, tzinfo=UTC)


def operation(
    name: str = "op",
    *,
    type_: str = "talos",
    version: str | None = "v1.14.4",
    override: bool = False,
    created: str = "2026-12-03T08:00:00Z",
    status: dict[str, Any] | None = None,
    cni: dict[str, Any] | None = None,
    deleting: bool = False,
) -> Operation:
    spec: dict[str, Any] = {"clusterRef": {"name": "prod"}, "type": type_, "override": override}
    if version is not None:
        spec["version"] = version
    if cni is not None:
        spec["cni"] = cni
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "team-a",
        "uid": f"uid-{name}",
        "creationTimestamp": created,
        "generation": 1,
        "resourceVersion": "7",
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T08:10:00Z"
    return Operation.from_body({"metadata": meta, "spec": spec, "status": status or {}})


def cluster(
    *,
    talos: str = "v1.14.3",
    kubernetes: str = "v1.36.6",
    observed: dict[str, Any] | None = None,
    cni: dict[str, Any] | None = None,
) -> ClusterState:
    status: dict[str, Any] = dict(observed or {})
    if cni is not None:
        status["cni"] = cni
    return ClusterState.from_body(
        {
            "metadata": {"name": "prod"},
            "spec": {
                "talosVersion": talos,
                "kubernetesVersion": kubernetes,
                "versionContract": "v1.14",
            },
            "status": status,
        }
    )


CILIUM_119 = {"detected": "cilium", "detectedVersion": "1.19.10"}


def test_run_order_is_oldest_first_and_leaves_out_the_finished_and_the_deleted() -> None:
    ops = [
        operation("c", created="2026-12-03T08:02:00Z"),
        operation("done", created="2026-12-03T07:00:00Z", status={"phase": "Succeeded"}),
        operation("b", created="2026-12-03T08:01:00Z"),
        operation("a2", created="2026-12-03T08:01:00Z"),
        operation("gone", created="2026-12-03T07:30:00Z", deleting=True),
        operation("failed", created="2026-12-03T07:10:00Z", status={"phase": "Failed"}),
    ]
    assert [op.name for op in lifecycle.run_order(ops)] == ["a2", "b", "c"]


@pytest.mark.parametrize(
    ("ahead_status", "state"),
    [({"phase": "Running"}, "Running"), ({}, "created earlier, not yet started")],
)
def test_a_waiting_operation_names_the_one_ahead(ahead_status: dict[str, Any], state: str) -> None:
    message = lifecycle.waiting_message(
        operation("second"), ahead=operation("first", status=ahead_status)
    )
    assert "TalosOperation team-a/first" in message
    assert state in message
    assert "one operation runs per TalosCluster team-a/prod" in message


@pytest.mark.parametrize(
    ("op", "state", "rule"),
    [
        # plan-time valid, still valid
        (operation(), cluster(), None),
        (operation(type_="kubernetes", version="v1.37.1"), cluster(), None),
        (operation(type_="cni", version=None), cluster(cni=CILIUM_119), None),
        # the cluster moved between the plan and the run
        (operation(version="v1.14.4"), cluster(talos="v1.14.5"), Rule.NOT_NEWER),
        (
            operation(type_="kubernetes", version="v1.37.1"),
            cluster(kubernetes="v1.37.2"),
            Rule.NOT_NEWER,
        ),
        (
            operation(type_="kubernetes", version="v1.37.1"),
            cluster(kubernetes="v1.35.0"),
            Rule.KUBERNETES_SKEW,
        ),
        # what the nodes run, when it differs from the spec
        (operation(), cluster(observed={"kubernetesVersion": "v1.32.4"}), Rule.TALOS_KUBERNETES),
        (operation(), cluster(observed={"talosVersion": "v1.11.5"}), Rule.TALOS_PATH),
        (
            operation(type_="kubernetes", version="v1.37.1"),
            cluster(observed={"kubernetesVersion": "v1.35.3"}),
            Rule.KUBERNETES_SKEW,
        ),
        # unreadable observations are not judged
        (operation(), cluster(observed={"talosVersion": "garbage"}), None),
        # cni: the chart already runs, a version or an image patch named
        (
            operation(type_="cni", version=None),
            cluster(cni={"detected": "cilium", "detectedVersion": PINNED.cilium_chart}),
            Rule.NOT_NEWER,
        ),
        (
            operation(type_="cni", version=None, cni={"imageVersion": "1.20.5"}),
            cluster(cni=CILIUM_119),
            Rule.CNI_VERSION,
        ),
        (operation(type_="cni", version="v1.20.5"), cluster(cni=CILIUM_119), Rule.CNI_VERSION),
        # the Kubernetes step meets the running Cilium
        (
            operation(type_="kubernetes", version="v1.37.1"),
            cluster(cni={"detected": "cilium", "detectedVersion": "1.20.4"}),
            Rule.CILIUM_KUBERNETES,
        ),
    ],
)
def test_the_target_rule_is_checked_again_at_execution(
    op: Operation, state: ClusterState, rule: Rule | None
) -> None:
    refusal = lifecycle.check_execution(op, state)
    assert (refusal.rule if refusal else None) == rule, refusal


def test_a_cni_operation_with_an_image_patch_is_refused_with_the_adrs_message() -> None:
    op = operation(type_="cni", version=None, cni={"imageVersion": "1.20.5"})
    refusal = lifecycle.check_execution(op, cluster(cni=CILIUM_119))
    assert refusal is not None
    assert not refusal.overridable
    assert "'1.20.5' given" in refusal.message
    assert "delete it and run `ichor cni upgrade` again" in refusal.message


@pytest.mark.parametrize("override", [False, True])
def test_an_overridable_refusal_runs_only_under_override(override: bool) -> None:
    op = operation(override=override)
    refusal = lifecycle.check_execution(op, cluster(observed={"kubernetesVersion": "v1.32.4"}))
    assert refusal is not None
    assert refusal.overridable
    decision = lifecycle.decide(refusal, override=override)
    assert decision.runs is override
    if override:
        assert decision.passed == refusal
    else:
        assert "override: true" in lifecycle.refusal_message(refusal, override=False)


@pytest.mark.parametrize("override", [False, True])
def test_a_never_overridable_refusal_stands_under_override(override: bool) -> None:
    refusal = lifecycle.check_execution(operation(override=override), cluster(talos="v1.14.5"))
    assert refusal is not None
    assert not lifecycle.decide(refusal, override=override).runs


def job(*conditions: tuple[str, str, str, str]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions
            ]
        }
    }


def pod(*inits: dict[str, Any], main: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "status": {
            "initContainerStatuses": list(inits),
            "containerStatuses": [main] if main else [],
        }
    }


def test_job_outcome_running_reports_the_step() -> None:
    done = {"name": "upgrade-000", "state": {"terminated": {"exitCode": 0}}}
    now = {"name": "upgrade-001", "state": {"running": {}}}
    outcome = lifecycle.job_outcome(job(), [pod(done, now)])
    assert outcome.state is JobState.RUNNING
    assert outcome.message == "step 2 of 2 (upgrade-001) runs"
    assert lifecycle.job_outcome(job()).message == ""


@pytest.mark.parametrize(
    "reason", ["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"]
)
def test_job_outcome_running_says_a_container_cannot_start_and_why(reason: str) -> None:
    """An image tag the registry does not have keeps the Job Running until its deadline:
    the operation's message says so meanwhile, with the kubelet's words."""
    waiting = {
        "name": "helm-upgrade",
        "image": "10.201.0.2:5000/ichor/helm:missing",
        "state": {
            "waiting": {
                "reason": reason,
                "message": 'failed to pull "10.201.0.2:5000/ichor/helm:missing": not found',
            }
        },
    }
    outcome = lifecycle.job_outcome(job(), [pod(main=waiting)])
    assert outcome.state is JobState.RUNNING
    assert outcome.message == (
        f"container helm-upgrade cannot start ({reason}): failed to pull "
        '"10.201.0.2:5000/ichor/helm:missing": not found'
    )


def test_job_outcome_running_is_quiet_while_a_container_is_only_being_created() -> None:
    creating = {"name": "helm-upgrade", "state": {"waiting": {"reason": "ContainerCreating"}}}
    assert lifecycle.job_outcome(job(), [pod(main=creating)]).message == ""


def test_job_outcome_running_names_a_waiting_init_step_before_the_progress() -> None:
    done = {"name": "upgrade-000", "state": {"terminated": {"exitCode": 0}}}
    stuck = {
        "name": "upgrade-001",
        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling"}},
    }
    message = lifecycle.job_outcome(job(), [pod(done, stuck)]).message
    assert message == "container upgrade-001 cannot start (ImagePullBackOff): Back-off pulling"


def test_job_outcome_success() -> None:
    outcome = lifecycle.job_outcome(
        job(
            ("SuccessCriteriaMet", "True", "CompletionsReached", ""),
            ("Complete", "True", "CompletionsReached", ""),
        )
    )
    assert outcome.state is JobState.SUCCEEDED


def test_job_outcome_failure_carries_the_jobs_reason_and_the_failed_containers_log() -> None:
    failed = {
        "name": "upgrade-001",
        "state": {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "message": "line 1\nline 2\nerror: rpc error: node 10.0.0.2 refused the upgrade\n",
            }
        },
    }
    outcome = lifecycle.job_outcome(
        job(
            (
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
            (
                "Failed",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
        ),
        [pod({"name": "upgrade-000", "state": {"terminated": {"exitCode": 0}}}, failed)],
    )
    assert outcome.state is JobState.FAILED
    assert outcome.reason == "BackoffLimitExceeded"
    assert outcome.message == (
        "the Job failed (BackoffLimitExceeded); Job has reached the specified backoff limit; "
        "container upgrade-001 exited 1 (Error): line 1 | line 2 | "
        "error: rpc error: node 10.0.0.2 refused the upgrade"
    )


def test_a_failed_containers_log_is_quoted_printable_and_bounded() -> None:
    """What talosctl or helm printed is another program's text: its last lines are kept,
    its control characters dropped, and the quote ends within ``MAX_LOG_DETAIL``."""
    noisy = "\x1b[31m" + "x" * 10_000 + "\x07\nerror: the end\r\n"
    failed = {
        "name": "upgrade-k8s",
        "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": noisy}},
    }
    outcome = lifecycle.job_outcome(
        job(("Failed", "True", "BackoffLimitExceeded", "backoff")), [pod(failed)]
    )
    assert outcome.message.endswith("error: the end")
    assert "\x1b" not in outcome.message
    assert "\x07" not in outcome.message
    assert len(outcome.message) < lifecycle.MAX_LOG_DETAIL + 200


def test_job_outcome_failure_without_pods_still_says_why() -> None:
    outcome = lifecycle.job_outcome(
        job(("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline"))
    )
    assert outcome.state is JobState.FAILED
    assert outcome.message == (
        "the Job failed (DeadlineExceeded); Job was active longer than specified deadline"
    )


def conditions_of(status: Any) -> dict[str, tuple[ConditionStatus, str]]:
    return {c.type: (c.status, c.reason) for c in status.conditions}


def test_the_lifecycle_moves_pending_running_succeeded_with_times_and_conditions() -> None:
    op = operation()
    waiting = lifecycle.pending(op, reason=Reason.WAITING, message="waits", now=NOW)
    assert waiting.phase is Phase.PENDING
    assert conditions_of(waiting) == {
        "Accepted": (ConditionStatus.UNKNOWN, "Waiting"),
        "Ready": (ConditionStatus.UNKNOWN, "Waiting"),
        "Reconciling": (ConditionStatus.TRUE, "Waiting"),
    }

    op = operation(status=waiting.to_api())
    claimed = lifecycle.running(
        op,
        job_name="ichor-talos-op-1",
        decision=lifecycle.Decision(),
        job_created=False,
        message="creating",
        now=NOW,
    )
    assert claimed.phase is Phase.RUNNING
    assert claimed.started_at == NOW
    assert claimed.job_name == "ichor-talos-op-1"
    assert conditions_of(claimed) == {
        "Accepted": (ConditionStatus.TRUE, OperationReason.ACCEPTED),
        "Complete": (ConditionStatus.FALSE, Reason.JOB_CREATING),
        "Ready": (ConditionStatus.UNKNOWN, Reason.JOB_CREATING),
        "Reconciling": (ConditionStatus.TRUE, Reason.JOB_CREATING),
    }

    op = operation(status=claimed.to_api())
    runs = lifecycle.running(
        op,
        job_name="ichor-talos-op-1",
        decision=lifecycle.Decision(),
        job_created=True,
        message="runs",
        now=LATER,
    )
    assert runs.started_at == NOW
    assert conditions_of(runs)["Complete"] == (ConditionStatus.FALSE, OperationReason.JOB_RUNNING)

    op = operation(status=runs.to_api())
    done = lifecycle.succeeded(op, message="ok", now=LATER)
    assert done.phase is Phase.SUCCEEDED
    assert (done.started_at, done.finished_at) == (NOW, LATER)
    assert conditions_of(done)["Complete"] == (ConditionStatus.TRUE, OperationReason.JOB_SUCCEEDED)
    # Reconciling is gone (present only while True), Ready is True
    assert conditions_of(done) == {
        "Accepted": (ConditionStatus.TRUE, OperationReason.ACCEPTED),
        "Complete": (ConditionStatus.TRUE, OperationReason.JOB_SUCCEEDED),
        "Ready": (ConditionStatus.TRUE, Reason.SUCCEEDED),
    }
    assert all(c.observed_generation == op.generation for c in done.conditions)


def test_an_override_is_named_in_the_accepted_condition() -> None:
    refusal = lifecycle.check_execution(
        operation(override=True), cluster(observed={"kubernetesVersion": "v1.32.4"})
    )
    decision = lifecycle.decide(refusal, override=True)
    status = lifecycle.running(
        operation(override=True),
        job_name="j",
        decision=decision,
        job_created=False,
        message="m",
        now=NOW,
    )
    (accepted,) = [c for c in status.conditions if c.type == "Accepted"]
    assert accepted.reason == OperationReason.OVERRIDDEN
    assert "TalosKubernetes" in accepted.message


def test_a_refusal_fails_with_a_condition_naming_the_rule() -> None:
    status = lifecycle.failed(
        operation(), reason=Rule.NOT_NEWER, message="refused", now=NOW, refused=True
    )
    assert status.phase is Phase.FAILED
    assert status.finished_at == NOW
    assert conditions_of(status) == {
        "Accepted": (ConditionStatus.FALSE, "NotNewer"),
        "Complete": (ConditionStatus.TRUE, OperationReason.REFUSED),
        "Ready": (ConditionStatus.FALSE, "NotNewer"),
        "Stalled": (ConditionStatus.TRUE, "NotNewer"),
    }


@pytest.mark.parametrize(
    ("current", "target", "moves"),
    [
        ("v1.14.3", "v1.14.4", True),
        ("v1.14.4", "v1.14.4", False),
        ("v1.14.5", "v1.14.4", False),
        ("junk", "v1.14.4", True),
    ],
)
def test_the_spec_only_moves_forward(current: str, target: str, moves: bool) -> None:
    assert lifecycle.needs_spec_update(current=current, target=target) is moves


def test_the_executor_refuses_an_unknown_cilium_behind_an_overridden_pair() -> None:
    """The reproduction at execution: the pair is overridden, an unknown Cilium never is."""
    op = operation(type_="kubernetes", version="v1.32.0", override=True)
    unknown = {"detected": "cilium", "detectedVersion": table.unknown_cilium()}
    state = cluster(kubernetes="v1.31.5", cni=unknown)
    refusal = lifecycle.check_execution(op, state)
    assert refusal is not None
    assert refusal.rule is Rule.UNKNOWN_VERSION
    decision = lifecycle.decide(refusal, override=True)
    assert not decision.runs
    assert decision.passed is None


def test_the_executor_judges_what_the_nodes_run_even_under_an_overridden_spec_refusal() -> None:
    """Nodes on Talos v1.11.5, spec Talos v1.14.3 / Kubernetes v1.31.5, Talos v1.14.4 under
    override: the spec's pair refusal is overridable, the running host's path is not."""
    op = operation(version="v1.14.4", override=True)
    state = cluster(kubernetes="v1.31.5", observed={"talosVersion": "v1.11.5"})
    refusal = lifecycle.check_execution(op, state)
    assert refusal is not None
    assert refusal.rule is Rule.TALOS_PATH
    assert "from v1.11.5" in refusal.message
    assert not lifecycle.decide(refusal, override=True).runs


def _unmanaged(state: ClusterState) -> ClusterState:
    return ClusterState(
        name=state.name,
        spec=state.spec.model_copy(update={"cni": CNISpec(preset=CNIPreset.UNMANAGED)}),
        status=state.status,
    )


def test_the_executor_skips_the_cilium_table_for_an_unmanaged_cni() -> None:
    op = operation(type_="kubernetes", version="v1.37.1")
    detected = {"detected": "cilium", "detectedVersion": "1.20.4"}
    assert lifecycle.check_execution(op, _unmanaged(cluster(cni=detected))) is None
    managed = lifecycle.check_execution(op, cluster(cni=detected))
    assert managed is not None
    assert managed.rule is Rule.CILIUM_KUBERNETES


@pytest.mark.parametrize(
    "state",
    [
        _unmanaged(cluster(cni=CILIUM_119)),
        cluster(cni={"detected": "calico", "detectedVersion": "3.30.1"}),
    ],
    ids=["unmanaged-preset", "observed-calico"],
)
def test_the_executor_refuses_a_cni_operation_ichor_does_not_run(state: ClusterState) -> None:
    refusal = lifecycle.check_execution(operation(type_="cni", version=None, override=True), state)
    assert refusal is not None
    assert refusal.rule is Rule.NOT_CILIUM
    assert not lifecycle.decide(refusal, override=True).runs


# --- after the Job: the Nodes report the target -------------------------------------------


def _v(text: str) -> Any:
    return parse(text)


def test_nodes_behind_names_each_node_not_on_the_target_and_only_those() -> None:
    op = operation(type_="talos", version="v1.14.4")
    reported = {"cp-1": _v("v1.14.4"), "cp-2": _v("v1.14.3"), "w-1": None}
    assert lifecycle.nodes_behind(op, reported) == (
        "Node cp-2 reports Talos v1.14.3",
        "Node w-1 reports no readable Talos version",
    )
    assert lifecycle.nodes_behind(op, {"cp-1": _v("1.14.4")}) == ()


def test_nodes_behind_a_newer_version_is_not_the_target_either() -> None:
    op = operation(type_="kubernetes", version="v1.37.1")
    assert lifecycle.nodes_behind(op, {"cp-1": _v("v1.37.2")}) == (
        "Node cp-1 reports kubelet v1.37.2",
    )


def test_nodes_behind_looks_at_the_jobs_nodes_and_a_node_gone_is_named() -> None:
    op = operation(type_="talos", version="v1.14.4")
    reported = {"cp-1": _v("v1.14.4"), "new-worker": _v("v1.14.3")}
    # a Node that joined after the Job was made is not this operation's
    assert lifecycle.nodes_behind(op, reported, upgraded=["cp-1"]) == ()
    assert lifecycle.nodes_behind(op, reported, upgraded=["cp-1", "cp-2"]) == (
        "Node cp-2 is no longer in the workload cluster",
    )


def test_nodes_behind_counts_past_the_named_ones() -> None:
    op = operation(type_="talos", version="v1.14.4")
    reported = {f"n-{i:02d}": _v("v1.14.3") for i in range(8)}
    behind = lifecycle.nodes_behind(op, reported)
    assert len(behind) == lifecycle.MAX_NODES_NAMED + 1
    assert behind[-1] == "and 3 more Nodes"


def test_a_cni_operation_or_an_unreadable_target_waits_for_no_node() -> None:
    assert lifecycle.nodes_behind(operation(type_="cni", version=None), {"n": None}) == ()
    assert lifecycle.nodes_behind(operation(version="latest"), {"n": None}) == ()


def test_follow_nodes_succeeds_waits_then_fails_at_the_deadline() -> None:
    op = operation(status={"phase": "Running", "startedAt": "2026-12-03T07:50:00Z"})
    behind = ("Node cp-2 reports Talos v1.14.3",)
    assert lifecycle.follow_nodes(
        op, (), job_name="j", finished_at=NOW, now=LATER, deadline=60
    ).done
    waiting = lifecycle.follow_nodes(
        op, behind, job_name="j", finished_at=NOW, now=NOW, deadline=600
    )
    assert (waiting.done, waiting.failed) == (False, False)
    assert "Job j succeeded; waiting until every Node reports v1.14.4" in waiting.message
    assert "Node cp-2 reports Talos v1.14.3" in waiting.message
    assert "2026-12-03T08:10:00+00:00" in waiting.message
    failed = lifecycle.follow_nodes(
        op, behind, job_name="j", finished_at=NOW, now=LATER, deadline=300
    )
    assert (failed.done, failed.failed) == (False, True)
    assert "300 s later Node cp-2 reports Talos v1.14.3" in failed.message
    assert "the TalosCluster spec is unchanged" in failed.message
    # without the Job's completion time the deadline counts from the operation's start
    unknown = lifecycle.follow_nodes(
        op, behind, job_name="j", finished_at=None, now=NOW, deadline=300
    )
    assert unknown.failed


def test_job_finished_at_reads_the_completion_time_or_the_condition() -> None:
    done = {"status": {"completionTime": "2026-12-03T08:00:00Z"}}
    assert lifecycle.job_finished_at(done) == NOW
    by_condition = {
        "status": {
            "conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-03T08:05:00Z"}
            ]
        }
    }
    assert lifecycle.job_finished_at(by_condition) == LATER
    assert lifecycle.job_finished_at({"status": {"completionTime": "yesterday"}}) is None
    assert lifecycle.job_finished_at({}) is None


@pytest.mark.parametrize(
    ("observed", "rule", "words"),
    [
        ("v1.37.2", Rule.CILIUM_KUBERNETES, "a newer Ichor release is needed"),
        (table.unknown_kubernetes(), Rule.UNKNOWN_VERSION, "no override passes"),
    ],
    ids=["chart-does-not-run-the-observed-kubernetes", "observed-kubernetes-unknown"],
)
def test_a_cni_operation_is_judged_against_the_kubernetes_the_nodes_run(
    observed: str, rule: Rule, words: str
) -> None:
    """Spec Kubernetes v1.36.2 (chart 1.20.4 runs it), Nodes on another: the chart must
    run what really runs, as a talos or kubernetes operation's step must."""
    op = operation(type_="cni", version=None, override=True)
    state = cluster(kubernetes="v1.36.2", observed={"kubernetesVersion": observed}, cni=CILIUM_119)
    assert lifecycle.check_execution(op, cluster(kubernetes="v1.36.2", cni=CILIUM_119)) is None
    verdict = lifecycle.judge_execution(op, state)
    assert verdict.refusal is not None
    assert verdict.refusal.rule is rule, verdict
    assert words in verdict.refusal.message
    assert lifecycle.decide(verdict, override=False).runs is False
    assert lifecycle.decide(verdict, override=True).runs is verdict.refusal.overridable


def test_the_override_record_names_every_refusal_it_passed() -> None:
    """Kubernetes v1.31.5 to v1.32.0 on Talos v1.14.3 and Cilium 1.20.4 under override: the
    Talos pair and the Cilium pair both refuse, and the executor's decision (whose
    ``passing`` is the Accepted condition and the Override Event) names both."""
    op = Operation.from_body(
        {
            "metadata": {
                "name": "up",
                "namespace": "team-a",
                "annotations": {"ichor.dev/override-by": "olivia"},
            },
            "spec": {
                "clusterRef": {"name": "prod"},
                "type": "kubernetes",
                "version": "v1.32.0",
                "override": True,
            },
        }
    )
    state = cluster(kubernetes="v1.31.5", cni={"detected": "cilium", "detectedVersion": "1.20.4"})
    decision = lifecycle.decide_execution(op, state)
    assert decision.runs
    assert [r.rule for r in decision.overridden] == [
        Rule.TALOS_KUBERNETES,
        Rule.CILIUM_KUBERNETES,
    ]
    assert "passing TalosKubernetes" in decision.passing
    assert "passing CiliumKubernetes" in decision.passing
    plain = lifecycle.decide_execution(
        Operation.from_body({**op.body, "metadata": {"name": "up", "namespace": "team-a"}}), state
    )
    assert not plain.runs
    assert plain.refusal is not None
    assert plain.refusal.rule is Rule.TALOS_KUBERNETES


def _created(n: int) -> str:
    moment = datetime(2026, 12, 3, 8, tzinfo=UTC) + timedelta(seconds=n)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _queue(count: int, *, running: int | None = 0) -> list[Operation]:
    """``count`` operations, oldest first; the ``running`` one Running, the others Pending."""
    return [
        operation(
            f"op{n:02d}",
            created=_created(n),
            status={"phase": "Running" if n == running else "Pending"},
        )
        for n in range(count)
    ]


def _messages(order: list[Operation], head: Operation, ended: set[str]) -> dict[str, str]:
    return {
        op.name: lifecycle.waiting_message(op, ahead=ahead, head=ahead is head)
        for op, ahead in lifecycle.waiting_behind(order, head=head, ended=ended)
    }


def test_each_waiting_operation_names_the_one_directly_ahead() -> None:
    order = lifecycle.run_order(_queue(4))
    pairs = lifecycle.waiting_behind(order, head=order[0])
    assert [(op.name, ahead.name) for op, ahead in pairs] == [
        ("op01", "op00"),
        ("op02", "op01"),
        ("op03", "op02"),
    ]
    messages = _messages(order, order[0], set())
    assert "waits for TalosOperation team-a/op00 (talos to v1.14.4, Running)" in messages["op01"]
    # the head alone, or with every other ended: nobody waits
    assert lifecycle.waiting_behind(order[:1], head=order[0]) == []
    assert lifecycle.waiting_behind(order, head=order[0], ended=[o.uid for o in order]) == []
    assert "(talos to v1.14.4, created earlier, waiting too)" in messages["op02"]


@pytest.mark.parametrize("size", [3, 20, 1000])
def test_a_change_of_the_head_changes_one_waiting_message_whatever_the_queue(size: int) -> None:
    # op00 runs and op01..op{size-1} wait; op00 ends and op01 becomes the head, Running
    before = lifecycle.run_order(_queue(size))
    old = _messages(before, before[0], set())
    after_ops = _queue(size, running=1)
    after = lifecycle.run_order(after_ops)
    new = _messages(after, after[1], {after[0].uid})
    changed = {name for name in new if new[name] != old.get(name)}
    assert changed == ({"op02"} if size > 2 else set())
    assert "op01" not in new  # the head itself is written as it starts, not as waiting


def test_a_head_not_yet_started_is_named_so() -> None:
    order = lifecycle.run_order(_queue(3, running=None))
    messages = _messages(order, order[0], set())
    assert "(talos to v1.14.4, created earlier, not yet started)" in messages["op01"]


def test_past_the_queue_only_operations_never_looked_at_are_refused() -> None:
    looked_at = [
        operation(f"w{n}", created=f"2026-12-03T08:0{n}:00Z", status={"phase": "Pending"})
        for n in range(3)
    ]
    fresh = [operation(f"new{n}", created=f"2026-12-03T09:0{n}:00Z") for n in range(3)]
    order = lifecycle.run_order([*fresh, *looked_at])
    assert [op.name for op in lifecycle.past_queue(order, most=4)] == ["new1", "new2"]
    # the most lowered below what already waits: the waiting keep their place
    assert [op.name for op in lifecycle.past_queue(order, most=1)] == ["new0", "new1", "new2"]
    assert lifecycle.past_queue(order, most=6) == []


def test_a_fresh_operation_sorting_first_does_not_push_a_waiting_one_out() -> None:
    # created in the same second as those waiting, its name sorts first: it is the one
    # refused, so the queue never holds more than the most
    waiting = [
        operation(f"b{n}", created="2026-12-03T08:00:00Z", status={"phase": "Pending"})
        for n in range(3)
    ]
    early = operation("a", created="2026-12-03T08:00:00Z")
    order = lifecycle.run_order([*waiting, early])
    assert order[0].name == "a"
    assert [op.name for op in lifecycle.past_queue(order, most=3)] == ["a"]
    assert lifecycle.past_queue(order, most=4) == []


_OVERRIDE_BY = {"ichor.dev/override-by": "root"}


def _admitted(op: Operation) -> Operation:
    """``op`` as the webhook stamps one admitted under ``override: true``."""
    body = dict(op.body)
    body["metadata"] = {**body["metadata"], "annotations": _OVERRIDE_BY}
    return Operation.from_body(body)


@pytest.mark.parametrize(
    "op",
    [
        operation(type_="kubernetes", version="v1.36.7", override=True),
        operation(type_="kubernetes", version="v1.37.2", override=True),
        operation(type_="cni", version=None, override=True),
    ],
    ids=["kubernetes-patch", "kubernetes-minor", "cni"],
)
def test_a_cilium_seen_without_a_release_is_refused_at_execution_whatever_the_override(
    op: Operation,
) -> None:
    said = (
        "Cilium is running (DaemonSet kube-system/cilium) but its release cannot be read: "
        "the image is pinned by digest only and no deployed Helm release names its chart"
    )
    state = cluster(cni={"detected": "cilium", "unreadable": said})
    decision = lifecycle.decide_execution(_admitted(op), state)
    assert decision.refusal is not None
    assert decision.refusal.rule is Rule.UNREADABLE_VERSION
    assert said in decision.refusal.message
    assert not decision.runs
    message = lifecycle.refusal_message(decision.refusal, override=True, flag=True)
    assert message.startswith("Refused at execution (UnreadableVersion): ")
    # A Talos step does not judge Cilium: it runs.
    assert lifecycle.decide_execution(_admitted(operation(override=True)), state).runs


@pytest.mark.parametrize("type_", ["talos", "kubernetes", "cni"])
def test_nodes_whose_versions_cannot_be_read_refuse_every_operation_at_execution(
    type_: str,
) -> None:
    version = {"talos": "v1.14.4", "kubernetes": "v1.36.7", "cni": None}[type_]
    op = _admitted(operation(type_=type_, version=version, override=True))
    nodes = {"count": 2, "unreadable": ['Node n2 runs osImage "Ubuntu", not "Talos (vX.Y.Z)"']}
    state = cluster(observed={"nodes": nodes}, cni=CILIUM_119)
    decision = lifecycle.decide_execution(op, state)
    assert decision.refusal is not None
    assert decision.refusal.rule is Rule.UNREADABLE_VERSION
    assert decision.refusal.message.startswith(f"TalosOperation team-a/op ({op.what}) is refused: ")
    assert 'Node n2 runs osImage "Ubuntu"' in decision.refusal.message
    assert not decision.runs
    # The same Nodes, all read: it runs.
    readable = cluster(observed={"nodes": {"count": 2}}, cni=CILIUM_119)
    assert lifecycle.decide_execution(op, readable).runs


UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/3 nodes are available:\n  3 Insufficient cpu.",
}
PULLING = {
    "name": "upgrade-000",
    "state": {"waiting": {"reason": "ErrImagePull", "message": "not  found"}},
}


def test_unschedulable_says_the_schedulers_words_on_one_line() -> None:
    found = lifecycle._unschedulable({"status": {"conditions": [UNSCHEDULABLE]}})
    assert found == "its Pod cannot be scheduled: 0/3 nodes are available: 3 Insufficient cpu."
    quiet = {**UNSCHEDULABLE, "message": ""}
    assert lifecycle._unschedulable({"status": {"conditions": [quiet]}}) == (
        "its Pod cannot be scheduled"
    )
    scheduled = {**UNSCHEDULABLE, "status": "True"}
    assert lifecycle._unschedulable({"status": {"conditions": [scheduled, "junk"]}}) is None


def test_cannot_start_names_the_container_and_the_kubelets_reason() -> None:
    assert lifecycle._cannot_start(pod(PULLING)) == (
        "container upgrade-000 cannot start (ErrImagePull): not found"
    )
    creating = {"name": "x", "state": {"waiting": {"reason": "ContainerCreating"}}}
    assert lifecycle._cannot_start(pod(creating)) is None


def test_stuck_says_unschedulable_first_then_a_container_of_the_first_stuck_pod() -> None:
    both = {**pod(PULLING), "status": {**pod(PULLING)["status"], "conditions": [UNSCHEDULABLE]}}
    assert lifecycle._stuck([both]) == lifecycle._unschedulable(both)
    assert lifecycle._stuck([pod(), pod(PULLING)]) == lifecycle._cannot_start(pod(PULLING))
    assert lifecycle._stuck([pod()]) is None
