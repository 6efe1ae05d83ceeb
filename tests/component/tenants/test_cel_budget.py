"""A tenant's CEL health check cannot take the operator's CPU: CEL has a budget.

The operator runs as the chart describes it (``python -m ichor.operator``, the chart's
ServiceAccount, its webhook registered by the chart) on the real API server, which is also
the workload cluster its TalosClusters read through a kubeconfig Secret. The attack's
check (five nested macros over a 30-element list) is refused at admission; stored before
that rule, it is refused by the controller and never runs. A check the estimate admits
but that runs away over the workload's objects runs in the worker process: the worker is
killed at the deadline and the CPU falls back, while another cluster's status stays fresh
and a TalosOperation is admitted; SIGTERM ends the operator and its worker at once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ichor import operator as ichor_operator
from ichor.api import celbudget, kinds
from ichor.controller.autopatch import runner
from tests.component.chart import release
from tests.component.chart.conftest import start_operator, stop_operator
from tests.component.tenants.cel_budget_support import (
    Sample,
    children,
    cpu_seconds,
    gone,
    now_stamp,
    operator_identity,
    patch_status_as,
    wait_for,
    webhook_out_of_the_path,
)
from tests.component.webhook import harness
from tests.harness import controlplane
from tests.support import nodes

pytestmark = [pytest.mark.component, pytest.mark.timeout(900)]

LIST30 = "[" + ",".join(str(i) for i in range(30)) + "]"
#: The CPU attack on health checks: 472 characters, five nested ``all`` over a 30-element list.
ATTACK = (
    f"{LIST30}.all(a, {LIST30}.all(b, {LIST30}.all(c, {LIST30}.all(d, "
    f"{LIST30}.all(e, a + b + c + d + e >= 0)))))"
)
#: Within the estimate (some 1,000,000 steps over lists of 200), but each step compares
#: two whole ConfigMaps field by field: minutes over 200 ConfigMaps of 100 keys.
RUNAWAY = "objects.all(a, objects.exists(b, a == b) && objects.exists(b, b == a))"
#: A value each ConfigMap holds: no message may quote it.
SECRET = "s3cr3t-value-of-the-workload-0123456789"
OPEN = {"schedule": "* * * * *", "duration": "2h"}
TARGETS = {"talos": ["v1.14.5", "v1.14.4", "v1.14.3"], "kubernetes": ["v1.36.7", "v1.36.6"]}
NODES = {"cel-cp-1": ("10.0.0.1", True), "cel-cp-2": ("10.0.0.2", True),
         "cel-worker-1": ("10.0.0.11", False)}  # fmt: skip


@dataclass
class Stack:
    plane: controlplane.ControlPlane
    rel: release.Release
    operator: subprocess.Popen[str]
    log: Path
    tenant: str
    data: str

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.plane.kubectl(*args, **kwargs)

    def cluster(self, name: str) -> dict[str, Any] | None:
        found = self.kubectl("get", "taloscluster", name, "-n", self.tenant, "-o", "json",
                             check=False)  # fmt: skip
        return json.loads(found.stdout) if found.returncode == 0 else None

    def create(self, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return self.kubectl("create", "-f", "-", input=json.dumps(body), check=False)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def explain(self, name: str) -> str:
        """What a failing wait shows: the cluster's conditions and the operator's log."""
        found = self.cluster(name) or {}
        conditions = (found.get("status") or {}).get("conditions") or []
        said = "\n".join(
            f"{c.get('type')} {c.get('reason')}: {c.get('message')}" for c in conditions
        )
        return f"{said}\n--- the operator's log, last lines:\n{self.log_text()[-3000:]}"


def cluster_body(tenant: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_CLUSTER,
        "metadata": {"name": name, "namespace": tenant},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
            "talosconfigSecretRef": {"name": "talosconfig"},
            "kubeconfigSecretRef": {"name": "workload"},
            **spec,
        },
    }


def gated(data: str, expression: str) -> dict[str, Any]:
    """Auto-patch whose gates open (a window now, a patch listed, no age to wait): only
    the health check stands before a start."""
    check = {"name": "burn", "apiVersion": "v1", "resource": "configmaps", "namespace": data,
             "expression": expression}  # fmt: skip
    return {"components": ["talos"], "windows": [OPEN], "minReleaseAge": "0m",
            "healthChecks": [check]}  # fmt: skip


def condition(body: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for found in ((body or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == type_:
            return dict(found)
    return {}


def _workload(plane: controlplane.ControlPlane, tenant: str, data: str) -> None:
    """The workload the clusters read (this API server): Talos Nodes, Ready, Cilium
    1.20.4, and 200 ConfigMaps of 100 keys; a kubeconfig Secret of its admin."""
    for node in json.loads(plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]:
        plane.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")
    now = now_stamp()
    for name, (address, control) in NODES.items():
        labels = {"node-role.kubernetes.io/control-plane": ""} if control else {}
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        plane.kubectl("create", "-f", "-", input=json.dumps(node))
        status = {"status": {
            "addresses": [{"type": "InternalIP", "address": address},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": nodes.talos_node_info(talos="v1.14.3", kubelet="v1.36.6"),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "ok", "lastHeartbeatTime": now,
                            "lastTransitionTime": now}],
        }}  # fmt: skip
        plane.kubectl("patch", "node", name, "--subresource=status", "--type=merge",
                      "-p", json.dumps(status))  # fmt: skip
    cilium = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "cilium"}},
                 "template": {"metadata": {"labels": {"app": "cilium"}}, "spec": {
                     "containers": [{"name": "cilium-agent",
                                     "image": "quay.io/cilium/cilium:v1.20.4"}]}}},
    }  # fmt: skip
    plane.kubectl("apply", "-f", "-", input=json.dumps(cilium))
    for namespace in (tenant, data):
        plane.kubectl("create", "namespace", namespace)
    maps = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{n:03d}"},
             "data": {f"key-{k:03d}": SECRET for k in range(100)}}
            for n in range(200)
        ],
    }  # fmt: skip
    plane.kubectl("create", "-n", data, "-f", "-", input=json.dumps(maps), timeout=180)
    kubeconfig = plane.user_kubeconfig("cel-workload-admin", groups=["system:masters"])
    plane.kubectl("create", "secret", "generic", "workload", "-n", tenant,
                  f"--from-file=kubeconfig={kubeconfig}")  # fmt: skip
    plane.kubectl("create", "secret", "generic", "talosconfig", "-n", tenant,
                  "--from-literal=talosconfig=context: test")  # fmt: skip


#: The failures of the release check's listing (no registry here), cleared.
CLEARED = {"talosError": None, "kubernetesError": None, "error": None}


def _listed(plane: controlplane.ControlPlane) -> bool:
    found = json.loads(
        plane.kubectl("get", "ichorinstallation", kinds.INSTALLATION_NAME, "-o", "json").stdout
    )
    return bool(((found.get("status") or {}).get("upgradeTargets") or {}).get("checkedAt"))


#: The fleet's auto-patch limit while this module runs (the CRD's largest).
FLEET_LIMIT = 1000


def _fleet_limit(plane: controlplane.ControlPlane, limit: int | None) -> int | None:
    """Set the IchorInstallation's ``spec.autoPatch.maxConcurrentClusters`` (None: its
    default); the value it had."""
    found = json.loads(
        plane.kubectl("get", "ichorinstallation", kinds.INSTALLATION_NAME, "-o", "json").stdout
    )
    had = ((found.get("spec") or {}).get("autoPatch") or {}).get("maxConcurrentClusters")
    patch = {"spec": {"autoPatch": {"maxConcurrentClusters": limit}}}
    plane.kubectl("patch", "ichorinstallation", kinds.INSTALLATION_NAME, "--type=merge",
                  "-p", json.dumps(patch))  # fmt: skip
    return had if isinstance(had, int) else None


@pytest.fixture(scope="module")
def stack(
    control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("cel-budget")
    ports = {name: controlplane.free_port() for name in ("webhook", "healthz", "metrics")}
    suffix = uuid.uuid4().hex[:6]
    tenant, data = f"cel-tenant-{suffix}", f"cel-data-{suffix}"
    with release.installed(
        control_plane, workdir=workdir, webhook_port=ports["webhook"], mutual_tls=True
    ) as rel:
        operator: subprocess.Popen[str] | None = None
        fleet_limit: int | None = None
        changed = False
        try:
            # Other tests' auto-patch operations may stay in this shared API server (no
            # namespace controller ends their namespaces' deletion) and hold the fleet's
            # slot (maxConcurrentClusters, default 1): the fleet's limit is not under test
            # (set before the operator starts: a later spec change reruns its release check).
            fleet_limit, changed = _fleet_limit(control_plane, FLEET_LIMIT), True
            operator, log = start_operator(
                control_plane, rel.manifest, namespace=rel.namespace, workdir=workdir, ports=ports
            )
            running = operator
            harness.wait_until_answering(control_plane, alive=lambda: running.poll() is None)
            _workload(control_plane, tenant, data)
            # the release lists, written as the operator (only it may write status) once
            # its own first check failed (no registry here) and said so: as if it listed
            user, _ = operator_identity(rel.manifest, rel.namespace)
            wait_for("the release check's first listing", lambda: _listed(control_plane),
                     timeout=120)  # fmt: skip
            patch_status_as(
                control_plane, user, plural="ichorinstallations", name=kinds.INSTALLATION_NAME,
                status={"upgradeTargets": {"checkedAt": now_stamp(), **TARGETS, **CLEARED}},
            )  # fmt: skip
            made = Stack(control_plane, rel, operator, log, tenant, data)
            created = made.create(cluster_body(tenant, "steady"))
            assert created.returncode == 0, created.stderr
            wait_for(
                "the steady cluster observed",
                lambda: ((made.cluster("steady") or {}).get("status") or {}).get(
                    "observedGeneration"
                ),
                timeout=120,
            )
            yield made
        finally:
            if operator is not None:
                stop_operator(operator)
            if changed:
                _fleet_limit(control_plane, fleet_limit)
            for namespace in (tenant, data):
                control_plane.kubectl("delete", "namespace", namespace, "--wait=false",
                                      check=False)  # fmt: skip
            for name in NODES:
                control_plane.kubectl("delete", "node", name, "--wait=false", check=False)
            control_plane.kubectl("delete", "daemonset", "cilium", "-n", "kube-system",
                                  "--wait=false", check=False)  # fmt: skip


def test_the_attack_is_refused_at_admission(stack: Stack) -> None:
    attack = cluster_body(stack.tenant, "attack", autoPatch=gated(stack.data, ATTACK))
    refused = stack.create(attack)
    assert refused.returncode != 0, refused.stdout
    said = refused.stderr
    assert f'TalosCluster {stack.tenant}/attack is refused: health check "burn"' in said
    assert "nests 5 macros" in said
    assert "nest fewer macros" in said
    assert stack.cluster("attack") is None
    # and a check over the budget by its cost alone, with the estimate and the budget
    cubic = "objects.all(a, objects.all(b, objects.all(c, a == c)))"
    costly = stack.create(cluster_body(stack.tenant, "cubic", autoPatch=gated(stack.data, cubic)))
    assert costly.returncode != 0
    steps = celbudget.estimate(celbudget.parse(cubic)).steps
    assert f"is estimated at {steps:,} evaluation steps" in costly.stderr
    assert f"over the budget of {celbudget.BUDGET:,}" in costly.stderr


def test_the_attack_stored_before_the_rule_is_refused_by_the_controller_and_never_runs(
    stack: Stack,
) -> None:
    with webhook_out_of_the_path(stack.plane, stack.rel.name):
        stored = stack.create(
            cluster_body(stack.tenant, "legacy", autoPatch=gated(stack.data, ATTACK))
        )
        assert stored.returncode == 0, stored.stderr
    body = wait_for(
        "AutoPatchReady InvalidSettings",
        lambda: (
            b
            if condition(b := stack.cluster("legacy"), "AutoPatchReady").get("reason")
            == "InvalidSettings"
            else None
        ),
        timeout=120,
    )
    message = condition(body, "AutoPatchReady")["message"]
    assert 'health check "burn"' in message
    assert "nests 5 macros" in message
    # nothing evaluated it: the operator has no worker, and its CPU is its own small share
    before = Sample.of(stack.operator.pid)
    time.sleep(3)
    own, _ = Sample.of(stack.operator.pid).rate_since(before)
    assert children(stack.operator.pid) == []
    assert own < 0.5, own
    stack.kubectl("delete", "taloscluster", "legacy", "-n", stack.tenant)


def _worker(pid: int) -> int | None:
    """The operator's worker process, once it runs (it starts at the first check)."""
    found = children(pid)
    return found[0] if found else None


