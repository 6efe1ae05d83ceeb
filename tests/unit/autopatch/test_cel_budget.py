"""The cost of a health check, estimated from its parse tree (ichor.api.celbudget): the
attack of five nested macros is refused, the checks people write are admitted, macros
multiply, and what the estimate admits never meets the evaluator's step limit."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.api import celbudget
from ichor.api.autopatch import HealthCheck
from ichor.controller.autopatch import health

#: The CPU attack on health checks: 472 characters, five nested ``all`` over a 30-element list.
LIST30 = "[" + ",".join(str(i) for i in range(30)) + "]"
ATTACK = (
    f"{LIST30}.all(a, {LIST30}.all(b, {LIST30}.all(c, {LIST30}.all(d, "
    f"{LIST30}.all(e, a + b + c + d + e >= 0)))))"
)

#: Checks people write: docs/autopatch.md, tests/component/operations/test_autopatch.py,
#: and the gates a platform team keeps.
ORDINARY = [
    "objects.all(d, d.status.readyReplicas == d.spec.replicas)",
    'objects.exists(o, o.metadata.name == "ichor-gate-1" && o.data.ready == "yes")',
    'objects.all(o, o.data.ready == "yes")',
    "objects.size() > 0",
    'objects.all(p, p.status.phase == "Running" || p.status.phase == "Succeeded")',
    "objects.all(p, p.status.containerStatuses.all(c, c.ready))",
    "objects.filter(j, has(j.status.failed) && j.status.failed > 0).size() == 0",
    "objects.all(n, n.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True'))",
    '["web", "api"].all(name, objects.exists(d, d.metadata.name == name))',
    "objects.all(p, p.status.currentHealthy >= p.status.desiredHealthy)",
]


def estimate(expression: str) -> celbudget.Estimate:
    return celbudget.estimate(celbudget.parse(expression))


def nodes(expression: str) -> int:
    return sum(1 for _ in celbudget.parse(expression).iter_subtrees())


def test_the_attack_is_refused_for_its_macros_and_its_cost() -> None:
    assert len(ATTACK) == 472
    found = estimate(ATTACK)
    assert found.macros == 5
    assert found.steps > 30**5 > celbudget.BUDGET
    said = celbudget.judge(ATTACK)
    assert said is not None
    assert "nests 5 macros" in said
    assert "nest fewer macros" in said


def test_the_attack_with_three_macros_is_still_refused_for_its_cost() -> None:
    """Three macros are allowed; over 30 x 30 x 30 elements plus a wide body, the steps
    are not: the estimate, the budget and the step are in the sentence."""
    body = " && ".join(f"a + b + c >= {i}" for i in range(12))
    three = f"{LIST30}.all(a, {LIST30}.all(b, {LIST30}.all(c, {body})))"
    found = estimate(three)
    assert found.macros == 3
    assert found.steps > celbudget.BUDGET
    said = celbudget.problem(found)
    assert said is not None
    assert f"is estimated at {found.steps:,} evaluation steps" in said
    assert f"over the budget of {celbudget.BUDGET:,}" in said
    assert "simplify it, or nest fewer macros" in said


@pytest.mark.parametrize("expression", ORDINARY)
def test_ordinary_checks_are_admitted(expression: str) -> None:
    assert celbudget.judge(expression) is None, estimate(expression)


def test_a_macro_multiplies_its_body_by_the_list_bound() -> None:
    """Each node more in the body of a macro over ``objects`` costs LIST_BOUND steps; in
    a macro inside a macro, LIST_BOUND squared."""
    short, wide = "x.a == 1", "x.a == 1 && x.b == 2"
    extra = nodes(wide) - nodes(short)
    one = estimate(f"objects.all(x, {wide})").steps - estimate(f"objects.all(x, {short})").steps
    assert one == celbudget.LIST_BOUND * extra
    inner = "objects.all(y, {})"
    two = (
        estimate(f"objects.all(x, {inner.format(wide)})").steps
        - estimate(f"objects.all(x, {inner.format(short)})").steps
    )
    assert two == celbudget.LIST_BOUND**2 * extra


def test_a_literal_list_costs_its_length_and_a_concatenation_both() -> None:
    short, wide = "x.a == 1", "x.a == 1 && x.b == 2"
    extra = nodes(wide) - nodes(short)

    def per_node(target: str) -> int:
        difference = estimate(f"{target}.all(x, {wide})").steps
        difference -= estimate(f"{target}.all(x, {short})").steps
        assert difference % extra == 0
        return difference // extra

    assert per_node("[]") == 0
    assert per_node("[1, 2, 3]") == 3
    assert per_node("{'a': 1, 'b': 2}") == 2
    assert per_node("objects") == celbudget.LIST_BOUND
    assert per_node("(objects + [1, 2])") == celbudget.LIST_BOUND + 2
    assert per_node("(true ? [1] : [1, 2, 3, 4])") == 4
    assert per_node("objects.filter(o, true)") == celbudget.LIST_BOUND
    assert per_node("[1, 2].map(o, o)") == 2


def test_a_macro_on_the_result_of_another_adds_rather_than_multiplies() -> None:
    chained = estimate("objects.map(o, o.metadata.name).all(n, n != '')")
    assert chained.macros == 1
    assert chained.steps < celbudget.LIST_BOUND * 40


def test_membership_in_a_list_costs_its_length() -> None:
    assert (
        estimate("objects.all(o, o in objects)").steps
        >= estimate("objects.all(o, o == o)").steps + celbudget.LIST_BOUND**2 - 1000
    )


def test_a_fourth_nested_macro_is_refused_even_over_short_lists() -> None:
    three = "[1].all(a, [1].all(b, [1].all(c, true)))"
    four = "[1].all(a, [1].all(b, [1].all(c, [1].all(d, true))))"
    assert celbudget.judge(three) is None
    said = celbudget.judge(four)
    assert said is not None
    assert "nests 4 macros" in said


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 30 + "true" + ")" * 30,  # about 300 levels
        "+".join(["1"] * 120) + " == 120",  # a chain of operators
        "objects.size() == 0 || objects[0]" + ".a" * 190 + " == 1",  # field selections
    ],
)
def test_an_expression_nested_too_deep_is_refused_before_anything_recurses(
    expression: str,
) -> None:
    found = estimate(expression)
    assert found.depth > celbudget.MAX_DEPTH
    said = celbudget.problem(found)
    assert said is not None
    assert f"more than the {celbudget.MAX_DEPTH} the evaluator takes" in said


def test_a_deep_tree_past_pythons_recursion_is_measured_not_crashed() -> None:
    expression = "(" * 500 + "true" + ")" * 500
    assert celbudget.estimate(celbudget.parse(expression)).depth > 5000


def test_the_size_of_the_body_counts() -> None:
    """The same shape costs more with a wider body: size is part of the estimate."""
    narrow = "objects.all(a, objects.all(b, a.x == b.x))"
    wide = "objects.all(a, objects.all(b, " + " && ".join(["a.x == b.x"] * 4) + "))"
    assert celbudget.judge(narrow) is None
    assert celbudget.judge(wide) is not None


def test_reduce_is_refused() -> None:
    said = celbudget.judge("[1, 2, 3].reduce(r, i, '', r + r + 'x') != ''")
    assert said is not None
    assert "calls reduce, which is not part of CEL" in said


def test_an_expression_that_does_not_parse_cannot_be_estimated() -> None:
    said = celbudget.judge("objects.all(o,")
    assert said is not None
    assert "does not compile" in said


# --- the estimate bounds what the evaluator counts ----------------------------------------

#: A list bound small enough to evaluate the worst case of nested macros in a unit test:
#: the estimate's rules do not depend on the number.
SMALL_BOUND = 12


def _objects(n: int) -> list[dict[str, Any]]:
    """``n`` objects whose every list holds ``n`` items: the worst case of bound ``n``."""
    inner = [{"ready": True, "name": f"c{i}", "type": "Ready", "status": "True"} for i in range(n)]
    return [
        {
            "metadata": {"name": f"o{i}"},
            "data": {"ready": "yes"},
            "spec": {"replicas": 1},
            "status": {
                "phase": "Running",
                "readyReplicas": 1,
                "failed": 0,
                "currentHealthy": 1,
                "desiredHealthy": 1,
                "containerStatuses": inner,
                "conditions": inner,
            },
        }
        for i in range(n)
    ]


@pytest.mark.parametrize(
    "expression",
    [
        *ORDINARY,
        "objects.map(o, o.metadata.name).all(n, n in ['o1', 'o2'] || true)",
        "[1, 2, 3].all(x, x > 0) && (objects + objects).size() == 2 * objects.size()",
        "objects.all(a, objects.exists(b, a.metadata.name == b.metadata.name))",
        "objects.all(a, a.status.conditions.all(b, objects.exists(c, c.spec.replicas == 1)))",
        "objects.all(o, o in objects)",
    ],
)
def test_what_the_estimate_admits_never_meets_the_step_limit(
    expression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evaluated over the worst case (every list as long as the bound) with a step limit
    of exactly the estimate, the evaluation finishes; with half of it, it is stopped: the
    estimate is an upper bound, and not a loose one."""
    monkeypatch.setattr(celbudget, "LIST_BOUND", SMALL_BOUND)
    found = estimate(expression)
    program = health.program(expression)
    worst = _objects(SMALL_BOUND)
    done = health.run(program, worst, steps=found.steps)
    assert done.result in (health.Result.TRUE, health.Result.FALSE), done
    assert health.run(program, worst, steps=found.steps // 2).result is health.Result.STEPS


def test_compile_checks_refuses_what_the_budget_refuses() -> None:
    """The controller refuses a check stored before the webhook's rule: the same function."""
    costly = HealthCheck(name="burn", api_version="v1", resource="configmaps", expression=ATTACK)
    fine = HealthCheck(name="fine", api_version="v1", resource="configmaps", expression=ORDINARY[2])
    done, problems = health.compile_checks([costly, fine])
    assert [c.check.name for c in done] == ["fine"]
    (said,) = problems
    assert said.startswith('health check "burn" (')
    assert "nests 5 macros" in said
    assert "fix spec.autoPatch.healthChecks 'burn'" in said
