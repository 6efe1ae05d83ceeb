"""The named steps of ``review_cluster`` and of the answers (``ichor.webhook.decisions``),
each on its own: a change to one step fails the test that names it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ichor.api import records
from ichor.release import steps
from ichor.release.policy import NO_POLICY, SitePolicy
from ichor.release.refusals import Refusal, Rule, Verdict, refuse
from ichor.webhook import decisions
from ichor.webhook.decisions import _Moved
from ichor.webhook.reviews import ClusterObject, NamespacedName

REF = NamespacedName("team-a", "prod")
BOTH = _Moved(talos=True, kubernetes=True)
NONE = _Moved(talos=False, kubernetes=False)


def cluster(
    talos: str = "v1.14.3",
    kubernetes: str = "v1.36.6",
    *,
    preset: str = "cilium",
    cilium: str | None = None,
) -> ClusterObject:
    return ClusterObject(
        ref=REF,
        talos=talos,
        kubernetes=kubernetes,
        contract="v1.14",
        cni_preset=preset,
        detected_cni="cilium" if cilium is not None else None,
        detected_cni_version=cilium,
    )


def rules_of(answers: Any) -> list[Rule]:
    found: list[Rule] = []
    for answer in answers:
        refusals = answer.refusals if isinstance(answer, Verdict) else (answer,)
        found += [r.rule for r in refusals if r is not None]
    return found


def test__downgrade_refuses_a_version_moved_back_on_an_update_only() -> None:
    assert decisions._downgrade(cluster("v1.14.2"), old=None) is None
    back = decisions._downgrade(cluster("v1.14.2"), old=cluster("v1.14.3"))
    assert isinstance(back, Refusal)
    assert back.rule is Rule.DOWNGRADE
    assert decisions._downgrade(cluster("v1.14.4"), old=cluster("v1.14.3")) is None
    # an old value the rules cannot read is being replaced: nothing to compare it with
    assert decisions._downgrade(cluster("v1.14.2"), old=cluster("garbage")) is None


def test__write_cilium_holds_the_table_when_managed_before_or_after() -> None:
    unmanaged = cluster(preset="unmanaged", cilium="1.20.4")
    assert decisions._write_cilium(unmanaged, old=None) is None
    assert decisions._write_cilium(unmanaged, old=unmanaged) is None
    assert decisions._write_cilium(unmanaged, old=cluster(cilium="1.20.4")) == "1.20.4"
    assert decisions._write_cilium(cluster(cilium="1.20.4"), old=unmanaged) == "1.20.4"


def test__version_step_judges_what_moved() -> None:
    new = cluster(kubernetes="v1.30.0")
    pair = decisions._version_step(new, cilium=None, moved=_Moved(talos=True, kubernetes=False))
    assert isinstance(pair, Refusal)
    assert pair.rule is Rule.TALOS_KUBERNETES
    assert decisions._version_step(new, cilium=None, moved=NONE) is None
    step = decisions._version_step(
        cluster(kubernetes="v1.37.2"), cilium="1.10.0", moved=_Moved(talos=False, kubernetes=True)
    )
    assert rules_of([step]) == [Rule.UNKNOWN_VERSION]  # the Cilium behind the step


def test__preset_step_judges_an_update_with_the_kubernetes_not_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[dict[str, Any]] = []

    def recorded(**given: Any) -> Verdict:
        asked.append(given)
        return Verdict()

    monkeypatch.setattr(steps, "cni_preset_step", recorded)
    new, old = cluster(preset="unmanaged", cilium="1.20.4"), cluster(cilium="1.20.4")
    assert decisions._preset_step(new, old=None, moved=BOTH) is None
    assert asked == []
    assert decisions._preset_step(new, old=old, moved=BOTH) == Verdict()
    assert decisions._preset_step(new, old=old, moved=NONE) == Verdict()
    assert [(a["old_preset"], a["new_preset"], a["kubernetes"]) for a in asked] == [
        ("cilium", "unmanaged", None),
        ("cilium", "unmanaged", "v1.36.6"),
    ]


def test__table_steps_puts_the_preset_first_and_words_an_unreadable_field_as_form() -> None:
    old = cluster(kubernetes="v1.36.6", cilium="1.20.4")
    flipped = cluster(kubernetes="v1.30.0", preset="unmanaged", cilium="1.20.4")
    answers = decisions._table_steps(flipped, old=old, cilium="1.20.4", moved=BOTH)
    assert len(answers) == 2
    assert isinstance(answers[0], Verdict)  # the preset's step
    assert Rule.TALOS_KUBERNETES in rules_of(answers[1:])
    unreadable = cluster(talos="garbage", kubernetes="v1.36.7")
    (form,) = decisions._table_steps(
        unreadable, old=cluster(talos="garbage"), cilium=None, moved=_Moved(False, True)
    )
    assert isinstance(form, Refusal)
    assert form.rule is Rule.FORM


def test__cluster_rules_ask_the_sites_policy_on_an_update_only() -> None:
    refusing = SitePolicy(unreadable="unreadable for the test")
    new = cluster("v1.14.4")
    created = rules_of(decisions._cluster_rules(new, old=None, policy=refusing))
    assert Rule.SITE_POLICY_UNREADABLE not in created
    updated = rules_of(decisions._cluster_rules(new, old=cluster(), policy=refusing))
    assert Rule.SITE_POLICY_UNREADABLE in updated
    back = rules_of(decisions._cluster_rules(cluster("v1.14.2"), old=cluster(), policy=NO_POLICY))
    assert back[0] is Rule.DOWNGRADE


def test_review_cluster_asks_every_rule_after_a_blocking_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the downgrade blocks; the site's policy after it is still asked, as before the chain
    asked: list[ClusterObject] = []
    site_step = decisions._site_step

    def recorded(new: ClusterObject, **given: Any) -> Verdict:
        asked.append(new)
        return site_step(new, **given)

    monkeypatch.setattr(decisions, "_site_step", recorded)
    refusing = SitePolicy(unreadable="unreadable for the test")
    verdict = decisions.review_cluster(new=cluster("v1.14.2"), old=cluster(), policy=refusing)
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.DOWNGRADE
    assert asked == [cluster("v1.14.2")]
    form = decisions.review_cluster(new=cluster("garbage"), old=cluster(), policy=refusing)
    assert form.blocking is not None
    assert form.blocking.rule is Rule.FORM
    assert len(asked) == 1  # a malformed write meets nothing else


def test__denied_carries_the_refusals_rule_and_the_message() -> None:
    pair = refuse(Rule.TALOS_KUBERNETES, "the pair is refused.")
    denied = decisions._denied(pair, "said", cluster=REF)
    assert (denied.allowed, denied.message, denied.code) == (False, "said", 403)
    assert (denied.reason, denied.cluster, denied.overridable) == ("TalosKubernetes", REF, False)
    assert decisions._denied(pair, "said", cluster=REF, overridable=True).overridable
    assert replace(denied, overridable=True) == decisions._denied(
        pair, "said", cluster=REF, overridable=True
    )


def test__skipped_cilium_says_what_the_rule_would_of_an_unmanaged_cluster() -> None:
    unmanaged = cluster(preset="unmanaged", cilium="1.20.4")
    skipped = decisions._skipped_cilium(unmanaged, kubernetes="v1.37.2")
    assert skipped is not None
    assert skipped.rule is Rule.CILIUM_KUBERNETES
    assert decisions._skipped_cilium(unmanaged, kubernetes="v1.36.7") is None
    assert decisions._skipped_cilium(unmanaged, kubernetes="garbage") is None


def test__admitting_names_the_object_in_the_record_of_the_answer() -> None:
    record = records.Record(kind=records.RecordKind.ADOPTION, user="alice", detail="create")
    named = NamespacedName("team-a", "up")
    answer = decisions._admitting(record, "TalosOperation", named, cluster=REF, warnings=("w",))
    assert (answer.allowed, answer.admitted, answer.cluster, answer.warnings) == (
        True,
        record,
        REF,
        ("w",),
    )
    assert answer.record == records.message(
        record, kind="TalosOperation", namespace="team-a", name="up"
    )
