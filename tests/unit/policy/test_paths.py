"""The site's policy on each path that reads the IchorInstallation: the webhook (a
TalosCluster write, the plan of a TalosOperation, a write of the policy itself), the
executor at execution, and the status the controller computes."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel

from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import ClusterReason as Reason
from ichor.api.conditions import ConditionStatus
from ichor.api.ichorinstallation import Installation
from ichor.api.records import RecordKind
from ichor.cli import views
from ichor.controller.taloscluster.status import policy_tally
from ichor.controller.talosoperation import lifecycle
from ichor.controller.talosoperation.lifecycle import ClusterState
from ichor.release import policy
from ichor.release.refusals import Rule
from ichor.upgrade.rule import Component
from ichor.webhook import intake, judgement, kubeapi
from ichor.webhook.reviews import NamespacedName
from tests.support import table
from tests.unit.controller.test_status_rules import LISTED, condition, run, spec
from tests.unit.operations.test_lifecycle import operation
from tests.unit.webhook.fakes import FakeBackend, stamped, taloscluster, talosoperation, userinfo

POLICY: dict[str, Any] = {
    "deny": [
        {
            "name": "nic",
            "component": "talos",
            "versions": ["v1.14.4"],
            "reason": "NIC regression on the R650s (INC-1234)",
        }
    ],
    "highestMinor": [
        {"name": "k8s", "component": "kubernetes", "minor": "1.36", "reason": "1.37 not validated"}
    ],
}


def installation(raw: object = POLICY, *, generation: int = 3) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "IchorInstallation",
        "metadata": {"name": "ichor", "generation": generation},
        "spec": {"releaseCheck": {"enabled": True}},
    }
    if raw is not None:
        body["spec"]["policy"] = raw
    return body


def backend(**fields: Any) -> FakeBackend:
    fields.setdefault("installation", installation())
    return FakeBackend(**fields)


# --- the webhook: a TalosCluster write ------------------------------------------------------


async def test_a_write_of_a_denied_version_is_refused_for_a_user_without_the_verb() -> None:
    api = backend()
    answer = await judgement.cluster_answer(
        new=taloscluster(talos="v1.14.4"), old=taloscluster(), userinfo=userinfo("mallory"),
        operation="UPDATE", dryrun=False, backend=api,
    )  # fmt: skip
    assert not answer.allowed
    assert "Talos v1.14.4 is refused by this site's policy" in answer.message
    assert "spec.policy.deny entry 'nic'" in answer.message
    assert "NIC regression on the R650s (INC-1234)" in answer.message
    assert "Only a user holding the RBAC verb `override`" in answer.message
    assert [who.username for who, _ in api.reviews] == ["mallory"]
    # without the policy the same write passes
    plain = await judgement.cluster_answer(
        new=taloscluster(talos="v1.14.4"), old=taloscluster(), userinfo=userinfo("mallory"),
        operation="UPDATE", dryrun=False, backend=backend(installation=None),
    )  # fmt: skip
    assert plain.allowed


async def test_a_holder_passes_it_and_the_record_names_the_entry() -> None:
    api = backend(holders={"olivia"})
    old = taloscluster()
    new = await stamped(
        taloscluster(talos="v1.14.4"), old=old, userinfo=userinfo("olivia"),
        operation="UPDATE", backend=api,
    )  # fmt: skip
    answer = await judgement.cluster_answer(
        new=new, old=old, userinfo=userinfo("olivia"), operation="UPDATE", dryrun=False,
        backend=api,
    )  # fmt: skip
    assert answer.allowed
    assert answer.admitted is not None
    assert answer.admitted.kind is RecordKind.OVERRIDE
    assert [p.rule for p in answer.admitted.passed] == [Rule.SITE_POLICY.value]
    assert answer.record is not None
    assert "spec.policy.deny entry 'nic'" in answer.record
    assert answer.record.startswith("User olivia overrode a refusal of TalosCluster team-a/prod")
    assert any(w.startswith("override by olivia (SitePolicy)") for w in answer.warnings)


async def test_a_write_that_moves_no_version_does_not_read_the_policy() -> None:
    api = backend(installation=installation({"deny": "unreadable"}))
    body = taloscluster(talos="v1.14.4")
    answer = await judgement.cluster_answer(
        new=body, old=copy.deepcopy(body), userinfo=userinfo(), operation="UPDATE",
        dryrun=False, backend=api,
    )  # fmt: skip
    assert answer.allowed
    assert api.installation_reads == 0


async def test_a_create_is_warned_not_refused() -> None:
    """``ichor init`` writes the release set and ``ichor adopt`` what runs: a create is no
    step, so it is told what the site refuses; every later move is judged."""
    api = backend()
    answer = await judgement.cluster_answer(
        new=taloscluster(talos="v1.14.4", kubernetes="v1.37.1"), old=None,
        userinfo=userinfo("mallory"), operation="CREATE", dryrun=False, backend=api,
    )  # fmt: skip
    assert answer.allowed
    assert answer.admitted is None
    said = [w for w in answer.warnings if w.startswith("created as it is, though this site's")]
    assert len(said) == 2
    assert "entry 'nic'" in said[0]
    assert "entry 'k8s'" in said[1]


async def test_an_unknown_version_is_refused_for_a_holder_whatever_the_policy() -> None:
    for raw in (POLICY, None, {"deny": "unreadable"}):
        api = backend(installation=installation(raw), holders={"olivia"})
        answer = await judgement.cluster_answer(
            new=taloscluster(talos=table.unknown_talos()), old=taloscluster(),
            userinfo=userinfo("olivia"), operation="UPDATE", dryrun=False, backend=api,
        )  # fmt: skip
        assert not answer.allowed
        assert "no override passes" in answer.message


async def test_a_policy_that_cannot_be_read_refuses_every_move_even_for_a_holder() -> None:
    api = backend(installation=installation({"deny": "unreadable"}), holders={"olivia"})
    answer = await judgement.cluster_answer(
        new=taloscluster(talos="v1.14.5"), old=taloscluster(), userinfo=userinfo("olivia"),
        operation="UPDATE", dryrun=False, backend=api,
    )  # fmt: skip
    assert not answer.allowed
    assert "this site's policy (IchorInstallation ichor, spec.policy) cannot be read" in (
        answer.message
    )


class _NoInstallation(FakeBackend):
    async def read_installation(self) -> Any:
        raise kubeapi.ApiUnavailable("reading the IchorInstallation (the site's policy) failed")


async def test_a_policy_that_cannot_be_fetched_leaves_the_write_undecided() -> None:
    answer = await judgement.cluster_answer(
        new=taloscluster(talos="v1.14.5"), old=taloscluster(), userinfo=userinfo(),
        operation="UPDATE", dryrun=False, backend=_NoInstallation(),
    )  # fmt: skip
    assert not answer.allowed
    assert answer.code == 503
    assert "the site's policy" in answer.message


# --- the webhook: the plan of an operation -----------------------------------------------------


async def test_the_plan_refuses_a_denied_patch_and_passes_it_under_the_verb() -> None:
    cluster = taloscluster(talos="v1.14.2")
    api = backend(clusters={NamespacedName("team-a", "prod"): cluster}, holders={"olivia"})
    refused = await judgement.operation_answer(
        new=talosoperation("talos", "v1.14.4"), userinfo=userinfo("mallory"), operation="CREATE",
        dryrun=True, backend=api,
    )  # fmt: skip
    assert not refused.allowed
    assert "entry 'nic'" in refused.message
    assert "Setting `override: true` on the TalosOperation would pass" in refused.message
    assert (
        await judgement.operation_answer(
            new=talosoperation("talos", "v1.14.3"),
            userinfo=userinfo("mallory"),
            operation="CREATE",
            dryrun=True,
            backend=api,
        )
    ).allowed
    op = talosoperation("talos", "v1.14.4", override=True)
    new = await stamped(
        op, old=None, userinfo=userinfo("olivia"), operation="CREATE", backend=api,
        kind="TalosOperation",
    )  # fmt: skip
    passed = await judgement.operation_answer(
        new=new, userinfo=userinfo("olivia"), operation="CREATE", dryrun=False, backend=api
    )
    assert passed.allowed
    assert passed.record is not None
    assert "SitePolicy" in passed.record
    assert "entry 'nic'" in passed.record


# --- the webhook: a write of the policy --------------------------------------------------------

FORGED: dict[str, Any] = {
    "deny": [
        {
            "name": "let-it-in",
            "component": "talos",
            "versions": [table.unknown_talos()],
            "effect": "Allow",
            "reason": "we trust it",
        }
    ]
}


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (
            FORGED,
            "spec.policy.deny[0].effect is not a field of a site policy, which can only refuse",
        ),
        ({"allow": [{"component": "talos"}]}, "spec.policy.allow is not a field"),
        (
            {"highestMinor": [{"name": "h", "component": "talos", "minor": "1.99", "reason": "r"}]},
            "would claim to allow what the table refuses",
        ),
        (
            {
                "deny": [
                    {
                        "name": "x",
                        "component": "talos",
                        "range": {"from": "v1.14.9", "to": "v1.14.1"},
                        "reason": "r",
                    }
                ]
            },
            "holds nothing",
        ),
    ],
    ids=[
        "an-entry-that-allows",
        "an-allow-list",
        "a-highest-minor-past-the-table",
        "an-empty-range",
    ],
)
async def test_a_policy_that_tries_to_allow_or_cannot_be_read_is_refused(
    raw: object, words: str
) -> None:
    api = backend(installation=installation(None))
    answer = await judgement.installation_answer(
        new=installation(raw), old=installation(None), userinfo=userinfo("platform"),
        operation="UPDATE", dryrun=False, backend=api,
    )  # fmt: skip
    assert not answer.allowed
    assert answer.message.startswith(
        "IchorInstallation ichor is refused: its site policy (spec.policy) cannot be read: "
    )
    assert words in answer.message


async def test_a_policy_that_can_be_read_is_admitted_and_an_unchanged_one_is_not_judged() -> None:
    api = backend(installation=installation(None))
    written = await judgement.installation_answer(
        new=installation(POLICY), old=installation(None), userinfo=userinfo("platform"),
        operation="UPDATE", dryrun=False, backend=api,
    )  # fmt: skip
    assert written.allowed
    # a policy stored without the webhook is left as it is by a write that does not touch it
    stored = installation(FORGED)
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"]["labels"] = {"helm.sh/chart": "ichor-9.9.9"}
    assert (
        await judgement.installation_answer(
            new=relabelled,
            old=stored,
            userinfo=userinfo("platform"),
            operation="UPDATE",
            dryrun=False,
            backend=api,
        )
    ).allowed


def _sent(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether the API server sends the installation's update (the match condition, as
    cel-python reads it)."""
    env = celpy.Environment()
    program = env.program(env.compile(intake.INSTALLATION_WRITES))
    return bool(program.evaluate({"object": json_to_cel(new), "oldObject": json_to_cel(old)}))


