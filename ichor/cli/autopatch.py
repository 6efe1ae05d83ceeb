"""``ichor autopatch suspend|resume CLUSTER``: stop and restart a cluster's auto-patch.

Both write the TalosCluster itself (one merge patch, judged by the webhook like any
update; the status stays the operator's): ``suspend`` sets ``spec.autoPatch.suspended:
true``; ``resume`` removes the cluster's own ``suspended`` (null, so the fleet's setting
decides again: a false would beat a fleet-wide suspension for ever) and, when auto-patch
stopped after a failed operation (``status.autoPatch.suspension``), sets the annotation
``ichor.dev/auto-patch-resume`` to that operation's name, which is how a person says "I
looked at this failure" (the operator then clears the suspension record). It says when
the fleet is still suspended. The kubectl equivalents are printed in docs/autopatch.md.
"""

from __future__ import annotations

from typing import Any

import click

from ichor.api import kinds
from ichor.api.autopatch import RESUME_ANNOTATION
from ichor.cli import common, kube, views


@click.group()
def autopatch() -> None:
    """Suspend or resume a cluster's unattended patch upgrades."""


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
