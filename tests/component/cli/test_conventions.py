"""The CLI as kubectl's habits expect it, against the real API server: tables whole in an
80-column terminal, ``--as``/``--as-group``, shell completion through click's protocol
and a real bash, ``kubectl ichor`` through kubectl's plugin discovery, ``ichor
operations``, ``ichor logs`` through the API server's log proxy, and exit 130 on Ctrl-C.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ichor.cli import views
from ichor.upgrade.rule import Component
from tests.component.cli.conftest import EDITOR_ROLE, HOLDER, OVERRIDE_ROLE, PLAIN, Cli
from tests.component.cli.test_upgrade import PINNED_STATE, _make
from tests.harness import binaries, controlplane
from tests.support import rbac
from tests.support.kubelet_logs import LogKubelet

pytestmark = pytest.mark.component

BIN = Path(sys.executable).parent
ICHOR = BIN / "ichor"


def _env(**extra: str) -> dict[str, str]:
    return controlplane.loopback_env({"PATH": f"{BIN}:{os.environ.get('PATH', '')}", **extra})


def _in_terminal(argv: list[str], *, columns: int, timeout: float = 60) -> tuple[int, str]:
    """Run ``argv`` with a terminal of ``columns`` columns as its stdout and stderr, as a
    person runs it; returns the exit code and what the terminal showed."""
    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = _env(TERM="xterm-256color")
    env.pop("COLUMNS", None)
    process = subprocess.Popen(argv, stdin=secondary, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(main, 65536)
            except OSError as error:  # EIO: the terminal's other end closed
                if error.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            shown += chunk
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(main)
        if process.poll() is None:
            process.kill()
    return code, shown.decode(errors="replace").replace("\r\n", "\n")


# --- the status table in a terminal ---------------------------------------------------------


def test_status_cuts_nothing_on_80_columns_and_shows_the_namespace_with_all(cli: Cli) -> None:
    """In a terminal of 80 columns ``prod`` stays ``prod`` and ``v1.13.4`` stays whole (a
    cut ``v1.13…`` reads as v1.13.10 too); 200 columns print the same lines; ``-A`` adds
    the NAMESPACE column, kubectl's first."""
    cli.cluster("prod", talos="v1.13.4", kubernetes="v1.35.5", contract="v1.13", cilium="1.19.10")
    cli.set_status(
        "prod",
        {
            "talosVersion": "v1.13.4",
            "kubernetesVersion": "v1.35.5",
            "upgradeChoices": {
                "talos": {"default": "v1.13.10", "available": True},
                "kubernetes": {"default": "v1.35.12", "available": True},
            },
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "Observing",
                    "message": "a message longer than any terminal is wide, " * 3,
                    "lastTransitionTime": "2026-12-03T08:00:00Z",
                }
            ],
        },
    )
    base = [str(ICHOR), "--kubeconfig", str(cli.configs["admin"]), "-n", cli.namespace, "status"]
    code, narrow = _in_terminal(base, columns=80)
    assert code == 0, narrow
    wide_code, wide = _in_terminal(base, columns=200)
    assert wide_code == 0, wide
    assert narrow == wide
    header, row, *rest = narrow.splitlines()
    assert header.split() == [
        "NAME", "TALOS", "KUBERNETES", "CILIUM", "COMPATIBLE", "TALOS-UPGRADE",
        "KUBERNETES-UPGRADE", "READY",
    ]  # fmt: skip
    assert row.split() == [
        "prod", "v1.13.4", "v1.35.5", "1.19.10", "Unknown", "v1.13.10", "v1.35.12", "False"
    ]  # fmt: skip
    assert "…" not in narrow
    message = ("a message longer than any terminal is wide, " * 3).strip()
    assert [line.rstrip() for line in rest] == [f"{cli.namespace}/prod: {message}"]
    every = [*base[:-1], "status", "-A"]
    code, listed = _in_terminal(every, columns=80)
    assert code == 0, listed
    header, *rows = listed.splitlines()
    assert header.split()[:2] == ["NAMESPACE", "NAME"]
    mine = [line for line in rows if line.startswith(cli.namespace + " ")]
    assert [line.split()[:3] for line in mine] == [[cli.namespace, "prod", "v1.13.4"]]
    _, also_wide = _in_terminal(every, columns=200)
    assert [line for line in also_wide.splitlines() if line.startswith(cli.namespace + " ")] == mine