def test_the_match_condition_sends_every_write_of_the_policy_and_no_chart_update() -> None:
    bare, with_policy = installation(None), installation(POLICY)
    changed = installation({**POLICY, "deny": []})
    assert _sent(with_policy, bare)  # added
    assert _sent(bare, with_policy)  # removed
    assert _sent(changed, with_policy)  # changed
    # the chart's own updates: its labels and its release check, the policy untouched
    chart = copy.deepcopy(with_policy)
    chart["metadata"]["labels"] = {"helm.sh/chart": "ichor-9.9.9"}
    chart["spec"]["releaseCheck"] = {"enabled": False, "interval": "1h"}
    assert not _sent(chart, with_policy)
    assert not _sent(installation(None), bare)
    no_spec = {"metadata": {"name": "ichor"}}
    assert not _sent(no_spec, no_spec)
    assert _sent(with_policy, no_spec)


# --- the executor at execution ---------------------------------------------------------------


def _state(site: policy.SitePolicy) -> ClusterState:
    return ClusterState.from_body(
        {
            "metadata": {"name": "prod"},
            "spec": {
                "talosVersion": "v1.14.2",
                "kubernetesVersion": "v1.36.6",
                "versionContract": "v1.14",
            },
        },
        policy=site,
    )


def test_the_executor_refuses_a_denied_version_and_passes_it_under_an_admitted_override() -> None:
    site = policy.read(POLICY)
    refused = lifecycle.decide_execution(operation(version="v1.14.4"), _state(site))
    assert refused.refusal is not None
    assert refused.refusal.rule is Rule.SITE_POLICY
    message = lifecycle.refusal_message(refused.refusal, override=False)
    assert message.startswith("Refused at execution (SitePolicy): Talos v1.14.4 is refused by")
    admitted = replace(operation(version="v1.14.4", override=True), override_by="olivia")
    passed = lifecycle.decide_execution(admitted, _state(site))
    assert passed.runs
    assert [r.rule for r in passed.overridden] == [Rule.SITE_POLICY]
    assert "entry 'nic'" in passed.passing
    # a policy changed after the plan is in force at execution; one that cannot be read
    # stops even an admitted override
    unreadable = lifecycle.decide_execution(
        admitted, _state(policy.SitePolicy(unreadable="spec.policy is not an object"))
    )
    assert unreadable.refusal is not None
    assert unreadable.refusal.rule is Rule.SITE_POLICY_UNREADABLE


