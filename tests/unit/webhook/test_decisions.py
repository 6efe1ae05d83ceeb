"""The webhook's decisions without a server: which rule refuses, and what the user reads."""

from __future__ import annotations

import dataclasses

import pytest

from ichor.api.talosoperation import OperationType
from ichor.release.refusals import Rule
from ichor.webhook import decisions
from ichor.webhook.reviews import (
    ClusterObject,
    NamespacedName,
    OperationSpec,
    Requester,
    StoredOperation,
    stored_operation,
)
from tests.support import table

REF = NamespacedName("team-a", "prod")
ALICE = Requester(username="alice", groups=("ops",))


def cluster(
    talos: str = "v1.14.3",
    kubernetes: str = "v1.36.6",
    contract: str = "v1.14",
    *,
    cilium: str | None = None,
    cni: str = "cilium",
) -> ClusterObject:
    return ClusterObject(
        ref=REF,
        talos=talos,
        kubernetes=kubernetes,
        contract=contract,
        detected_cni=cni if cilium is not None else None,
        detected_cni_version=cilium,
    )


def operation(
    kind: str, version: str | None, *, override: bool = False, image: str | None = None
) -> OperationSpec:
    return OperationSpec(
        namespace="team-a",
        name="up",
        cluster="prod",
        type=OperationType(kind),
        version=version,
        override=override,
        cni_image_version=image,
    )


@pytest.mark.parametrize(
    ("new", "old", "rule", "overridable", "words"),
    [
        (cluster(kubernetes="v1.31.9"), None, Rule.TALOS_KUBERNETES, True, "1.33 to 1.37"),
        (cluster(kubernetes="v1.32.0"), None, Rule.TALOS_KUBERNETES, True, "1.33 to 1.37"),
        (
            cluster(kubernetes="v1.32.0"),
            cluster(kubernetes="v1.36.6"),
            Rule.DOWNGRADE,
            False,
            "no downgrade",
        ),
        (cluster(talos="v1.14.2"), cluster(), Rule.DOWNGRADE, False, "older than v1.14.3"),
        (cluster(contract="v1.13"), cluster(), Rule.DOWNGRADE, False, "versionContract"),
        (
            cluster(talos=table.unknown_talos()),
            None,
            Rule.UNKNOWN_VERSION,
            False,
            f"Talos {table.KNOWN_TALOS}",
        ),
        (
            cluster(talos=table.unknown_talos()),
            cluster(),
            Rule.UNKNOWN_VERSION,
            False,
            "newer Ichor",
        ),
        (cluster(kubernetes="1.36.6"), None, Rule.FORM, False, "vX.Y.Z"),
        (cluster(talos="v1.14"), None, Rule.FORM, False, "spec.talosVersion"),
        (cluster(contract="1.14"), None, Rule.FORM, False, "vX.Y"),
        (
            cluster(kubernetes="v1.36.6", cilium="1.19.10"),
            cluster(kubernetes="v1.35.4", cilium="1.19.10"),
            Rule.CILIUM_KUBERNETES,
            True,
            "upgrade Cilium to 1.20.4 first",
        ),
        (
            cluster(kubernetes="v1.37.1", cilium="1.20.4"),
            cluster(kubernetes="v1.36.6", cilium="1.20.4"),
            Rule.CILIUM_KUBERNETES,
            True,
            "a newer Ichor release is needed",
        ),
    ],
    ids=[
        "k8s-1.31.9-with-talos-1.14",
        "k8s-1.32.0-with-talos-1.14",
        "kubernetes-downgrade",
        "talos-downgrade",
        "contract-downgrade",
        "unknown-talos-create",
        "unknown-talos-update",
        "kubernetes-without-v",
        "talos-short-form",
        "contract-without-v",
        "cilium-order-names-the-step",
        "cilium-chart-too-old-needs-newer-ichor",
    ],
)
def test_a_cluster_write_is_refused_by_the_rule_that_matters(
    new: ClusterObject,
    old: ClusterObject | None,
    rule: Rule,
    overridable: bool,
    words: str,
) -> None:
    verdict = decisions.review_cluster(new=new, old=old)
    refusal = verdict.blocking if not overridable else verdict.overridable[0]
    assert refusal is not None
    assert refusal.rule is rule
    assert refusal.overridable is overridable
    assert words in refusal.message


