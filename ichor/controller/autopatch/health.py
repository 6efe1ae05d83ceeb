"""The health checks a person declares (``spec.autoPatch.healthChecks``): CEL expressions
over objects of the workload cluster, compiled and evaluated here. Pure.

cel-python (``celpy``): pure Python, the CEL standard Kubernetes' own rules use. A verdict
never quotes the objects; a check may read only the resources the settings allow, never
Secrets (``NEVER_CHECKED``), within ``ichor.api.celbudget``'s cost. ``run`` is what the
worker process calls (``celworker``); ``verdict`` turns its ``Outcome`` into a sentence.

More in docs/design/notes.md, "ichor/controller/autopatch/health.py".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, Evaluator

from ichor.api import celbudget
from ichor.api.autopatch import (
    DEFAULT_HEALTH_CHECK_RESOURCES,
    MAX_EXPRESSION_LENGTH,
    MAX_HEALTH_CHECKS,
    NEVER_CHECKED,
    HealthCheck,
)

#: At most this many objects are listed for one check (more: the check fails, it says so);
#: the cost estimate takes it as the length of every list (``celbudget.LIST_BOUND``).
MAX_OBJECTS = celbudget.LIST_BOUND
#: At most this many bytes of the list response are read for one check.
MAX_LIST_BYTES = 2 * 1024 * 1024
#: The JSON values and nesting that answer may hold (``ichor.kube.untrusted``, the bounds
#: of every workload answer): 2 MiB of ``{},`` would be some 700,000 dicts once parsed,
#: while 200 ordinary objects hold a few hundred values each; nesting deeper than this is
#: no Kubernetes object's, and a few hundred levels exhaust the recursion of the CEL
#: conversion the objects go through.
MAX_LIST_VALUES = 300_000
MAX_LIST_DEPTH = 100

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_API_VERSION = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?$")
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Compiled:
    check: HealthCheck
    program: Any

    @property
    def path(self) -> str:
        """The API path that lists the check's objects."""
        version = self.check.api_version
        root = "/api/v1" if version == "v1" else f"/apis/{version}"
        where = f"/namespaces/{self.check.namespace}" if self.check.namespace else ""
        return f"{root}{where}/{self.check.resource}"


@dataclass(frozen=True)
class Verdict:
    name: str
    ok: bool
    message: str = ""


def _quoted(check: HealthCheck) -> str:
    text = check.expression if len(check.expression) <= 200 else check.expression[:200] + "…"
    return f'health check "{check.name}" ({text})'


def compile_checks(
    checks: Sequence[HealthCheck],
    *,
    allowed: Sequence[str] = DEFAULT_HEALTH_CHECK_RESOURCES,
) -> tuple[tuple[Compiled, ...], tuple[str, ...]]:
    """The checks compiled, and a sentence for each one that cannot be (the CRD refuses
    most of these; a stored object may still hold one). ``allowed``: the resources a check
    may read (``<apiVersion>/<resource>``); Secrets never, whatever it holds."""
    permitted = frozenset(allowed)
    problems: list[str] = []
    compiled: list[Compiled] = []
    if len(checks) > MAX_HEALTH_CHECKS:
        problems.append(f"healthChecks holds {len(checks)} checks, at most {MAX_HEALTH_CHECKS}")
        checks = checks[:MAX_HEALTH_CHECKS]
    env = celpy.Environment()
    seen: set[str] = set()
    for check in checks:
        fix = f"fix spec.autoPatch.healthChecks {check.name!r}"
        if not _NAME.match(check.name) or check.name in seen:
            problems.append(
                f"health check name {check.name[:64]!r} is not a unique lowercase name; {fix}"
            )
            continue
        seen.add(check.name)
        problem = next(
            (found for rule in CHECK_RULES if (found := rule(check, permitted)) is not None),
            None,
        )
        result = _compiled(env, check) if problem is None else problem
        if isinstance(result, str):
            problems.append(f"{result}; {fix}")
        else:
            compiled.append(result)
    return tuple(compiled), tuple(problems)


def _resource_form(check: HealthCheck, permitted: frozenset[str]) -> str | None:
    if not _API_VERSION.match(check.api_version) or not _RESOURCE.match(check.resource):
        return (
            f'health check "{check.name}": apiVersion {check.api_version[:64]!r} and '
            f"resource {check.resource[:64]!r} must name a resource such as apps/v1 "
            "deployments"
        )
    return None


def _never_checked(check: HealthCheck, permitted: frozenset[str]) -> str | None:
    if check.resource in NEVER_CHECKED:
        return (
            f'health check "{check.name}": resource {check.resource} is refused: a '
            "check's verdict would let whoever writes the spec test the workload's "
            "secret values; gate on the workloads that use them (their Pods or "
            "Deployments) instead"
        )
    return None


