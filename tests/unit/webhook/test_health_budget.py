"""The webhook refuses a TalosCluster write whose health checks cost more than their budget
(ichor.api.celbudget), naming the check, the estimate, the budget and the step; a check
stored before the rule never blocks an unrelated write, and no identity passes it."""

from __future__ import annotations

import copy
from typing import Any

from ichor.api import celbudget
from ichor.webhook import decisions, judgement
from tests.unit.autopatch.test_cel_budget import ATTACK, ORDINARY
from tests.unit.webhook.fakes import FakeBackend, stamped, taloscluster, userinfo

#: Three macros nested, each over a list not written out: 200 x 200 x 200 elements.
CUBIC = "objects.all(a, objects.all(b, objects.all(c, a == c)))"


def with_checks(*expressions: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    made = copy.deepcopy(body) if body is not None else taloscluster()
    made["spec"]["autoPatch"] = {
        "healthChecks": [
            {"name": f"check-{i}", "apiVersion": "v1", "resource": "configmaps",
             "expression": expression}
            for i, expression in enumerate(expressions)
        ]
    }  # fmt: skip
    return made


async def answer(
    new: dict[str, Any], old: dict[str, Any] | None = None, *, user: str = "alice"
) -> decisions.Answer:
    backend = FakeBackend(holders={"alice", "olivia"})
    operation = "CREATE" if old is None else "UPDATE"
    new = await stamped(new, old=old, userinfo=userinfo(user), operation=operation, backend=backend)
    return await judgement.cluster_answer(
        new=new, old=old, userinfo=userinfo(user), operation=operation, dryrun=False,
        backend=backend,
    )  # fmt: skip


async def test_the_attack_is_refused_at_admission_naming_the_check_and_the_step() -> None:
    refused = await answer(with_checks(ORDINARY[0], ATTACK))
    assert not refused.allowed
    assert refused.code == decisions.Code.FORBIDDEN
    message = refused.message
    assert message.startswith('TalosCluster team-a/prod is refused: health check "check-1" ')
    assert "(spec.autoPatch.healthChecks)" in message
    assert "nests 5 macros" in message
    assert "nest fewer macros" in message


async def test_a_costly_check_is_refused_with_its_estimate_and_the_budget() -> None:
    refused = await answer(with_checks(CUBIC))
    assert not refused.allowed
    steps = celbudget.estimate(celbudget.parse(CUBIC)).steps
    assert f"is estimated at {steps:,} evaluation steps" in refused.message
    assert f"over the budget of {celbudget.BUDGET:,}" in refused.message
    assert "simplify it, or nest fewer macros" in refused.message


async def test_ordinary_checks_are_admitted() -> None:
    admitted = await answer(with_checks(*ORDINARY))
    assert admitted.allowed, admitted.message


async def test_an_expression_that_does_not_compile_is_refused() -> None:
    refused = await answer(with_checks("objects.all(o,"))
    assert not refused.allowed
    assert "does not compile" in refused.message


async def test_no_identity_passes_it_not_even_a_holder_of_the_override_verb() -> None:
    refused = await answer(with_checks(CUBIC), user="olivia")
    assert not refused.allowed
    assert "health check" in refused.message


async def test_a_check_stored_before_the_rule_does_not_block_an_unrelated_write() -> None:
    """The operator moves the spec after an operation; a person edits another field: a
    check stored before the webhook judged checks is the controller's to refuse."""
    old = with_checks(CUBIC)
    moved = copy.deepcopy(old)
    moved["spec"]["kubernetesVersion"] = "v1.36.7"
    assert (await answer(moved, old)).allowed


async def test_an_update_that_adds_or_changes_a_check_is_judged() -> None:
    old = with_checks(ORDINARY[0])
    changed = with_checks(CUBIC)
    refused = await answer(changed, old)
    assert not refused.allowed
    assert 'health check "check-0"' in refused.message
    # renaming a stored costly check is a new check: judged
    stored = with_checks(CUBIC)
    renamed = copy.deepcopy(stored)
    renamed["spec"]["autoPatch"]["healthChecks"][0]["name"] = "renamed"
    assert not (await answer(renamed, stored)).allowed


async def test_a_review_beyond_the_crds_limits_is_refused_without_parsing_each_check() -> None:
    """The API server never sends these (the CRD caps both); a review from elsewhere must
    not make the webhook parse megabytes of expressions."""
    many = await answer(with_checks(*(["true"] * 17)))
    assert not many.allowed
    assert "holds 17 checks, at most 16" in many.message
    long = await answer(with_checks("true || " * 200 + "true"))
    assert not long.allowed
    assert "more than 1,024" in long.message