def test_a_runaway_past_the_estimate_is_killed_at_its_deadline_and_nobody_else_waits(
    stack: Stack,
) -> None:
    assert celbudget.judge(RUNAWAY) is None  # the estimate admits it: the webhook does too
    created = stack.create(cluster_body(stack.tenant, "burn", autoPatch=gated(stack.data, RUNAWAY)))
    assert created.returncode == 0, created.stderr
    pid = stack.operator.pid
    try:
        worker = wait_for("the check running in the worker", lambda: _worker(pid), timeout=180)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{stack.explain('burn')}") from None
    seen = time.monotonic()
    start = Sample.of(pid)
    burnt = 0.0

    # meanwhile another cluster's spec change is observed and written ...
    stack.kubectl("patch", "taloscluster", "steady", "-n", stack.tenant, "--type=merge",
                  "-p", json.dumps({"spec": {"autoPatch": {"suspended": True}}}))  # fmt: skip
    generation = stack.cluster("steady")["metadata"]["generation"]  # type: ignore[index]
    wait_for(
        "the steady cluster's status follows its spec while the check burns",
        lambda: (
            ((stack.cluster("steady") or {}).get("status") or {}).get("observedGeneration")
            == generation
        ),
        timeout=8,
    )
    fresh = time.monotonic() - seen
    # ... and a TalosOperation is admitted (the plan: a server-side dry run)
    operation = {
        "apiVersion": kinds.API_VERSION, "kind": "TalosOperation",
        "metadata": {"name": "by-nadia", "namespace": stack.tenant},
        "spec": {"clusterRef": {"name": "steady"}, "type": "talos", "version": "v1.14.5"},
    }  # fmt: skip
    planned = stack.kubectl("create", "--dry-run=server", "-f", "-",
                            input=json.dumps(operation), check=False)  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert not gone(worker), "the check ended before the others were asked"

    # the worker is killed at the deadline (after its start), and the CPU falls back
    def killed_yet() -> bool:
        nonlocal burnt
        burnt = max(burnt, cpu_seconds(worker))
        return gone(worker)

    wait_for("the worker killed", killed_yet, timeout=runner.HEALTH_TIMEOUT + 15)
    killed = time.monotonic() - seen
    during = Sample.of(pid)
    time.sleep(6)
    after = Sample.of(pid)
    own_during, _ = during.rate_since(start)
    own_after, kids_after = after.rate_since(during)
    # What a process that burns gets of this shared machine now: the yardstick for the
    # operator's own share (a thread that burns in the operator gets as much, and goes on).
    burning = burnt / killed
    print(
        f"cel budget: status fresh {fresh:.1f} s into the burn, worker killed "
        f"{killed:.1f} s after it was seen, having used {burnt:.1f} s of CPU "
        f"({burning:.2f} cores); operator {own_during:.2f} cores during, {own_after:.2f} "
        f"after, its children {kids_after:.2f} after"
    )
    assert burnt > 1.0, "the worker did not run the check"
    assert own_during < max(burning / 2, 0.05), (own_during, burning)
    assert own_after + kids_after < max(burning / 3, 0.02), (own_after, kids_after, burning)
    try:
        body = wait_for(
            "the burn's verdict",
            lambda: (
                b
                if "was stopped"
                in condition(b := stack.cluster("burn"), "AutoPatchReady").get("message", "")
                else None
            ),
            # the kill and the freshness are the bounds under test (above); the verdict is
            # the next status write, which a loaded machine delayed past 30 s in whole runs
            timeout=90,
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\n{stack.explain('burn')}") from None
    said = condition(body, "AutoPatchReady")
    assert said["reason"] == "HealthCheckFailed"
    assert said["status"] == "False"
    assert (
        f"was stopped: its evaluation took over {runner.HEALTH_TIMEOUT:.0f} s, and its "
        "process was killed" in said["message"]
    )
    assert "it is not evaluated again before" in said["message"]
    assert SECRET not in said["message"]
    # held: the next looks do not evaluate it again
    time.sleep(8)
    assert children(pid) == []


def test_sigterm_ends_the_operator_and_its_worker_during_a_burn(stack: Stack) -> None:
    """A new expression is evaluated at once (the hold is for the old one); SIGTERM then
    ends the process and its worker, well within the Pod's grace period."""
    changed = gated(stack.data, RUNAWAY + " && true")
    stack.kubectl("patch", "taloscluster", "burn", "-n", stack.tenant, "--type=merge",
                  "-p", json.dumps({"spec": {"autoPatch": changed}}))  # fmt: skip
    pid = stack.operator.pid
    worker = wait_for("the changed check running", lambda: _worker(pid), timeout=180)
    time.sleep(3)  # started, and into the evaluation (10 s)
    assert not gone(worker)
    began = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    try:
        code = stack.operator.wait(ichor_operator.EXIT_TIMEOUT + 10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"SIGTERM did not end the operator:\n{stack.log_text()[-4000:]}")
    took = time.monotonic() - began
    print(f"cel budget: SIGTERM ended the operator in {took:.1f} s (exit {code})")
    assert took < ichor_operator.EXIT_TIMEOUT, took
    wait_for("the worker gone with the operator", lambda: gone(worker), timeout=5)