# --- --as and --as-group --------------------------------------------------------------------


@pytest.fixture
def group_bindings(cli: Cli) -> Iterator[str]:
    """A group that may edit and override, bound for one test."""
    group = f"overriders-{uuid.uuid4().hex[:6]}"
    objects = []
    for role in (EDITOR_ROLE, OVERRIDE_ROLE):
        body = rbac.binding(role, [])
        body["metadata"]["name"] = f"{role}-{group}"
        body["subjects"] = [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}
        ]
        objects.append(body)
    manifest = yaml.safe_dump_all(objects)
    cli.plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield group
    finally:
        cli.plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


def test_as_asks_every_call_as_the_impersonated_user(
    cli: Cli, recorded: Any, group_bindings: str
) -> None:
    """The admin holds the override verb; ``--as nadia`` is judged as nadia, who does
    not; ``--as-group`` adds the groups kubectl would; and nadia, who may not
    impersonate, cannot borrow olivia's verb by naming her."""
    recorded()
    _make(cli, "prod", PINNED_STATE)
    args = ("upgrade", "kubernetes", "prod", "v1.37.2", "--override", "--dry-run")
    assert cli(*args).code == 0
    as_nadia = cli("--as", PLAIN, *args)
    assert as_nadia.code == 1
    assert "user 'nadia' does not hold the RBAC verb `override`" in as_nadia.err
    grace = f"grace-{uuid.uuid4().hex[:4]}"
    alone = cli(*args, "--as", grace)
    assert alone.code == 1
    assert f'User "{grace}" cannot get resource "talosclusters"' in alone.err
    grouped = cli(*args, "--as", grace, "--as-group", group_bindings)
    assert grouped.code == 0, grouped.err
    assert f"Warning: override by {grace}" in grouped.err
    borrowed = cli("--as", HOLDER, *args, user=PLAIN)
    assert borrowed.code == 1
    # 1.37 words it for its constrained impersonation ("cannot impersonate-on:...")
    assert 'User "nadia" cannot impersonate' in borrowed.err
    assert len(borrowed.err.strip().splitlines()) == 1
    assert cli.operations() == []


def test_a_kubeconfig_that_says_as_acts_as_that_user_not_as_its_credentials(
    cli: Cli, recorded: Any
) -> None:
    """kubectl reads a kubeconfig user's ``as:``; the Python client alone ignores it, so
    such a kubeconfig (the admin's certificate, ``as: nadia``) made ichor act as the
    admin, with the override verb nadia does not hold."""
    recorded()
    _make(cli, "prod", PINNED_STATE)
    as_nadia = cli.plane.user_kubeconfig(PLAIN, impersonate=True)
    assert "as: nadia" in as_nadia.read_text()
    kubectl = cli.plane.kubectl(
        "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}", kubeconfig=as_nadia
    )
    assert kubectl.stdout == PLAIN
    argv = ["--kubeconfig", str(as_nadia), "-n", cli.namespace, "upgrade", "kubernetes"]
    result = main_result(cli, [*argv, "prod", "v1.37.2", "--override", "--dry-run"])
    assert result.code == 1
    assert "user 'nadia' does not hold the RBAC verb `override`" in result.err
    # --as on the command line wins over the kubeconfig's, as in kubectl
    holder = main_result(cli, [*argv, "prod", "v1.37.2", "--override", "--dry-run", "--as", HOLDER])
    assert holder.code == 0, holder.err


def main_result(cli: Cli, argv: list[str]) -> Any:
    """``ichor`` with exactly ``argv`` (no kubeconfig of the fixture's)."""
    from ichor.cli.main import main
    from tests.component.cli.conftest import Result

    cli.capsys.readouterr()
    code = main(argv)
    captured = cli.capsys.readouterr()
    return Result(code=code, out=captured.out, err=captured.err)


