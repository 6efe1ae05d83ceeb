"""kstatus (sigs.k8s.io/cli-utils ``pkg/kstatus/status``) on objects, from the tests.

The reading of an object's status that ``kubectl wait``-style tools, Flux's health checks
and Argo CD build on is kstatus's, in Go. Rather than a Python imitation, the tests run
the real package: tests/gotools/kstatus, built by ``make testenv``. Two ways in:

* ``read(kubeconfig, refs)``: the program reads each object from the API server itself
  (``Ref("apps", "v1", "deployments", namespace, name)``);
* ``compute(objects)``: objects the test already holds, as JSON on the program's stdin.

Each answer is a ``Result`` with kstatus's ``status`` (``Status``) and message. A missing
program is a ``MissingBinaryError`` naming ``make testenv``; a program that fails (a bad
kubeconfig, an API error other than NotFound) raises ``KstatusError`` with its stderr.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from tests.harness import controlplane
from tests.support import gotools

__all__ = [
    "Condition",
    "KstatusError",
    "Ref",
    "Result",
    "Status",
    "compute",
    "read",
    "wait_for",
]

#: Bound on one run of the program (it reads each object with a 30 s bound of its own).
RUN_TIMEOUT = 120.0


class Status(StrEnum):
    """kstatus's statuses (``status.Status``)."""

    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    CURRENT = "Current"
    TERMINATING = "Terminating"
    NOT_FOUND = "NotFound"
    UNKNOWN = "Unknown"


class KstatusError(RuntimeError):
    """The kstatus program failed; the message holds its stderr."""


@dataclass(frozen=True)
class Ref:
    """An object on the API server: group ("" for core), version, resource (plural),
    namespace ("" for a cluster-scoped kind) and name."""

    group: str
    version: str
    resource: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.group}/{self.version}/{self.resource}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Condition:
    """A condition as kstatus reports it (its own Reconciling/Stalled for built-in kinds)."""

    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Result:
    """kstatus's answer for one object."""

    api_version: str
    kind: str
    namespace: str
    name: str
    generation: int
    status: Status
    message: str
    conditions: tuple[Condition, ...]
    #: Set when kstatus could not compute a status (``status`` is then Unknown).
    error: str | None = None

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


def _result(line: str) -> Result:
    data: dict[str, Any] = json.loads(line)
    return Result(
        api_version=data["apiVersion"],
        kind=data["kind"],
        namespace=data["namespace"],
        name=data["name"],
        generation=int(data["generation"]),
        status=Status(data["status"]),
        message=data["message"],
        conditions=tuple(
            Condition(type=c["type"], status=c["status"], reason=c["reason"], message=c["message"])
            for c in data["conditions"]
        ),
        error=data.get("error"),
    )


def _run(args: Sequence[str], *, stdin: str | None, expected: int) -> list[Result]:
    binary = gotools.find("kstatus")
    try:
        done = subprocess.run(
            [str(binary), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            env=controlplane.loopback_env(),
        )
    except subprocess.TimeoutExpired:
        raise KstatusError(f"kstatus {args[0]} did not finish in {RUN_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        raise KstatusError(f"kstatus {args[0]} failed ({done.returncode}): {done.stderr.strip()}")
    results = [_result(line) for line in done.stdout.splitlines() if line.strip()]
    if len(results) != expected:
        raise KstatusError(
            f"kstatus {args[0]} answered {len(results)} objects for {expected}: {done.stdout!r}"
        )
    return results


def read(kubeconfig: Path, refs: Sequence[Ref]) -> list[Result]:
    """kstatus of each object as the API server holds it now, in the order given."""
    if not refs:
        return []
    return _run(
        ["get", "-kubeconfig", str(kubeconfig), *(str(r) for r in refs)],
        stdin=None,
        expected=len(refs),
    )


def compute(objects: Iterable[Mapping[str, Any]]) -> list[Result]:
    """kstatus of each object given (a List counts as its items)."""
    items = list(objects)
    expected = sum(len(o.get("items") or ()) if "items" in o else 1 for o in items)
    if not items:
        return []
    return _run(
        ["compute"], stdin="\n".join(json.dumps(o) for o in items) + "\n", expected=expected
    )


def wait_for(
    kubeconfig: Path, ref: Ref, status: Status, *, timeout: float = 30.0, interval: float = 0.25
) -> Result:
    """Read ``ref`` until kstatus says ``status`` (bounded); returns that answer, or raises
    ``TimeoutError`` with the last one."""
    deadline = time.monotonic() + timeout
    while True:
        (result,) = read(kubeconfig, [ref])
        if result.status is status:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{ref}: kstatus still says {result.status} ({result.message!r}) after "
                f"{timeout:.0f} s, not {status}"
            )
        time.sleep(interval)
