"""The health checks a person declares: CEL over workload objects, compiled and judged
without I/O; the decision holds a start while one fails, and no message quotes objects."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.api.autopatch import AutoPatchComponent, AutoPatchSpec, HealthCheck, Window
from ichor.api.conditions import Condition, ConditionStatus
from ichor.api.events import AutoPatchEventReason
from ichor.controller.autopatch import decisions as d
from ichor.controller.autopatch import health
from ichor.controller.autopatch.policy import effective
from tests.unit.autopatch.test_decisions import NOW, cluster, seen_all, status

SECRET = "s3cr3t-workload-value"


def check(expression: str, **fields: Any) -> HealthCheck:
    fields.setdefault("name", "apps-ready")
    fields.setdefault("api_version", "v1")
    fields.setdefault("resource", "configmaps")
    return HealthCheck(expression=expression, **fields)


def compiled(expression: str, **fields: Any) -> health.Compiled:
    done, problems = health.compile_checks([check(expression, **fields)])
    assert problems == ()
    return done[0]


def cm(ready: str) -> dict[str, Any]:
    return {"metadata": {"name": "gate"}, "data": {"ready": ready, "token": SECRET}}


ALL_READY = 'objects.all(o, o.data.ready == "yes")'


def test_true_passes() -> None:
    assert health.evaluate(compiled(ALL_READY), objects=[cm("yes"), cm("yes")]).ok


def test_empty_list_is_what_the_expression_says() -> None:
    assert health.evaluate(compiled(ALL_READY), objects=[]).ok
    assert not health.evaluate(compiled("objects.size() > 0"), objects=[]).ok


def test_false_fails_naming_the_check_and_never_the_objects() -> None:
    verdict = health.evaluate(compiled(ALL_READY), objects=[cm("yes"), cm("no")])
    assert not verdict.ok
    assert verdict.name == "apps-ready"
    assert 'health check "apps-ready"' in verdict.message
    assert "is false" in verdict.message
    assert ALL_READY in verdict.message
    assert SECRET not in verdict.message
    assert "no" not in verdict.message.split("is false")[1]


@pytest.mark.parametrize(
    "expression",
    [
        "objects[5].data.ready == 'x'",  # index out of range
        "objects.all(o, o.data.missing == 'x')",  # no such key
        "objects.all(o, o.data.ready > 1)",  # wrong type
        "1 / 0 == 1",
        f"objects.all(o, o.data.token == '{SECRET}' && o.data.nope == 1)",
    ],
)
def test_runtime_error_fails_with_a_sentence_and_no_data(expression: str) -> None:
    verdict = health.evaluate(compiled(expression), objects=[cm("yes")])
    assert not verdict.ok
    assert "failed: an evaluation error" in verdict.message
    tail = verdict.message.split("failed:")[1]
    assert SECRET not in tail
    assert "yes" not in tail


@pytest.mark.parametrize("expression", ["objects.size()", "'yes'", "objects", "1.5", "null"])
def test_non_bool_fails(expression: str) -> None:
    verdict = health.evaluate(compiled(expression), objects=[cm("yes")])
    assert not verdict.ok
    assert "not a bool" in verdict.message


def test_a_field_of_the_objects_never_reaches_a_non_bool_message() -> None:
    verdict = health.evaluate(compiled("objects[0].data.token"), objects=[cm("yes")])
    assert not verdict.ok
    assert SECRET not in verdict.message.split(")", 1)[1]


@pytest.mark.parametrize(
    "expression", ["objects.all(o,", "&&", "objects.all(o, o.x ==)", "'unterminated"]
)
def test_compile_error_is_a_problem_naming_the_check(expression: str) -> None:
    done, problems = health.compile_checks([check(expression)])
    assert done == ()
    assert len(problems) == 1
    assert 'health check "apps-ready"' in problems[0]
    assert "does not compile" in problems[0]
    assert "fix spec.autoPatch.healthChecks" in problems[0]


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "Bad Name"},
        {"api_version": "../../secrets"},
        {"api_version": "apps/v1/../v1"},
        {"resource": "secrets/../x"},
        {"resource": "pods?watch=1"},
        {"namespace": "a/b"},
        {"expression": "x" * 1025},
        {"expression": "  "},
    ],
)
def test_a_shape_the_crd_refuses_is_a_problem_too(fields: dict[str, Any]) -> None:
    fields.setdefault("expression", "true")
    done, problems = health.compile_checks([check(**fields)])
    assert done == ()
    assert len(problems) == 1


def test_names_must_be_unique_and_at_most_sixteen() -> None:
    _, problems = health.compile_checks([check("true"), check("true")])
    assert len(problems) == 1
    assert "unique" in problems[0]
    many = [check("true", name=f"c{i}") for i in range(17)]
    done, problems = health.compile_checks(many)
    assert len(done) == 16
    assert "at most 16" in problems[0]


def test_path_names_core_and_grouped_resources() -> None:
    assert compiled("true").path == "/api/v1/configmaps"
    grouped = compiled("true", api_version="apps/v1", resource="deployments", namespace="kube")
    assert grouped.path == "/apis/apps/v1/namespaces/kube/deployments"


@pytest.mark.parametrize(
    "garbage",
    [
        [1, "two", None, 3.5, [], {}],
        [{"data": None}],
        [{"data": {"ready": ["yes"]}}],
        [{"a": {"b": {"c": {"d": {"e": {"f": "deep"}}}}}}],
    ],
)
def test_garbage_objects_fail_cleanly(garbage: list[Any]) -> None:
    verdict = health.evaluate(compiled(ALL_READY), objects=garbage)
    assert not verdict.ok
    assert verdict.message


def test_deeply_nested_input_fails_cleanly() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = {"a": deep}
    verdict = health.evaluate(compiled(ALL_READY), objects=[deep])
    assert not verdict.ok


def test_huge_and_many_objects() -> None:
    big = {"data": {"ready": "yes", "blob": "z" * 500_000}}
    assert health.evaluate(compiled(ALL_READY), objects=[big]).ok
    many = [cm("yes") for _ in range(health.MAX_OBJECTS)]
    assert health.evaluate(compiled(ALL_READY), objects=many).ok
    many[-1] = cm("no")
    assert not health.evaluate(compiled(ALL_READY), objects=many).ok


def test_not_listed_fails_with_the_reason() -> None:
    verdict = health.evaluate(compiled(ALL_READY), objects=None, failure="it names too many")
    assert not verdict.ok
    assert verdict.message.endswith("it names too many")


# --- in the decision ---------------------------------------------------------------------


def policy_with(*checks: HealthCheck) -> Any:
    return effective(
        cluster=AutoPatchSpec(
            components=(AutoPatchComponent.TALOS,),
            windows=(Window(schedule="0 2 * * *", duration="4h"),),
            min_release_age="72h",
            health_checks=checks,
        ),
        fleet=None,
    )


def decide(p: Any, verdicts: Any, *, old: Condition | None = None) -> d.Decision:
    st = status(extra=(old,) if old else ())
    return d.decide(
        cluster=cluster(st), policy=p, runs=(), fleet=d.Fleet(seen=seen_all()), now=NOW,
        readyz=d.Probe(ok=True), health=verdicts,
    )  # fmt: skip


def test_a_failing_check_holds_the_start_with_one_event() -> None:
    p = policy_with(check(ALL_READY))
    verdict = health.evaluate(p.health[0], objects=[cm("no")])
    first = decide(p, (verdict,))
    assert first.start is None
    assert first.condition is not None
    assert first.condition.status == ConditionStatus.FALSE
    assert first.condition.reason == "HealthCheckFailed"
    assert 'health check "apps-ready"' in first.condition.message
    assert [e.reason for e in first.events] == [AutoPatchEventReason.BLOCKED]
    again = decide(p, (verdict,), old=first.condition)
    assert again.start is None
    assert again.events == ()


def test_a_passing_check_lets_the_start_go() -> None:
    p = policy_with(check(ALL_READY))
    verdict = health.evaluate(p.health[0], objects=[cm("yes")])
    assert decide(p, (verdict,)).start is not None


def test_a_check_that_does_not_compile_is_invalid_settings() -> None:
    p = policy_with(check("objects.all(o,", name="broken"))
    decision = decide(p, ())
    assert decision.start is None
    assert decision.condition is not None
    assert decision.condition.reason == "InvalidSettings"
    assert '"broken"' in decision.condition.message


def test_the_fleets_checks_apply_unless_the_cluster_sets_its_own() -> None:
    from ichor.api.autopatch import FleetAutoPatchSpec

    fleet = FleetAutoPatchSpec(health_checks=(check("true", name="fleet"),))
    assert [c.check.name for c in effective(cluster=None, fleet=fleet).health] == ["fleet"]
    own = AutoPatchSpec(health_checks=())
    assert effective(cluster=own, fleet=fleet).health == ()


def test_condition_type_is_auto_patch_ready() -> None:
    p = policy_with(check(ALL_READY))
    verdict = health.evaluate(p.health[0], objects=[cm("no")])
    cond = decide(p, (verdict,)).condition
    assert cond is not None
    assert cond.type == d.READY


# --- what a check may read -------------------------------------------------------------------


@pytest.mark.parametrize("api_version", ["v1", "example.com/v1", "apps/v1"])
def test_secrets_are_refused_in_any_group_even_when_the_settings_allow_them(
    api_version: str,
) -> None:
    """A verdict is one bit its author reads from the condition: a check over Secrets would
    let whoever may write the spec test the workload's secret values one guess at a time."""
    oracle = check('objects.exists(o, o.data.token.startsWith("czNj"))', name="oracle",
                   api_version=api_version, resource="secrets")  # fmt: skip
    allowing = (f"{api_version}/secrets", "v1/secrets")
    done, problems = health.compile_checks([oracle], allowed=allowing)
    assert done == ()
    assert len(problems) == 1
    assert "resource secrets is refused" in problems[0]
    assert "secret values" in problems[0]


