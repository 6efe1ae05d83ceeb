"""The health checks a person declares (``spec.autoPatch.healthChecks``): CEL expressions
over objects of the workload cluster, compiled and evaluated here. Pure: the objects come
in (the runner lists them), a verdict comes out.

The library is cel-python (module ``celpy``): pure Python, so the image and the wheel need
nothing compiled, and it implements the CEL standard (macros ``all``, ``exists``,
``filter``, ``map``, ``size``, ``has``) that Kubernetes' own validation rules use.

A verdict never quotes the objects: who may write the spec must not read the workload's
data through a message. It names the check, its expression and the kind of failure only.
Even so a verdict is one bit its author reads, so what a check may read is bounded: never
Secrets (``NEVER_CHECKED``), and only the resources the operator's settings allow
(``ICHOR_HEALTH_CHECK_RESOURCES``); a check over anything else is a problem, never listed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from ichor.api.autopatch import (
    DEFAULT_HEALTH_CHECK_RESOURCES,
    MAX_EXPRESSION_LENGTH,
    MAX_HEALTH_CHECKS,
    NEVER_CHECKED,
    HealthCheck,
)

#: At most this many objects are listed for one check (more: the check fails, it says so).
MAX_OBJECTS = 200
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
        if not _API_VERSION.match(check.api_version) or not _RESOURCE.match(check.resource):
            problems.append(
                f'health check "{check.name}": apiVersion {check.api_version[:64]!r} and '
                f"resource {check.resource[:64]!r} must name a resource such as apps/v1 "
                f"deployments; {fix}"
            )
            continue
        if check.resource in NEVER_CHECKED:
            problems.append(
                f'health check "{check.name}": resource {check.resource} is refused: a '
                "check's verdict would let whoever writes the spec test the workload's "
                "secret values; gate on the workloads that use them (their Pods or "
                f"Deployments) instead; {fix}"
            )
            continue
        if check.resource_key not in permitted:
            problems.append(
                f'health check "{check.name}": {check.resource_key} is not a resource this '
                f"operator lets a health check read ({', '.join(sorted(permitted))}); use one "
                "of them, or ask the operator's admin to add it to the chart's "
                f"autoPatchHealthCheckResources (ICHOR_HEALTH_CHECK_RESOURCES); {fix}"
            )
            continue
        if check.namespace is not None and not _NAME.match(check.namespace):
            problems.append(
                f'health check "{check.name}": namespace {check.namespace[:64]!r} is not a '
                f"namespace name; {fix}"
            )
            continue
        if len(check.expression) > MAX_EXPRESSION_LENGTH or not check.expression.strip():
            problems.append(
                f'health check "{check.name}": the expression must hold 1 to '
                f"{MAX_EXPRESSION_LENGTH} characters; {fix}"
            )
            continue
        try:
            program = env.program(env.compile(check.expression))
        except Exception as error:  # celpy raises parse and lark errors of many classes
            first = str(error).strip().splitlines()
            said = first[0][:200] if first else type(error).__name__
            problems.append(f"{_quoted(check)} does not compile: {said}; {fix}")
            continue
        compiled.append(Compiled(check=check, program=program))
    return tuple(compiled), tuple(problems)


def evaluate(compiled: Compiled, *, objects: Sequence[Any] | None, failure: str = "") -> Verdict:
    """The verdict of one check over ``objects`` (the listed items; None: they could not
    be listed, ``failure`` says why in words that hold no object data)."""
    name = compiled.check.name
    if objects is None:
        return Verdict(name, False, f"{_quoted(compiled.check)}: {failure or 'not listed'}")
    try:
        activation = {"objects": json_to_cel(list(objects))}
        result = compiled.program.evaluate(activation)
    except Exception as error:  # an evaluation error of any class fails the check
        return Verdict(name, False, f"{_quoted(compiled.check)} failed: {_kind(error)}")
    if isinstance(result, CELEvalError):
        return Verdict(name, False, f"{_quoted(compiled.check)} failed: {_kind(result)}")
    if not isinstance(result, celtypes.BoolType | bool):
        return Verdict(
            name,
            False,
            f"{_quoted(compiled.check)} gave a {type(result).__name__.removesuffix('Type')}, "
            "not a bool",
        )
    if not result:
        return Verdict(name, False, f"{_quoted(compiled.check)} is false")
    return Verdict(name, True)


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