@pytest.mark.parametrize(
    ("new", "old"),
    [
        (cluster(), None),
        (cluster(kubernetes="v1.36.7"), cluster()),
        (cluster(talos="v1.14.4", contract="v1.14"), cluster()),
        # An incompatible pair that is not touched never blocks other edits.
        (cluster(kubernetes="v1.31.9"), cluster(kubernetes="v1.31.9")),
        # The Cilium half is skipped for another CNI.
        (
            cluster(kubernetes="v1.37.1", cilium="0.28.9", cni="flannel"),
            cluster(kubernetes="v1.36.6", cilium="0.28.9", cni="flannel"),
        ),
        # A stored value written before the webhook ran does not block an unrelated edit.
        (cluster(talos="1.14.3"), cluster(talos="1.14.3")),
    ],
    ids=[
        "compatible-create",
        "kubernetes-patch",
        "talos-patch",
        "untouched-incompatible-pair",
        "flannel-skips-cilium",
        "unchanged-malformed-value",
    ],
)
def test_a_compatible_or_untouched_write_is_clean(
    new: ClusterObject, old: ClusterObject | None
) -> None:
    assert decisions.review_cluster(new=new, old=old).clean


def test_no_path_check_on_a_cluster_write() -> None:
    """Talos 1.11 -> 1.14 is refused by the plan (path) but not by a TalosCluster write."""
    old = cluster(talos="v1.11.5", kubernetes="v1.33.4", contract="v1.11")
    assert decisions.review_cluster(new=cluster(kubernetes="v1.33.4"), old=old).clean


@pytest.mark.parametrize(
    ("holds", "allowed"),
    [(True, True), (False, False)],
    ids=["holder-passes", "non-holder-refused"],
)
def test_an_overridable_cluster_refusal_passes_only_for_the_holder(
    holds: bool, allowed: bool
) -> None:
    verdict = decisions.review_cluster(new=cluster(kubernetes="v1.31.9"), old=None)
    assert decisions.needs_access_review(verdict, override_requested=True)
    answer = decisions.answer_cluster(
        verdict, requester=ALICE, cluster=REF, holds_verb=holds, operation="CREATE"
    )
    assert answer.allowed is allowed
    if allowed:
        assert answer.warnings
        assert "override by alice" in answer.warnings[0]
        assert all(len(w) <= decisions.WARNING_LIMIT for w in answer.warnings)
        assert answer.record is not None
        assert "alice" in answer.record
        assert "v1.31.9" in answer.record
    else:
        assert answer.record is None
        assert not answer.warnings
        assert "`override` on `talosclusters` in API group `ichor.dev`" in answer.message
        assert "team-a/prod" in answer.message
        assert "'alice'" in answer.message
        assert answer.code == 403


def test_an_unknown_version_is_refused_even_for_the_holder() -> None:
    verdict = decisions.review_cluster(new=cluster(talos=table.unknown_talos()), old=None)
    assert not decisions.needs_access_review(verdict, override_requested=True)
    answer = decisions.answer_cluster(
        verdict, requester=ALICE, cluster=REF, holds_verb=True, operation="CREATE"
    )
    assert not answer.allowed
    assert answer.record is None
    assert "no override passes" in answer.message


RUNNING = cluster(talos="v1.13.2", kubernetes="v1.35.4", contract="v1.13", cilium="1.19.10")


