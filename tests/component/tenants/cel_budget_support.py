"""What tests/component/tenants/test_cel_budget.py needs: the chart's operator as its own
process, the CPU of it and of its children read from /proc, the webhook taken out of the
path for a while (an object stored before a rule), and the workload that makes the gates
of auto-patch open so that its health checks run."""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.component.chart import helm
from tests.harness import controlplane

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command (field 3 on), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """User and system CPU of ``pid`` so far (0 when it is gone)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (zombies left out)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is not None and int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    fields = _stat(pid)
    return fields is None or fields[0] == "Z"


@dataclass
class Sample:
    """The CPU of a process and of its children, at one moment."""

    at: float
    own: float
    kids: dict[int, float]

    @classmethod
    def of(cls, pid: int) -> Sample:
        return cls(time.monotonic(), cpu_seconds(pid), {k: cpu_seconds(k) for k in children(pid)})

    def rate_since(self, before: Sample) -> tuple[float, float]:
        """Cores used by the process, and by its children, between ``before`` and this."""
        wall = max(self.at - before.at, 1e-3)
        kids = sum(v - before.kids.get(k, 0.0) for k, v in self.kids.items())
        return (self.own - before.own) / wall, max(kids, 0.0) / wall


@contextlib.contextmanager
def webhook_out_of_the_path(plane: controlplane.ControlPlane, release: str) -> Iterator[None]:
    """The chart's webhook configurations removed, then put back as they were: what is
    written meanwhile is stored as before the webhook judged it."""
    saved: list[dict[str, Any]] = []
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        name = f"{release}-webhook"
        body = json.loads(plane.kubectl("get", kind, name, "-o", "json").stdout)
        for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
            body["metadata"].pop(key, None)
        saved.append(body)
        plane.kubectl("delete", kind, name)
    try:
        yield
    finally:
        for body in saved:
            plane.kubectl("create", "-f", "-", input=json.dumps(body))


def operator_identity(manifest: list[helm.Object], namespace: str) -> tuple[str, list[str]]:
    """The chart's ServiceAccount as the API server names it, and its groups."""
    account = helm.one(manifest, "ServiceAccount")["metadata"]["name"]
    return (
        f"system:serviceaccount:{namespace}:{account}",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
    )


def patch_status_as(
    plane: controlplane.ControlPlane,
    user: str,
    *,
    plural: str,
    name: str,
    status: dict[str, Any],
) -> None:
    """Merge ``status`` into a cluster-scoped ichor.dev object's status as ``user`` (the
    admin impersonating it; RBAC binds the chart's role to the account by name), in one
    PATCH as the operator writes it: ``kubectl patch`` would GET the status first, a verb
    the chart does not grant."""
    request = urllib.request.Request(
        f"{plane.server}/apis/ichor.dev/v1alpha1/{plural}/{name}/status",
        data=json.dumps({"status": status}).encode(),
        method="PATCH",
        headers={"Content-Type": "application/merge-patch+json", "Impersonate-User": user},
    )
    with urllib.request.urlopen(request, context=plane.ssl_context(), timeout=30) as response:
        response.read()


def wait_for(what: str, check: Any, *, timeout: float, every: float = 0.2) -> Any:
    """``check()`` once it is truthy; fails naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)


def now_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
