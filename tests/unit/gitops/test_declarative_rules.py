"""The target rule for a Declarative cluster: the webhook's plan and the executor judge
the step from what the Nodes run (the spec already holds the target), and nothing a user
writes moves that baseline: the spec is the desired state, the status the operator's."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.api.talosoperation import OperationType
from ichor.controller.talosoperation import lifecycle
from ichor.controller.talosoperation.lifecycle import ClusterState, Operation
from ichor.release.refusals import Rule
from ichor.webhook import decisions
from ichor.webhook.reviews import ClusterObject, OperationSpec, cluster_versions


def stored(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "team-a", "name": "prod"},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.7",
            "versionContract": "v1.14",
            "upgradeStrategy": "Declarative",
            **spec,
        },
        "status": {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6"},
    }


def op_spec(version: str, type_: OperationType = OperationType.KUBERNETES) -> OperationSpec:
    return OperationSpec(
        namespace="team-a",
        name="d",
        cluster="prod",
        type=type_,
        version=version,
        override=False,
        cni_image_version=None,
    )


def plan(body: dict[str, Any], version: str) -> Any:
    return decisions.review_operation(spec=op_spec(version), cluster=cluster_versions(body))


def test_a_declarative_cluster_is_judged_from_what_the_nodes_run() -> None:
    verdict = plan(stored(), "v1.36.7")
    assert verdict.blocking is None
    assert verdict.overridable == ()
    # the same object in the Operations mode: the target is the spec's, so not newer
    operations = plan(stored(upgradeStrategy="Operations"), "v1.36.7")
    assert operations.blocking is not None
    assert operations.blocking.rule is Rule.NOT_NEWER


def test_the_rule_still_refuses_a_skew_from_what_runs() -> None:
    verdict = plan(stored(kubernetesVersion="v1.38.0"), "v1.38.0")
    refusal = verdict.blocking or (verdict.overridable[0] if verdict.overridable else None)
    assert refusal is not None
    assert refusal.rule is Rule.KUBERNETES_SKEW


@pytest.mark.parametrize(
    "status",
    [
        {},
        {"talosVersion": 5, "kubernetesVersion": ["v1.36.6"]},
        {"talosVersion": "banana", "kubernetesVersion": "v1..6"},
    ],
)
def test_an_unread_or_unreadable_status_falls_back_to_the_spec(status: Any) -> None:
    body = stored() | {"status": status}
    found = cluster_versions(body)
    assert found.declarative
    # judged as in the Operations mode: the target is not newer than the spec's
    verdict = plan(body, "v1.36.7")
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.NOT_NEWER


@pytest.mark.parametrize("value", ["declarative", "DECLARATIVE", " Declarative", True, 1, None])
def test_only_the_exact_value_is_the_declarative_mode(value: Any) -> None:
    body = stored(upgradeStrategy=value)
    assert cluster_versions(body).declarative is False
    assert lifecycle.declarative(body) is False


def test_a_garbage_status_does_not_change_a_cluster_review() -> None:
    """The observed versions are read leniently: a cluster write is judged as before."""
    body = stored() | {"status": {"talosVersion": {"x": 1}, "kubernetesVersion": 7}}
    found = cluster_versions(body)
    assert isinstance(found, ClusterObject)
    assert (found.observed_talos, found.observed_kubernetes) == (None, None)


def _operation(version: str) -> Operation:
    return Operation.from_body(
        {
            "metadata": {
                "name": "d",
                "namespace": "team-a",
                "uid": "u",
                "generation": 1,
                "resourceVersion": "1",
                "creationTimestamp": "2026-12-03T07:00:00Z",
            },
            "spec": {"clusterRef": {"name": "prod"}, "type": "kubernetes", "version": version},
        }
    )


def test_the_executor_judges_a_declarative_cluster_from_the_nodes_too() -> None:
    cluster = ClusterState.from_body(stored())
    assert cluster.declarative
    assert lifecycle.check_execution(_operation("v1.36.7"), cluster) is None
    operations = ClusterState.from_body(stored(upgradeStrategy="Operations"))
    refused = lifecycle.check_execution(_operation("v1.36.7"), operations)
    assert refused is not None
    assert refused.rule is Rule.NOT_NEWER
    skew = ClusterState.from_body(stored(kubernetesVersion="v1.38.0"))
    verdict = lifecycle.judge_execution(_operation("v1.38.0"), skew)
    found = verdict.refusal or (verdict.overridable[0] if verdict.overridable else None)
    assert found is not None
    assert found.rule is Rule.KUBERNETES_SKEW


def test_a_declarative_cluster_is_never_written_by_the_executor() -> None:
    assert lifecycle.declarative(stored())
    assert not lifecycle.declarative(stored(upgradeStrategy="Operations"))
    assert not lifecycle.declarative({"spec": "Declarative"})
    assert not lifecycle.declarative({})


@pytest.mark.parametrize(
    ("spec_field", "target"),
    [("talosVersion", "v1.14.4"), ("kubernetesVersion", "v1.36.8"), ("talosVersion", "v1.15.0")],
)
def test_an_operation_newer_than_a_declarative_spec_never_writes_it(
    spec_field: str, target: str
) -> None:
    """A hand-made operation (or a holder's override) that moves the Nodes past the spec:
    the executor's write after success is none at all; the same in Operations moves the
    spec forward to the target."""
    assert lifecycle.spec_record(stored(), spec_field=spec_field, target=target) is None
    operations = stored(upgradeStrategy="Operations")
    assert lifecycle.spec_record(operations, spec_field=spec_field, target=target) == {
        "spec": {spec_field: target}
    }


def test_the_operations_spec_never_moves_back_nor_to_what_it_holds() -> None:
    operations = stored(upgradeStrategy="Operations")
    for target in ("v1.14.3", "v1.14.2"):
        assert lifecycle.spec_record(operations, spec_field="talosVersion", target=target) is None