@pytest.mark.parametrize(
    ("spec", "rule", "overridable", "words"),
    [
        (operation("talos", "v1.14.0-rc.1"), Rule.FINAL, False, "final release"),
        (operation("talos", "v1.13.1"), Rule.NOT_NEWER, False, "newer than v1.13.2"),
        (operation("talos", "v1.13.2"), Rule.NOT_NEWER, False, "newer than v1.13.2"),
        (operation("talos", table.unknown_talos()), Rule.UNKNOWN_VERSION, False, "newer Ichor"),
        (operation("kubernetes", "v1.37.1"), Rule.KUBERNETES_SKEW, False, "one minor"),
        (operation("kubernetes", "v1.36.2"), Rule.CILIUM_KUBERNETES, True, "Cilium to 1.20.4"),
        (operation("talos", None), Rule.FORM, False, "spec.version"),
        (operation("cni", "v1.20.5"), Rule.CNI_VERSION, False, "ichor cni upgrade"),
        (operation("cni", None, image="1.20.5"), Rule.CNI_VERSION, False, "delete it"),
    ],
    ids=[
        "pre-release-target",
        "older-target",
        "same-target",
        "unknown-talos",
        "kubernetes-two-minors",
        "cilium-order",
        "no-version",
        "cni-with-version",
        "cni-with-image-version",
    ],
)
def test_the_plan_refuses_by_the_target_rule(
    spec: OperationSpec, rule: Rule, overridable: bool, words: str
) -> None:
    verdict = decisions.review_operation(spec=spec, cluster=RUNNING)
    refusal = verdict.blocking if not overridable else verdict.overridable[0]
    assert refusal is not None
    assert (refusal.rule, refusal.overridable) == (rule, overridable)
    assert words in refusal.message


@pytest.mark.parametrize(
    ("running", "spec", "rule"),
    [
        (
            cluster(talos="v1.11.5", kubernetes="v1.31.4", contract="v1.11"),
            operation("talos", "v1.14.3"),
            Rule.TALOS_PATH,
        ),
        (
            cluster(talos="v1.13.2", kubernetes="v1.32.4", contract="v1.13"),
            operation("talos", "v1.14.3"),
            Rule.TALOS_KUBERNETES,
        ),
    ],
    ids=["talos-path-too-old", "talos-target-pairing"],
)
def test_the_plan_applies_path_and_pairing(
    running: ClusterObject, spec: OperationSpec, rule: Rule
) -> None:
    verdict = decisions.review_operation(spec=spec, cluster=running)
    refusals = [verdict.blocking, *verdict.overridable]
    assert rule in {r.rule for r in refusals if r is not None}


@pytest.mark.parametrize(
    "spec",
    [operation("talos", "v1.14.3"), operation("kubernetes", "v1.35.9"), operation("cni", None)],
    ids=["talos-next-minor", "kubernetes-patch", "cni-to-the-chart"],
)
def test_a_valid_target_is_accepted_without_warning(spec: OperationSpec) -> None:
    verdict = decisions.review_operation(spec=spec, cluster=RUNNING)
    answer = decisions.answer_operation(verdict, spec=spec, requester=ALICE, holds_verb=None)
    assert answer.allowed
    assert not answer.warnings
    assert answer.record is None


@pytest.mark.parametrize(
    ("override", "holds", "allowed", "words"),
    [
        (False, None, False, "Setting `override: true` on the TalosOperation would pass"),
        (False, True, False, "Setting `override: true`"),
        (True, False, False, "does not hold the RBAC verb `override` on `talosclusters`"),
        (True, True, True, ""),
    ],
    ids=["no-override", "no-override-even-for-holder", "override-without-verb", "override"],
)
def test_an_operation_override_needs_the_flag_and_the_verb(
    override: bool, holds: bool | None, allowed: bool, words: str
) -> None:
    spec = operation("kubernetes", "v1.36.2", override=override)
    verdict = decisions.review_operation(spec=spec, cluster=RUNNING)
    assert decisions.needs_access_review(verdict, override_requested=override) is override
    answer = decisions.answer_operation(verdict, spec=spec, requester=ALICE, holds_verb=holds)
    assert answer.allowed is allowed
    assert words in answer.message
    if allowed:
        assert answer.warnings
        assert answer.record
        assert "TalosOperation team-a/up" in answer.record


def test_override_true_does_not_pass_a_rule_that_is_never_overridable() -> None:
    spec = operation("talos", table.unknown_talos(), override=True)
    verdict = decisions.review_operation(spec=spec, cluster=RUNNING)
    answer = decisions.answer_operation(verdict, spec=spec, requester=ALICE, holds_verb=True)
    assert not answer.allowed
    assert "never overridable" in answer.message