def _permitted(check: HealthCheck, permitted: frozenset[str]) -> str | None:
    if check.resource_key not in permitted:
        return (
            f'health check "{check.name}": {check.resource_key} is not a resource this '
            f"operator lets a health check read ({', '.join(sorted(permitted))}); use one "
            "of them, or ask the operator's admin to add it to the chart's "
            "autoPatchHealthCheckResources (ICHOR_HEALTH_CHECK_RESOURCES)"
        )
    return None


def _namespace_form(check: HealthCheck, permitted: frozenset[str]) -> str | None:
    if check.namespace is not None and not _NAME.match(check.namespace):
        return (
            f'health check "{check.name}": namespace {check.namespace[:64]!r} is not a '
            "namespace name"
        )
    return None


def _expression_length(check: HealthCheck, permitted: frozenset[str]) -> str | None:
    if len(check.expression) > MAX_EXPRESSION_LENGTH or not check.expression.strip():
        return (
            f'health check "{check.name}": the expression must hold 1 to '
            f"{MAX_EXPRESSION_LENGTH} characters"
        )
    return None


#: What a check with a unique name must pass before it is compiled, in order: each rule
#: gives the problem (``compile_checks`` adds the fix) or None.
CHECK_RULES: tuple[Callable[[HealthCheck, frozenset[str]], str | None], ...] = (
    _resource_form,
    _never_checked,
    _permitted,
    _namespace_form,
    _expression_length,
)


def _compiled(env: celpy.Environment, check: HealthCheck) -> Compiled | str:
    """The check compiled, or why it is not: it does not compile, or costs too much."""
    try:
        tree = env.compile(check.expression)
    except Exception as error:  # celpy raises parse and lark errors of many classes
        first = str(error).strip().splitlines()
        said = first[0][:200] if first else type(error).__name__
        return f"{_quoted(check)} does not compile: {said}"
    costly = celbudget.problem(celbudget.estimate(tree))
    if costly is not None:
        return f"{_quoted(check)} {costly}"
    return Compiled(check=check, program=env.program(tree))


def evaluate(
    compiled: Compiled,
    *,
    objects: Sequence[Any] | None,
    failure: str = "",
    steps: int = celbudget.BUDGET,
) -> Verdict:
    """The verdict of one check over ``objects`` (the listed items; None: they could not
    be listed, ``failure`` says why in words that hold no object data), evaluated here,
    in this process: the controller runs checks in its worker process instead."""
    if objects is None:
        return not_evaluated(compiled.check, failure or "not listed")
    return verdict(compiled.check, run(compiled.program, objects, steps=steps))


def not_evaluated(check: HealthCheck, why: str) -> Verdict:
    """A check that was not evaluated, and why (words that hold no object data)."""
    return Verdict(check.name, False, f"{_quoted(check)}: {why}")


# --- evaluation, counted ---------------------------------------------------------------


class Result(StrEnum):
    """What became of one evaluation."""

    TRUE = "true"
    FALSE = "false"
    NOT_BOOL = "not-bool"  # detail: the type's name
    ERROR = "error"  # detail: the kind of error (``_kind``)
    STEPS = "steps"  # stopped at its step limit (limit: the steps)
    MEMORY = "memory"  # its worker ran out of its address space (limit: the bytes)
    TIMEOUT = "timeout"  # its worker was killed at the deadline (limit: the seconds)
    CPU = "cpu"  # its worker ended at its CPU limit (limit: the seconds)
    ENDED = "ended"  # its worker ended otherwise (detail: how)
    UNAVAILABLE = "unavailable"  # no worker evaluated it (detail: why)


#: The results of an evaluation stopped for what it cost: its check is not evaluated again
#: for a while (``ichor.controller.autopatch.runner``).
COSTLY = frozenset({Result.STEPS, Result.MEMORY, Result.TIMEOUT, Result.CPU, Result.ENDED})
_DETAIL = re.compile(r"^[A-Za-z0-9 ,.:()'_-]{0,160}$")
MIB = 1024 * 1024


@dataclass(frozen=True)
class Outcome:
    """An evaluation's result, in words of this module's own (never the objects' data)."""

    result: Result
    detail: str = ""
    limit: float = 0

    def to_json(self) -> dict[str, Any]:
        return {"result": self.result.value, "detail": self.detail, "limit": self.limit}

    @classmethod
    def from_json(cls, raw: object) -> Outcome | None:
        """The outcome a worker wrote, or None when it is not one (then the worker is
        not trusted to answer again)."""
        if not isinstance(raw, Mapping):
            return None
        detail, limit = raw.get("detail"), raw.get("limit")
        try:
            result = Result(str(raw.get("result")))
        except ValueError:
            return None
        if not isinstance(detail, str) or not _DETAIL.match(detail):
            return None
        if not isinstance(limit, int | float) or isinstance(limit, bool) or limit < 0:
            return None
        return cls(result, detail, limit)


class OverBudget(BaseException):
    """The step limit is reached. A BaseException, so that no handler of celpy's (which
    turn an ``Exception`` into a CEL error value) keeps the evaluation going."""