def test_a_resource_the_operator_does_not_allow_is_refused_naming_the_setting() -> None:
    done, problems = health.compile_checks(
        [check("true", api_version="rbac.authorization.k8s.io/v1", resource="roles")]
    )
    assert done == ()
    assert "rbac.authorization.k8s.io/v1/roles is not a resource this operator lets" in problems[0]
    assert "ICHOR_HEALTH_CHECK_RESOURCES" in problems[0]
    assert "autoPatchHealthCheckResources" in problems[0]


def test_the_operator_may_allow_more_and_a_check_over_them_compiles() -> None:
    widgets = check("true", api_version="example.com/v1", resource="widgets")
    done, problems = health.compile_checks([widgets], allowed=("example.com/v1/widgets",))
    assert problems == ()
    assert done[0].path == "/apis/example.com/v1/widgets"
    # and what it allows replaces the default: ConfigMaps are no longer readable
    _, refused = health.compile_checks([check("true")], allowed=("example.com/v1/widgets",))
    assert "v1/configmaps is not a resource" in refused[0]


def test_the_default_reads_readiness_and_nothing_that_holds_secrets() -> None:
    from ichor.api.autopatch import DEFAULT_HEALTH_CHECK_RESOURCES

    assert not [k for k in DEFAULT_HEALTH_CHECK_RESOURCES if k.endswith("/secrets")]
    for key in DEFAULT_HEALTH_CHECK_RESOURCES:
        version, resource = key.rsplit("/", 1)
        _, problems = health.compile_checks([check("true", api_version=version, resource=resource)])
        assert problems == (), key


def test_a_refused_resource_holds_every_start_even_beside_a_passing_check() -> None:
    """The refused check is not merely dropped (the others would then start a patch with a
    gate missing): the settings are invalid and nothing starts."""
    p = effective(
        cluster=AutoPatchSpec(
            components=(AutoPatchComponent.TALOS,),
            windows=(Window(schedule="0 2 * * *", duration="4h"),),
            min_release_age="72h",
            health_checks=(check("true", name="fine"),
                           check("true", name="oracle", resource="secrets")),
        ),
        fleet=None,
        health_resources=("v1/configmaps", "v1/secrets"),
    )  # fmt: skip
    assert [c.check.name for c in p.health] == ["fine"]
    ok = health.evaluate(p.health[0], objects=[])
    decision = decide(p, (ok,))
    assert decision.start is None
    assert decision.condition is not None
    assert decision.condition.reason == "InvalidSettings"
    assert "resource secrets is refused" in decision.condition.message
