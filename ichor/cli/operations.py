"""``ichor operations [CLUSTER]`` and ``ichor logs OPERATION``: what ran, and what it said.

``operations`` lists the TalosOperations of a namespace (``-A``: every namespace), or of
one cluster, oldest first, in kubectl's columns; the message of one that did not succeed
follows the table. ``logs`` prints the log of an operation's Job Pod: each container's in
the order it ran, so a Talos Job shows its init containers one per node, control plane
first, then the versions it ended with. ``-c`` picks one container, ``--tail`` the last
lines. Both read the management cluster with the caller's own rights (``pods/log`` for
logs), and never the workload cluster's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from ichor.cli import common, completers, kube, output, views


@click.command()
@output.listing("Operations")
def operations(ctx: click.Context, cluster: str | None, all_namespaces: bool, fmt: str) -> None:
    """The TalosOperations of a namespace, or of one CLUSTER, newest last."""
    target = common.target(ctx)
    bodies = kube.list_operations(target, all_namespaces=all_namespaces)
    rows = views.operation_rows(bodies, cluster=cluster, now=datetime.now(UTC))
    if output.emitted(rows, fmt):
        return
    if not rows:
        where = "any namespace" if all_namespaces else f"namespace {target.namespace}"
        of = f" of TalosCluster {cluster}" if cluster else ""
        click.echo(f"No TalosOperations{of} found in {where}.")
        return
    header = ["NAME", "CLUSTER", "TYPE", "VERSION", "PHASE", "AGE"]
    cells = [[r.name, r.cluster, r.type, r.version or "-", r.phase, r.age] for r in rows]
    if all_namespaces:
        header.insert(0, "NAMESPACE")
        cells = [[row.namespace, *line] for row, line in zip(rows, cells, strict=True)]
    for line in output.columns(header, cells):
        click.echo(line)
    for row in rows:
        if row.message and row.phase != "Succeeded":
            click.echo(f"{row.namespace}/{row.name}: {row.message}")


def _containers(pod: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, what it is for, status) of each container of ``pod``, in the order they run."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    states = {
        s.get("name"): s
        for s in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
    }
    found = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        name = str(container.get("name", ""))
        node = next(
            (e.get("value") for e in container.get("env") or [] if e.get("name") == "ICHOR_NODE"),
            None,
        )
        found.append((name, f"Node {node}" if node else "", states.get(name) or {}))
    return found


def _state(status: dict[str, Any]) -> tuple[str, bool]:
    """A few words on a container's state, and whether it ever started (has a log)."""
    state = status.get("state") or {}
    if "terminated" in state:
        ended = state["terminated"] or {}
        return f"ended, exit code {ended.get('exitCode', '?')}", True
    if "running" in state:
        return "running", True
    waiting = (state.get("waiting") or {}).get("reason") or "waiting"
    return f"not started ({waiting})", bool(status.get("restartCount"))


@click.command()
@click.argument("operation", shell_complete=completers.operations)
@click.option("-c", "--container", help="Only this container's log (for example upgrade-000).")
@click.option("--tail", type=click.IntRange(min=0), help="Only the last lines of each log.")
@common.connection_options
@click.pass_context
def logs(ctx: click.Context, operation: str, container: str | None, tail: int | None) -> None:
    """The log of OPERATION's Job: each container's, in the order they ran."""
    target = common.target(ctx)
    body = kube.get_operation(target, operation)
    status = body.get("status") or {}
    job = status.get("jobName")
    what = f"TalosOperation {target.namespace}/{operation}"
    if not job:
        phase = status.get("phase") or "Pending"
        raise kube.CliError(f"{what} has no Job (it is {phase}), so there is no log to show")
    pods = kube.job_pods(target, str(job))
    if not pods:
        raise kube.CliError(
            f"Job {target.namespace}/{job} of {what} has no Pod any more (or not yet), so "
            "there is no log to show"
        )
    pod = pods[-1]
    pod_name = str(pod["metadata"]["name"])
    listed = _containers(pod)
    if container is not None:
        names = [name for name, _, _ in listed]
        if container not in names:
            raise click.BadParameter(
                f"Pod {pod_name} has no container {container!r}; it has {', '.join(names)}",
                param_hint="--container",
            )
        listed = [entry for entry in listed if entry[0] == container]
    for name, purpose, state in listed:
        words, started = _state(state)
        if container is None:
            about = f" ({purpose})" if purpose else ""
            click.echo(f"==> {pod_name} {name}{about}: {words} <==")
        if started:
            text = kube.pod_log(target, pod_name, name, tail=tail)
            click.echo(text, nl=not text.endswith("\n") and bool(text))
