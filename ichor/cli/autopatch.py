"""``ichor autopatch suspend|resume CLUSTER``: stop and restart a cluster's auto-patch;
``ichor autopatch unhalt COMPONENT VERSION | --all``: lift the fleet's halts early.

``suspend`` and ``resume`` write the TalosCluster's spec with one merge patch (``resume``
also names the failed operation it looked at, ``ichor.dev/auto-patch-resume``).
``unhalt`` annotates the IchorInstallation (``ichor.dev/unhalt``), waits for the operator
to lift the halts, and says what was lifted.

More in docs/design/notes.md, "ichor/cli/autopatch.py".
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import click

from ichor.api import kinds
from ichor.api.autopatch import (
    RESUME_ANNOTATION,
    UNHALT_ALL,
    UNHALT_ANNOTATION,
    Halt,
    HaltScope,
    Unhalt,
    parse_unhalt,
)
from ichor.api.ichorinstallation import read_status
from ichor.cli import common, kube, views

#: Seconds ``unhalt`` waits for the operator to lift the halt.
UNHALT_WAIT = 30.0


@click.group()
def autopatch() -> None:
    """Suspend or resume a cluster's unattended patch upgrades; lift a halt."""


def _what(target: kube.Target, name: str) -> str:
    return f"TalosCluster {target.namespace}/{name}"


@autopatch.command()
@click.argument("cluster")
@common.connection_options
@click.pass_context
def suspend(ctx: click.Context, cluster: str) -> None:
    """Start nothing new for CLUSTER (a running operation goes on)."""
    target = common.target(ctx)
    kube.get_cluster(target, cluster)
    kube.patch_cluster(target, cluster, {"spec": {"autoPatch": {"suspended": True}}})
    click.echo(
        f"{_what(target, cluster)}: auto-patch suspended; a running operation goes on. "
        f"Resume with: ichor autopatch resume {cluster} -n {target.namespace}"
    )


@autopatch.command()
@click.argument("cluster")
@common.connection_options
@click.pass_context
def resume(ctx: click.Context, cluster: str) -> None:
    """Let CLUSTER's auto-patch start again, after a suspend or a failed patch."""
    target = common.target(ctx)
    body = kube.get_cluster(target, cluster)
    try:
        read = views.Cluster.of(body)
    except ValueError as error:
        raise kube.CliError(str(error)) from None
    suspension = read.status.auto_patch.suspension if read.status.auto_patch else None
    own = (body.get("spec") or {}).get("autoPatch") or {}
    patch: dict[str, Any] = {}
    if "suspended" in own:
        # null removes the cluster's own setting: a false would beat the fleet's
        # suspended: true for ever, so the fleet could not stop this cluster any more
        patch["spec"] = {"autoPatch": {"suspended": None}}
    if suspension is not None:
        patch["metadata"] = {"annotations": {RESUME_ANNOTATION: suspension.operation}}
    if patch:
        kube.patch_cluster(target, cluster, patch)
    if suspension is not None:
        click.echo(
            f"{_what(target, cluster)}: auto-patch resumed after TalosOperation "
            f"{suspension.operation} ({suspension.component} {suspension.version}) failed; "
            "the next open window may start it again."
        )
    elif patch:
        click.echo(f"{_what(target, cluster)}: auto-patch resumed.")
    else:
        click.echo(f"{_what(target, cluster)}: auto-patch was not suspended for this cluster.")
    if _fleet_suspended(target):
        unsuspend = """'{"spec":{"autoPatch":{"suspended":false}}}'"""
        click.echo(
            "Note: the fleet's auto-patch is suspended (IchorInstallation "
            f"{kinds.INSTALLATION_NAME}: spec.autoPatch.suspended is true), so this cluster "
            "starts nothing until the fleet is resumed: kubectl patch ichorinstallation "
            f"{kinds.INSTALLATION_NAME} --type=merge -p {unsuspend}. To patch this cluster "
            f"alone meanwhile: kubectl patch taloscluster {cluster} -n {target.namespace} "
            f"--type=merge -p {unsuspend}"
        )
    if read.status.auto_patch is None:
        click.echo(
            "Note: auto-patch is not configured for this cluster (no components and windows "
            "on it or on the IchorInstallation), so it starts nothing either way.",
            err=True,
        )


def _fleet_suspended(target: kube.Target) -> bool:
    """Whether the IchorInstallation suspends auto-patch fleet-wide (False when it cannot
    be read: a person who may resume a cluster need not read the installation)."""
    try:
        installation = kube.get_installation(target)
    except (kube.CliError, kube.Denied):
        return False
    spec = (installation or {}).get("spec") or {}
    return (spec.get("autoPatch") or {}).get("suspended") is True