def test_a_missing_cluster_is_named() -> None:
    answer = decisions.missing_cluster(operation("talos", "v1.14.3"))
    assert not answer.allowed
    assert "TalosCluster team-a/prod does not exist" in answer.message


def test_an_unknown_cilium_behind_a_pair_refusal_is_refused_for_the_holder() -> None:
    """The update an admin would pass: the pair is overridable, an unknown Cilium is not."""
    old = cluster(kubernetes="v1.31.5", cilium=table.unknown_cilium())
    new = cluster(kubernetes="v1.32.0", cilium=table.unknown_cilium())
    verdict = decisions.review_cluster(new=new, old=old)
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.UNKNOWN_VERSION
    assert [r.rule for r in verdict.overridable] == [Rule.TALOS_KUBERNETES]
    answer = decisions.answer_cluster(
        verdict, requester=ALICE, cluster=REF, holds_verb=True, operation="UPDATE"
    )
    assert not answer.allowed
    assert answer.record is None
    assert f"Cilium {table.unknown_cilium()} is refused" in answer.message


def test_an_unknown_cilium_behind_a_pair_refusal_is_refused_in_the_plan_under_override() -> None:
    running = cluster(kubernetes="v1.31.5", cilium=table.unknown_cilium())
    spec = operation("kubernetes", "v1.32.0", override=True)
    verdict = decisions.review_operation(spec=spec, cluster=running)
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.UNKNOWN_VERSION
    assert not decisions.needs_access_review(verdict, override_requested=True)
    answer = decisions.answer_operation(verdict, spec=spec, requester=ALICE, holds_verb=True)
    assert not answer.allowed
    assert answer.record is None
    assert "never overridable" in answer.message


def _unmanaged(base: ClusterObject) -> ClusterObject:
    return dataclasses.replace(base, cni_preset="unmanaged")


def test_an_unmanaged_cni_is_not_held_to_the_cilium_table_even_when_cilium_is_detected() -> None:
    """spec.cni.preset unmanaged: the user runs their own Cilium, Ichor judges only the pair."""
    old = _unmanaged(cluster(kubernetes="v1.36.6", cilium="1.20.4"))
    new = _unmanaged(cluster(kubernetes="v1.37.1", cilium="1.20.4"))
    assert decisions.review_cluster(new=new, old=old).clean
    managed = decisions.review_cluster(
        new=cluster(kubernetes="v1.37.1", cilium="1.20.4"),
        old=cluster(kubernetes="v1.36.6", cilium="1.20.4"),
    )
    assert managed.overridable[0].rule is Rule.CILIUM_KUBERNETES


@pytest.mark.parametrize(
    ("running", "words"),
    [
        (_unmanaged(cluster(cilium="1.19.10")), "spec.cni.preset is unmanaged"),
        (cluster(cilium="0.26.4", cni="flannel"), "runs flannel, not Cilium"),
    ],
    ids=["unmanaged-preset", "observed-flannel"],
)
def test_a_cni_operation_is_refused_when_ichor_does_not_run_the_clusters_cilium(
    running: ClusterObject, words: str
) -> None:
    verdict = decisions.review_operation(
        spec=operation("cni", None, override=True), cluster=running
    )
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.NOT_CILIUM
    assert words in verdict.blocking.message
    assert "ichor cni upgrade" in verdict.blocking.message


def test_the_plan_of_an_unmanaged_cni_is_bounded_by_the_talos_pair_alone() -> None:
    running = _unmanaged(cluster(kubernetes="v1.36.6", cilium="1.20.4"))
    verdict = decisions.review_operation(spec=operation("kubernetes", "v1.37.1"), cluster=running)
    assert verdict.clean