class _Steps:
    def __init__(self, limit: int) -> None:
        self.left = limit


class _Counting(Evaluator):
    """celpy's evaluator, counting each node it visits (the unit of ``celbudget``) and
    stopping at the limit; its macros' bodies share the count."""

    def __init__(self, ast: celbudget.Tree, activation: Any, steps: _Steps) -> None:
        super().__init__(ast, activation)
        self.steps = steps

    def sub_evaluator(self, ast: celbudget.Tree) -> Evaluator:
        return _Counting(ast, self.activation, self.steps)

    def _visit_tree(self, tree: celbudget.Tree) -> Any:
        steps = self.steps
        steps.left -= 1
        if steps.left < 0:
            raise OverBudget
        return super()._visit_tree(tree)


def program(expression: str) -> Any:
    """celpy's program of ``expression`` (raises its parse errors)."""
    env = celpy.Environment()
    return env.program(env.compile(expression))


def run(program: Any, objects: Sequence[Any], *, steps: int = celbudget.BUDGET) -> Outcome:
    """Evaluate ``program`` (celpy's, from ``compile_checks`` or ``program``) over
    ``objects``, stopping after ``steps`` nodes visited; never raises for what the
    expression or the objects hold."""
    try:
        activation = {"objects": json_to_cel(list(objects))}
        evaluator = _Counting(program.ast, program.new_activation(), _Steps(steps))
        result = evaluator.evaluate(activation)
    except OverBudget:
        return Outcome(Result.STEPS, limit=steps)
    except MemoryError:
        return Outcome(Result.MEMORY)
    except Exception as error:  # an evaluation error of any class fails the check
        return Outcome(Result.ERROR, _kind(error))
    if isinstance(result, CELEvalError):
        return Outcome(Result.ERROR, _kind(result))
    if not isinstance(result, celtypes.BoolType | bool):
        return Outcome(Result.NOT_BOOL, type(result).__name__.removesuffix("Type")[:60])
    return Outcome(Result.TRUE if result else Result.FALSE)


_STOPPED = "simplify it, or nest fewer macros (all, exists, map, filter)"


def verdict(check: HealthCheck, outcome: Outcome) -> Verdict:
    """The verdict of ``check`` whose evaluation came to ``outcome``."""
    name, quoted, result = check.name, _quoted(check), outcome.result
    if result is Result.TRUE:
        return Verdict(name, True)
    said = {
        Result.FALSE: "is false",
        Result.NOT_BOOL: f"gave a {outcome.detail}, not a bool",
        Result.ERROR: f"failed: {outcome.detail}",
        Result.STEPS: f"was stopped at {outcome.limit:,.0f} evaluation steps, its budget; "
        + _STOPPED,
        Result.MEMORY: f"was stopped: its evaluation needed more than "
        f"{outcome.limit / MIB:,.0f} MiB; " + _STOPPED,
        Result.TIMEOUT: f"was stopped: its evaluation took over {outcome.limit:,.0f} s, and "
        "its process was killed; " + _STOPPED,
        Result.CPU: f"was stopped: its evaluation used over {outcome.limit:,.0f} s of CPU; "
        + _STOPPED,
        Result.ENDED: f"failed: the process evaluating it ended ({outcome.detail})",
        Result.UNAVAILABLE: f"was not evaluated: {outcome.detail}",
    }[result]
    return Verdict(name, False, f"{quoted} {said}")


# --- the worker's messages ---------------------------------------------------------------

#: Bytes of the length that starts each message between the controller and its worker.
HEADER = 4
#: The longest answer a worker may write (an outcome is a few dozen bytes).
MAX_ANSWER = 4096


def frame(payload: Mapping[str, Any]) -> bytes:
    """One message: its length in ``HEADER`` bytes, then its JSON."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    return len(body).to_bytes(HEADER, "big") + body


def request(compiled: Compiled, objects: Sequence[Any], *, steps: int, cpu: float) -> bytes:
    """The message that asks a worker to evaluate ``compiled`` over ``objects``."""
    return frame(
        {
            "expression": compiled.check.expression,
            "objects": list(objects),
            "steps": steps,
            "cpu": cpu,
        }
    )


def _kind(error: BaseException) -> str:
    """The kind of an evaluation error, never its text (which may quote values)."""
    args: tuple[Any, ...] = tuple(getattr(error, "args", ()))
    second = args[1] if len(args) > 1 else None
    cause: type = second if isinstance(second, type) else type(error)
    words = {
        "KeyError": "a field or key is missing",
        "IndexError": "an index is out of range",
        "TypeError": "no such overload (a value of the wrong type)",
        "ZeroDivisionError": "division by zero",
        "ValueError": "a value is invalid",
        "OverflowError": "an overflow",
        "RecursionError": "the expression nests too deep",
    }
    return "an evaluation error: " + words.get(cause.__name__, cause.__name__)
