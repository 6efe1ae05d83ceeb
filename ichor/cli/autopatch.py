"""``ichor autopatch suspend|resume CLUSTER``: stop and restart a cluster's auto-patch.

Both write the TalosCluster itself (one merge patch, judged by the webhook like any
update; the status stays the operator's): ``suspend`` sets ``spec.autoPatch.suspended:
true``; ``resume`` sets it to false and, when auto-patch stopped after a failed
operation (``status.autoPatch.suspension``), the annotation ``ichor.dev/auto-patch-resume``
to that operation's name, which is how a person says "I looked at this failure". The
kubectl equivalents are printed in docs/autopatch.md.
"""

from __future__ import annotations

from typing import Any

import click

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
    patch: dict[str, Any] = {"spec": {"autoPatch": {"suspended": False}}}
    if suspension is not None:
        patch["metadata"] = {"annotations": {RESUME_ANNOTATION: suspension.operation}}
    kube.patch_cluster(target, cluster, patch)
    if suspension is not None:
        click.echo(
            f"{_what(target, cluster)}: auto-patch resumed after TalosOperation "
            f"{suspension.operation} ({suspension.component} {suspension.version}) failed; "
            "the next open window may start it again."
        )
    else:
        click.echo(f"{_what(target, cluster)}: auto-patch resumed.")
    if read.status.auto_patch is None:
        click.echo(
            "Note: auto-patch is not configured for this cluster (no components and windows "
            "on it or on the IchorInstallation), so it starts nothing either way.",
            err=True,
        )