@pytest.mark.parametrize(
    ("holds", "allowed"), [(False, False), (True, True)], ids=["plain", "holder"]
)
def test_override_on_a_clean_plan_asks_for_the_verb(holds: bool, allowed: bool) -> None:
    spec = operation("talos", "v1.14.3", override=True)
    verdict = decisions.review_operation(spec=spec, cluster=RUNNING)
    assert verdict.clean
    assert decisions.needs_access_review(verdict, override_requested=True)
    answer = decisions.answer_operation(verdict, spec=spec, requester=ALICE, holds_verb=holds)
    assert answer.allowed is allowed
    if allowed:
        assert answer.warnings
        assert "refuses nothing now" in answer.warnings[0]
        assert answer.record is not None
        assert "refused nothing at creation" in answer.record
    else:
        assert "remove `override: true`" in answer.message
        assert answer.record is None


def test_a_clean_plan_without_override_asks_nothing() -> None:
    spec = operation("talos", "v1.14.3")
    verdict = decisions.review_operation(spec=spec, cluster=RUNNING)
    assert not decisions.needs_access_review(verdict, override_requested=spec.override)


def stored(
    version: str = "v1.37.1",
    *,
    kind: str = "kubernetes",
    override: bool = True,
    succeeded: bool = True,
    cluster_name: str = "prod",
    override_by: str | None = "olivia",
) -> StoredOperation:
    return StoredOperation(
        name="k8s",
        cluster=cluster_name,
        type=OperationType(kind),
        version=version,
        override=override,
        job_succeeded=succeeded,
        override_by=override_by,
    )


OLD = cluster(kubernetes="v1.36.6", cilium="1.20.4")
NEW = cluster(kubernetes="v1.37.1", cilium="1.20.4")


def test_the_operators_write_carries_the_override_of_its_succeeded_operation() -> None:
    carried = decisions.carried_override(new=NEW, old=OLD, operations=[stored()])
    assert carried == stored()
    verdict = decisions.review_cluster(new=NEW, old=OLD)
    operator = Requester("system:serviceaccount:ichor-system:ichor")
    answer = decisions.answer_cluster(
        verdict, requester=operator, cluster=REF, holds_verb=None, operation="UPDATE",
        carried=carried,
    )  # fmt: skip
    assert answer.allowed
    assert answer.record is not None
    assert "under the override of TalosOperation team-a/k8s" in answer.record
    assert "(update)" in answer.record


@pytest.mark.parametrize(
    ("operations", "new"),
    [
        ([], NEW),
        ([stored(override=False)], NEW),
        ([stored(override_by=None)], NEW),
        ([stored(succeeded=False)], NEW),
        ([stored(cluster_name="other")], NEW),
        ([stored("v1.37.2")], NEW),
        ([stored("v1.37.1", kind="talos")], NEW),
        ([stored()], cluster(talos="v1.14.4", kubernetes="v1.37.1", cilium="1.20.4")),
        ([stored()], cluster(kubernetes="v1.37.1", contract="v1.13", cilium="1.20.4")),
    ],
    ids=[
        "no-operation",
        "no-override",
        "no-stamp-of-the-webhook",
        "job-not-succeeded",
        "another-cluster",
        "another-target",
        "another-component",
        "moves-two-fields",
        "moves-the-contract",
    ],
)
def test_nothing_else_carries_an_override(
    operations: list[StoredOperation], new: ClusterObject
) -> None:
    assert decisions.carried_override(new=new, old=OLD, operations=operations) is None


def test_the_stored_operation_is_read_from_its_status_never_guessed() -> None:
    body = {
        "metadata": {"name": "k8s", "namespace": "team-a"},
        "spec": {"clusterRef": {"name": "prod"}, "type": "kubernetes", "version": "v1.37.1",
                 "override": True},
        "status": {"phase": "Running", "conditions": [
            {"type": "Complete", "status": "False", "reason": "SpecUpdating"}]},
    }  # fmt: skip
    found = stored_operation(body)
    assert found is not None
    assert found.job_succeeded
    body["status"] = {"phase": "Running", "conditions": [
        {"type": "Complete", "status": "False", "reason": "JobRunning"}]}  # fmt: skip
    running = stored_operation(body)
    assert running is not None
    assert not running.job_succeeded
    body["status"] = {"phase": "Succeeded"}
    done = stored_operation(body)
    assert done is not None
    assert done.job_succeeded
    assert stored_operation({"spec": "garbage"}) is None
    assert stored_operation(None) is None