# --- the status the controller computes ---------------------------------------------------------


def _with(raw: object) -> Installation:
    return replace(LISTED, policy=policy.read(raw))


def test_a_held_back_kubernetes_minor_moves_to_the_blocked_lines_with_the_sites_reason() -> None:
    flannel = spec(cni={"preset": "unmanaged"})
    before = run(cluster=flannel, installation=LISTED)
    assert "v1.37.1" in condition(before, Type.KUBERNETES_UPGRADE_AVAILABLE).message
    outcome = run(cluster=flannel, installation=_with(POLICY))
    offered = condition(outcome, Type.KUBERNETES_UPGRADE_AVAILABLE).message
    assert "v1.37.1" not in offered
    blocked = condition(outcome, Type.UPGRADES_BLOCKED)
    assert blocked.status == ConditionStatus.TRUE
    assert "Kubernetes v1.37.1: denied by this site: 1.37 not validated" in blocked.message
    assert outcome.status.blocked_releases is not None
    kinds = {line.blocker for line in outcome.status.blocked_releases.nearest}
    assert "SitePolicy" in kinds
    assert "k8s" in outcome.site_entries


def test_a_denied_talos_patch_is_not_offered_and_the_default_moves() -> None:
    outcome = run(cluster=spec(talosVersion="v1.14.3"), installation=_with(POLICY))
    choices = outcome.status.upgrade_choices
    assert choices is not None
    assert choices.talos is not None
    assert "v1.14.4" not in choices.talos.patch
    assert choices.talos.default == "v1.14.5"
    assert "nic" in outcome.site_entries