# --- completion -----------------------------------------------------------------------------


def _complete(
    cli: Cli, words: list[str], *, program: Path = ICHOR, variable: str = "_ICHOR_COMPLETE"
) -> list[str]:
    """What click's completion protocol answers for ``words`` (the last one incomplete),
    as the shell script calls it."""
    line = [program.name, "--kubeconfig", str(cli.configs["admin"]), "-n", cli.namespace, *words]
    result = subprocess.run(
        [str(program)],
        env=_env(
            **{
                variable: "bash_complete",
                "COMP_WORDS": " ".join(line),
                "COMP_CWORD": str(len(line) - 1),
            }
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return [
        entry.split(",", 1)[1] for entry in result.stdout.splitlines() if entry.startswith("plain,")
    ]


def test_completion_offers_cluster_names_and_the_versions_the_rules_offer(
    cli: Cli, recorded: Any
) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    _make(cli, "preview", PINNED_STATE)
    _make(cli, "edge", PINNED_STATE)
    assert _complete(cli, ["upgrade", "talos", ""]) == ["edge", "preview", "prod"]
    assert _complete(cli, ["status", "pr"]) == ["preview", "prod"]
    offered = _complete(cli, ["upgrade", "kubernetes", "prod", ""])
    body = cli.get("taloscluster", "prod")
    installation = cli.plane.kubectl("get", "ichorinstallation", "ichor", "-o", "json")
    listed = views.choice_list(
        views.Cluster.of(body),
        Component.KUBERNETES,
        views.release_list(json.loads(installation.stdout), Component.KUBERNETES),
    )
    default = listed.choices.default
    assert default is not None
    assert offered[0] == default.tag
    expected = {v.tag for v in (*listed.choices.patch, *listed.choices.next_minor)}
    assert set(offered) == expected | {default.tag}
    assert "v1.37.2" not in offered  # refused by the rules: not offered
    assert _complete(cli, ["upgrade", "talos", "prod", "v1.14.4"]) == ["v1.14.4"]


def test_completion_of_a_cluster_it_cannot_read_completes_nothing_silently(cli: Cli) -> None:
    line_words = ["upgrade", "talos", "nothere", ""]
    assert _complete(cli, line_words) == []


def test_the_bash_script_completes_in_a_real_bash(cli: Cli) -> None:
    _make(cli, "prod", PINNED_STATE)
    script = subprocess.run(
        [str(ICHOR), "completion", "bash"], capture_output=True, text=True, check=True, env=_env()
    ).stdout
    assert "_ICHOR_COMPLETE=bash_complete" in script
    words = [
        "ichor",
        "--kubeconfig",
        str(cli.configs["admin"]),
        "-n",
        cli.namespace,
        "upgrade",
        "talos",
        "p",
    ]
    probe = (
        script
        + "\nCOMP_WORDS=(" + " ".join(words) + ")\n"
        + f"COMP_CWORD={len(words) - 1}\n"
        + "_ichor_completion ichor p talos\n"
        + 'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )  # fmt: skip
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", probe],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["prod"]
    for shell in ("zsh", "fish"):
        other = subprocess.run(
            [str(ICHOR), "completion", shell],
            capture_output=True,
            text=True,
            env=_env(),
            check=True,
        )
        assert "_ICHOR_COMPLETE" in other.stdout
    refused = subprocess.run(
        [str(ICHOR), "completion", "powershell"],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    assert refused.returncode == 2


# --- kubectl ichor ----------------------------------------------------------------------------


def test_kubectl_finds_the_plugin_and_runs_it_as_kubectl_ichor(cli: Cli) -> None:
    _make(cli, "prod", PINNED_STATE)
    kubectl = binaries.find("kubectl")
    path = f"{BIN}:{kubectl.parent}:/usr/bin:/bin"
    env = controlplane.loopback_env({"PATH": path, "KUBECONFIG": str(cli.configs["admin"])})
    listed = subprocess.run(
        [str(kubectl), "plugin", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert str(BIN / "kubectl-ichor") in listed.stdout, listed.stdout + listed.stderr
    status = subprocess.run(
        [str(kubectl), "ichor", "status", "-n", cli.namespace],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[1].split()[:2] == ["prod", "v1.14.3"]
    usage = subprocess.run(
        [str(kubectl), "ichor", "upgrade", "talos"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert usage.returncode == 2
    assert "Usage: kubectl ichor upgrade talos" in usage.stderr
    completed = subprocess.run(
        [str(kubectl), "__complete", "ichor", "-n", cli.namespace, "upgrade", "talos", "p"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[0] == "prod", completed.stdout


# --- operations and logs --------------------------------------------------------------------


def _operation(cli: Cli, cluster: str, version: str) -> str:
    result = cli("upgrade", "talos", cluster, version)
    assert result.code == 0, result.err
    return result.out.split("TalosOperation ", 1)[1].split(" ", 1)[0].split("/", 1)[1]


def test_operations_lists_what_ran_in_kubectls_columns(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    _make(cli, "edge", PINNED_STATE)
    first = _operation(cli, "prod", "v1.14.4")
    cli.set_status(
        first,
        {"phase": "Failed", "message": "talosctl upgrade of cp-1 ended with 1", "jobName": "j1"},
        plural="talosoperations",
    )
    time.sleep(1.1)  # creation times are whole seconds: the second is newer
    second = _operation(cli, "edge", "v1.14.5")
    table = cli("operations")
    assert table.code == 0, table.err
    header, *rows = table.out.splitlines()
    assert header.split() == ["NAME", "CLUSTER", "TYPE", "VERSION", "PHASE", "AGE"]
    assert [row.split()[:5] for row in rows[:2]] == [
        [first, "prod", "talos", "v1.14.4", "Failed"],
        [second, "edge", "talos", "v1.14.5", "Pending"],
    ]
    assert rows[2] == f"{cli.namespace}/{first}: talosctl upgrade of cp-1 ended with 1"
    only = cli("operations", "edge")
    assert [row.split()[0] for row in only.out.splitlines()[1:]] == [second]
    listed = cli("operations", "-A", "-o", "json").json
    mine = [o for o in listed if o["namespace"] == cli.namespace]
    assert [(o["name"], o["phase"], o["job"]) for o in mine] == [
        (first, "Failed", "j1"),
        (second, "Pending", None),
    ]
    everywhere = cli("operations", "-A")
    assert everywhere.out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert cli("operations", "nothere").out.strip() == (
        f"No TalosOperations of TalosCluster nothere found in namespace {cli.namespace}."
    )


@pytest.fixture(scope="module")
def kubelet(control_plane: controlplane.ControlPlane) -> Iterator[tuple[LogKubelet, str]]:
    """A stand-in kubelet the API server reads Pod logs from, and its Node's name."""
    stand_in = LogKubelet()
    name = f"log-kubelet-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(stand_in.node_body(name)))
    control_plane.kubectl(
        "patch", "node", name, "--subresource=status", "--type=merge",
        "-p", json.dumps(stand_in.node_status()),
    )  # fmt: skip
    try:
        yield stand_in, name
    finally:
        control_plane.kubectl("delete", "node", name, "--wait=false", check=False)
        stand_in.stop()


def _terminated(name: str, code: int) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "image": "talosctl",
        "imageID": "",
        "state": {"terminated": {"exitCode": code, "reason": "Completed"}},
    }


def test_logs_prints_each_containers_log_in_the_order_they_ran(
    cli: Cli, recorded: Any, kubelet: tuple[LogKubelet, str]
) -> None:
    """A Talos Job's Pod: one init container per node, control plane first, then the
    versions; the second node failed, so the versions never started. Read through the
    API server's log proxy, as the caller (who needs pods/log)."""
    stand_in, node = kubelet
    recorded()
    _make(cli, "prod", PINNED_STATE)
    operation = _operation(cli, "prod", "v1.14.5")
    job = f"ichor-talos-{operation}"[:63]
    cli.set_status(operation, {"phase": "Failed", "jobName": job}, plural="talosoperations")
    pod = f"{job[:50]}-abcde"
    containers = [
        {
            "name": "upgrade-000",
            "image": "talosctl",
            "env": [{"name": "ICHOR_NODE", "value": "cp-1"}],
        },
        {
            "name": "upgrade-001",
            "image": "talosctl",
            "env": [{"name": "ICHOR_NODE", "value": "w-1"}],
        },
    ]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "namespace": cli.namespace, "labels": {"job-name": job}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "initContainers": containers,
            "containers": [{"name": "versions", "image": "talosctl"}],
        },
    }
    cli.plane.kubectl("create", "-f", "-", input=json.dumps(body))
    cli.plane.kubectl(
        "patch", "pod", pod, "-n", cli.namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {
            "phase": "Failed",
            "initContainerStatuses": [_terminated("upgrade-000", 0), _terminated("upgrade-001", 1)],
            "containerStatuses": [{
                "name": "versions", "ready": False, "restartCount": 0, "image": "talosctl",
                "imageID": "", "state": {"waiting": {"reason": "PodInitializing"}},
            }],
        }}),
    )  # fmt: skip
    stand_in.logs[(cli.namespace, pod, "upgrade-000")] = "watching cp-1\ncp-1 upgraded\n"
    # a log line that is JSON stays as it was written
    stand_in.logs[(cli.namespace, pod, "upgrade-001")] = '{"error": "w-1 did not boot"}\n'
    result = cli("logs", operation)
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        f"==> {pod} upgrade-000 (Node cp-1): ended, exit code 0 <==",
        "watching cp-1",
        "cp-1 upgraded",
        f"==> {pod} upgrade-001 (Node w-1): ended, exit code 1 <==",
        '{"error": "w-1 did not boot"}',
        f"==> {pod} versions: not started (PodInitializing) <==",
    ]
    one = cli("logs", operation, "-c", "upgrade-000", "--tail", "1")
    assert one.out == "cp-1 upgraded\n"
    wrong = cli("logs", operation, "-c", "helm")
    assert wrong.code == 2
    assert "has no container 'helm'; it has upgrade-000, upgrade-001, versions" in wrong.err
    denied = cli("logs", operation, user=PLAIN)
    assert denied.code == 1
    assert denied.err.startswith(f"Error: listing the Pods of Job {cli.namespace}/{job} failed:")
    assert 'User "nadia" cannot list resource "pods"' in denied.err


def test_logs_of_an_operation_without_a_job_says_why_there_is_none(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    operation = _operation(cli, "prod", "v1.14.5")
    result = cli("logs", operation)
    assert result.code == 1
    assert result.err.strip() == (
        f"Error: TalosOperation {cli.namespace}/{operation} has no Job (it is Pending), so "
        "there is no log to show"
    )
    missing = cli("logs", "nothere")
    assert missing.code == 1
    assert f"TalosOperation {cli.namespace}/nothere does not exist" in missing.err


# --- Ctrl-C -----------------------------------------------------------------------------------


def test_ctrl_c_while_waiting_exits_130_and_the_operation_goes_on(cli: Cli, recorded: Any) -> None:
    recorded()
    _make(cli, "prod", PINNED_STATE)
    argv = [
        str(ICHOR), "--kubeconfig", str(cli.configs["admin"]), "-n", cli.namespace,
        "upgrade", "talos", "prod", "v1.14.5", "--wait", "--timeout", "5m",
    ]  # fmt: skip
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        # a test run started in the background of a shell without job control inherits
        # SIGINT ignored, and so would the CLI; a terminal's Ctrl-C meets the default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "created" in line, line
        # the first phase the loop prints: it is following now, whatever the load
        phase = process.stdout.readline()
        assert phase.strip().startswith("Pending"), phase
        assert process.poll() is None, "the command ended before it was interrupted"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "Stopped following TalosOperation" in err
    assert "it goes on" in err
    assert "Traceback" not in err
    [operation] = cli.operations()
    assert operation["metadata"].get("deletionTimestamp") is None
