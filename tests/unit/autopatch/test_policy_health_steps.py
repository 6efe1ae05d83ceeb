"""The named steps of ``policy.effective`` (a cluster's setting or the fleet's, the
release age) and of ``health.compile_checks`` (the rules a check passes, then the
compile)."""

from __future__ import annotations

from datetime import timedelta

import celpy
import pytest

from ichor.api.autopatch import DEFAULT_MIN_RELEASE_AGE, MAX_EXPRESSION_LENGTH
from ichor.api.health_scope import DEFAULT_HEALTH_CHECK_RESOURCES
from ichor.controller.autopatch import health, policy
from tests.unit.autopatch.test_health import check

PERMITTED = frozenset(DEFAULT_HEALTH_CHECK_RESOURCES)


def test_own_or_fleet_keeps_an_own_empty_setting() -> None:
    assert policy._own_or_fleet(None, (1,)) == (1,)
    assert policy._own_or_fleet((), (1,)) == ()
    assert policy._own_or_fleet(False, True) is False
    assert policy._own_or_fleet(None, None) is None


def test_min_release_age() -> None:
    assert policy._min_release_age("2h") == (timedelta(hours=2), [])
    default, none = policy._min_release_age(None)
    assert none == []
    assert default == policy._min_release_age(DEFAULT_MIN_RELEASE_AGE)[0]
    fallback, problems = policy._min_release_age("soon")
    assert fallback == default
    assert len(problems) == 1
    assert "minReleaseAge" in problems[0]


def test_the_check_rules_run_in_their_order() -> None:
    assert (
        health._resource_form,
        health._never_checked,
        health._permitted,
        health._namespace_form,
        health._expression_length,
    ) == health.CHECK_RULES


def test_every_rule_passes_a_good_check() -> None:
    good = check("true")
    assert [rule(good, PERMITTED) for rule in health.CHECK_RULES] == [None] * 5


def test_resource_form() -> None:
    found = health._resource_form(check("true", api_version="apps/v1/x"), PERMITTED)
    assert found is not None
    assert "must name a resource such as apps/v1 deployments" in found
    assert health._resource_form(check("true", resource="Pods"), PERMITTED) is not None


def test_never_checked() -> None:
    found = health._never_checked(check("true", resource="secrets"), PERMITTED | {"v1/secrets"})
    assert found is not None
    assert "resource secrets is refused" in found


def test_permitted() -> None:
    found = health._permitted(check("true", resource="services"), PERMITTED)
    assert found is not None
    assert "v1/services is not a resource this operator lets a health check read" in found
    assert health._permitted(check("true", resource="services"), frozenset({"v1/services"})) is None


def test_namespace_form() -> None:
    assert health._namespace_form(check("true", namespace="Kube_System"), PERMITTED) is not None
    assert health._namespace_form(check("true", namespace="kube-system"), PERMITTED) is None


@pytest.mark.parametrize("expression", ["", "   ", "x" * (MAX_EXPRESSION_LENGTH + 1)])
def test_expression_length(expression: str) -> None:
    found = health._expression_length(check(expression), PERMITTED)
    assert found is not None
    assert f"must hold 1 to {MAX_EXPRESSION_LENGTH} characters" in found


def test_compiled() -> None:
    env = celpy.Environment()
    done = health._compiled(env, check("objects.all(o, has(o.data))"))
    assert isinstance(done, health.Compiled)
    broken = health._compiled(env, check("objects.all(o,"))
    assert isinstance(broken, str)
    assert "does not compile" in broken


def test_a_rule_problem_carries_the_fix_and_stops_the_compile() -> None:
    done, problems = health.compile_checks([check("objects.all(o,", resource="secrets")])
    assert done == ()
    assert len(problems) == 1
    assert "resource secrets is refused" in problems[0]
    assert problems[0].endswith("; fix spec.autoPatch.healthChecks 'apps-ready'")