def test_a_policy_that_cannot_be_read_offers_nothing_and_says_why() -> None:
    outcome = run(installation=_with({"deny": "unreadable"}))
    for type_ in (Type.TALOS_UPGRADE_AVAILABLE, Type.KUBERNETES_UPGRADE_AVAILABLE):
        found = condition(outcome, type_)
        assert (found.status, found.reason) == (
            ConditionStatus.UNKNOWN,
            Reason.SITE_POLICY_UNREADABLE,
        )
        assert "cannot be read" in found.message
    assert outcome.status.upgrade_choices is not None
    assert outcome.status.upgrade_choices.talos is not None
    assert outcome.status.upgrade_choices.talos.patch == ()


def test_the_tally_counts_the_clusters_each_entry_acts_on() -> None:
    site = policy.read(POLICY)
    tally = policy_tally(
        policy=site,
        generation=3,
        acting=[frozenset({"nic"}), frozenset({"nic", "k8s"}), frozenset()],
    )
    assert tally.to_api() == {
        "observedGeneration": 3,
        "clusters": 3,
        "entries": [
            {"name": "nic", "kind": "Deny", "component": "talos", "clusters": 2},
            {"name": "k8s", "kind": "HighestMinor", "component": "kubernetes", "clusters": 1},
        ],
    }
    broken = policy_tally(policy=policy.read("x"), generation=4, acting=[])
    assert broken.to_api() == {
        "observedGeneration": 4,
        "clusters": 0,
        "entries": [],
        "unreadable": "spec.policy is not an object",
    }


# --- the CLI's --list and plan ------------------------------------------------------------------


def test_the_cli_reads_the_policy_from_the_installation_as_the_controller_does() -> None:
    body = installation()
    body["status"] = {"upgradeTargets": {"checkedAt": "2026-12-03T08:00:00Z",
                                         "talos": ["v1.14.3", "v1.14.4", "v1.14.5"],
                                         "kubernetes": ["v1.36.7", "v1.37.1"]}}  # fmt: skip
    seen = views.Cluster.of(
        {"metadata": {"namespace": "team-a", "name": "prod"}, "spec": spec(talosVersion="v1.14.2")}
    )
    site = views.site_policy(body)
    assert site == policy.read(POLICY)
    listed = views.choice_list(
        seen, Component.TALOS, views.release_list(body, Component.TALOS), policy=site
    )
    assert [v.tag for v in listed.choices.patch] == ["v1.14.5", "v1.14.3"]
    assert listed.choices.default is not None
    assert listed.choices.default.tag == "v1.14.3"  # the release set, still valid
    plain = views.choice_list(seen, Component.TALOS, views.release_list(body, Component.TALOS))
    assert [v.tag for v in plain.choices.patch] == ["v1.14.5", "v1.14.4", "v1.14.3"]
    shown = listed.to_json()
    assert shown["patch"] == ["v1.14.5", "v1.14.3"]
    plan = views.path_plan(
        seen,
        talos=views.release_list(body, Component.TALOS),
        kubernetes=views.release_list(body, Component.KUBERNETES),
        talos_goal="v1.14.4",
        kubernetes_goal=None,
        policy=site,
    )
    assert plan.reason is not None
    assert "is not reachable under this site's policy: denied by this site" in plan.reason