def _halts(installation: dict[str, Any] | None) -> tuple[Halt, ...]:
    record = read_status((installation or {}).get("status")).auto_patch
    return record.halts if record is not None else ()


def _in_force(installation: dict[str, Any] | None, request: Unhalt) -> list[Halt]:
    now = datetime.now(UTC)
    return [
        h for h in _halts(installation) if request.matches(h) and h.until > now and not h.lifted_by
    ]


def _describe(halt: Halt) -> str:
    whose = "the fleet" if halt.scope is HaltScope.FLEET else f"namespace {halt.namespace}"
    until = halt.until.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{halt.component} {halt.version} (failed on {halt.cluster}, TalosOperation "
        f"{halt.operation}; held {whose} until {until})"
    )


@autopatch.command()
@click.argument("component", required=False)
@click.argument("version", required=False)
@click.option("--all", "everything", is_flag=True, help="Lift every halt in force.")
@click.option(
    "--wait/--no-wait",
    default=True,
    help=f"Wait up to {UNHALT_WAIT:.0f} s for the operator to lift it (default).",
)
@common.connection_options
@click.pass_context
def unhalt(
    ctx: click.Context, component: str | None, version: str | None, everything: bool, wait: bool
) -> None:
    """Lift the fleet's halt of COMPONENT VERSION (talos|kubernetes vX.Y.Z), or --all.

    Needs the verb update on the IchorInstallation; recorded as an Event naming you."""
    request = _unhalt_request(component, version, everything=everything)
    target = common.target(ctx)
    installation = kube.get_installation(target)
    if installation is None:
        raise kube.CliError(
            f"there is no IchorInstallation named {kinds.INSTALLATION_NAME}, so nothing is halted"
        )
    halted = _in_force(installation, request)
    what = "every halt" if request.everything else f"the halt of {component} {version}"
    of = "" if request.everything else f" of {component} {version}"
    if not halted:
        click.echo(f"No auto-patch halt{of} is in force: nothing to lift.")
        return
    kube.annotate_installation(target, UNHALT_ANNOTATION, str(request))
    if not wait:
        click.echo(
            f"Asked the operator to lift {what}: {'; '.join(_describe(h) for h in halted)}; "
            f"it posts an Event on IchorInstallation {kinds.INSTALLATION_NAME} naming you."
        )
        return
    click.echo(_lifted(_acted_on(target, what=what), halted, what=what, of=of))


def _unhalt_request(component: str | None, version: str | None, *, everything: bool) -> Unhalt:
    """The request ``unhalt``'s arguments make, or a usage error: COMPONENT VERSION or
    --all, never both nor neither."""
    if everything == bool(component or version):
        raise click.UsageError("name COMPONENT VERSION (kubernetes v1.36.7), or --all")
    value = UNHALT_ALL if everything else f"{component}/{version}"
    try:
        return parse_unhalt(value)
    except ValueError as error:
        raise click.UsageError(str(error)) from None


def _acted_on(target: kube.Target, *, what: str) -> dict[str, Any] | None:
    """The IchorInstallation once the operator removed the request annotation, within
    ``UNHALT_WAIT`` seconds; else the error that says the request stays."""
    deadline = time.monotonic() + UNHALT_WAIT
    while True:
        now = kube.get_installation(target)
        pending = (((now or {}).get("metadata") or {}).get("annotations") or {}).get(
            UNHALT_ANNOTATION
        )
        if pending is None:
            return now
        if time.monotonic() >= deadline:
            raise kube.CliError(
                f"asked to lift {what}, but the operator has not acted within "
                f"{UNHALT_WAIT:.0f} s (is it running?); the request stays on IchorInstallation "
                f"{kinds.INSTALLATION_NAME} ({UNHALT_ANNOTATION}) and is acted on when it runs"
            )
        time.sleep(0.5)


def _lifted(now: dict[str, Any] | None, halted: list[Halt], *, what: str, of: str) -> str:
    """The sentence for the halts the operator lifted, of those that were in force."""
    ids = {h.operation for h in halted}
    lifted = [h for h in _halts(now) if h.operation in ids and h.lifted_by]
    if not lifted:
        return f"No auto-patch halt{of} was in force any more: nothing was lifted."
    return (
        f"Lifted {what}: {'; '.join(_describe(h) for h in lifted)}; lifted by "
        f"{lifted[0].lifted_by}, recorded as an Event on IchorInstallation "
        f"{kinds.INSTALLATION_NAME}. Those versions may start in the next open window."
    )
