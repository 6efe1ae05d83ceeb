"""``ichor upgrade talos|kubernetes|plan`` and ``ichor cni upgrade``.

An upgrade is a TalosOperation. The CLI checks only that a VERSION is a semantic
version; the rules answer through the server's plan, a dry-run create of the operation
that the admission webhook judges with the same target rule as the executors. A refusal
is printed with its reason and, when the server says an override would pass it, the hint
to rerun with ``--override`` (which needs the RBAC verb). Without VERSION the default
choice is used (``ichor.upgrade.choices``); ``--list`` prints the choices and what is not
offered, and why. There is no ``ichor upgrade cluster``: each component upgrades on its own.
"""

from __future__ import annotations

import time
from typing import Any

import click

from ichor.api import kinds
from ichor.api.talosoperation import OperationType, Phase
from ichor.cli import common, completers, kube, output, params, views
from ichor.release.release_set import PINNED
from ichor.upgrade.rule import Component

OVERRIDE_HINT = (
    "Rerun with --override to pass this refusal; that needs the RBAC verb `override` on "
    "talosclusters.ichor.dev for this cluster (check: kubectl auth can-i override "
    "talosclusters.ichor.dev/{cluster} -n {namespace})."
)
POLL_SECONDS = 0.5
_END = {Phase.SUCCEEDED.value, Phase.FAILED.value}


def operation_body(
    cluster: str, *, type_: OperationType, version: str | None, override: bool
) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterRef": {"name": cluster}, "type": type_.value}
    if version is not None:
        spec["version"] = version
    if override:
        spec["override"] = True
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_OPERATION.value,
        "metadata": {"generateName": f"{cluster}-{type_.value}-"},
        "spec": spec,
    }


def _what(type_: OperationType, version: str | None) -> str:
    if type_ is OperationType.CNI:
        return f"Cilium to {PINNED.cilium_chart} (the chart this Ichor embeds)"
    name = "Talos" if type_ is OperationType.TALOS else "Kubernetes"
    return f"{name} to {version}"


def _create(
    target: kube.Target, cluster: str, body: dict[str, Any], *, dry_run: bool, override: bool
) -> tuple[dict[str, Any], list[str]]:
    try:
        return kube.create(target, kinds.Plural.TALOS_OPERATIONS, body, dry_run=dry_run)
    except kube.Denied as denial:
        message, hint = denial.message, None
        if denial.overridable and not override:
            # The webhook words the hint for a TalosOperation's spec; say it as a flag.
            message = message.split(f" Setting {kinds.OVERRIDE_WOULD_PASS_WORDS}", 1)[0]
            hint = OVERRIDE_HINT.format(cluster=cluster, namespace=target.namespace)
        common.refused(message, hint=hint)


def start_operation(
    ctx: click.Context,
    *,
    cluster: str,
    type_: OperationType,
    version: str | None,
    override: bool,
    dry_run: bool,
    wait: bool,
    timeout: float,
) -> None:
    """Plan (dry-run create), then create and optionally follow one operation."""
    target = common.target(ctx)
    kube.get_cluster(target, cluster)
    body = operation_body(cluster, type_=type_, version=version, override=override)
    what = _what(type_, version)
    _, plan_warnings = _create(target, cluster, body, dry_run=True, override=override)
    if dry_run:
        for warning in plan_warnings:
            common.warn(warning)
        click.echo(
            f"Plan accepted: {what} for TalosCluster {target.namespace}/{cluster}. "
            "Dry run: nothing was created."
        )
        return
    created, warnings = _create(target, cluster, body, dry_run=False, override=override)
    for warning in warnings:
        common.warn(warning)
    name = str((created.get("metadata") or {}).get("name", "?"))
    click.echo(f"TalosOperation {target.namespace}/{name} created: {what}.")
    if not wait:
        click.echo(
            f"Follow it with: kubectl get talosoperation {name} -n {target.namespace} -w "
            "(or pass --wait)."
        )
        return
    follow(target, name, timeout=timeout)


def _progress(body: dict[str, Any]) -> tuple[str, str]:
    status = body.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    message = str(status.get("message") or "")
    if not message:
        for condition in status.get("conditions") or []:
            if condition.get("message") and condition.get("status") != "True":
                message = str(condition["message"])
    return phase, message


def follow(target: kube.Target, name: str, *, timeout: float) -> None:
    """Show the operation's phases until it ends; exit 1 when it fails or times out.
    Ctrl-C stops the following, never the operation: it says so and exits 130."""
    try:
        _follow(target, name, timeout=timeout)
    except KeyboardInterrupt:
        click.echo(
            f"\nStopped following TalosOperation {target.namespace}/{name}; it goes on "
            f"(ichor operations -n {target.namespace}, ichor logs {name}).",
            err=True,
        )
        raise


def _follow(target: kube.Target, name: str, *, timeout: float) -> None:
    out = output.console()
    deadline = time.monotonic() + timeout
    seen: tuple[str, str] | None = None

    def read() -> dict[str, Any] | None:
        return kube.find_own(target, kinds.Kind.TALOS_OPERATION, name)

    with out.status(f"Following TalosOperation {target.namespace}/{name}...") as spinner:
        while True:
            body = read()
            if body is None:
                raise kube.CliError(
                    f"TalosOperation {target.namespace}/{name} was deleted before it ended"
                )
            phase, message = _progress(body)
            if (phase, message) != seen:
                seen = (phase, message)
                out.print(f"  {phase}" + (f": {message}" if message else ""), soft_wrap=True)
                spinner.update(f"TalosOperation {target.namespace}/{name}: {phase}")
            if phase in _END:
                break
            if time.monotonic() > deadline:
                raise kube.CliError(
                    f"TalosOperation {target.namespace}/{name} is still {phase} after "
                    f"{params.format_duration(timeout)}; it goes on "
                    f"(kubectl get talosoperation {name} -w)"
                )
            time.sleep(POLL_SECONDS)
    if phase == Phase.FAILED.value:
        click.echo(f"TalosOperation {target.namespace}/{name} Failed.", err=True)
        raise SystemExit(common.EXIT_REFUSED)
    click.echo(f"TalosOperation {target.namespace}/{name} Succeeded.")


def _choices(
    target: kube.Target, cluster: str, component: Component
) -> tuple[views.Cluster, views.ChoiceList]:
    seen = _read_cluster(target, cluster)
    installation = kube.get_installation(target)
    releases = views.release_list(installation, component)
    return seen, views.choice_list(
        seen, component, releases, policy=views.site_policy(installation)
    )


def _read_cluster(target: kube.Target, name: str) -> views.Cluster:
    """The TalosCluster ``name`` as the CLI reads it; one the model cannot read is a
    CliError with the model's sentence."""
    body = kube.get_cluster(target, name)
    try:
        return views.Cluster.of(body)
    except ValueError as error:
        raise kube.CliError(str(error)) from None


def _form(version: str, *, hint: str = "VERSION") -> str:
    """VERSION's semantic-version form only; the rules are the server's."""
    return params.version_form(version, hint=hint)


_WAIT = click.option("--wait", is_flag=True, help="Follow the operation until it ends.")
_TIMEOUT = click.option(
    "--timeout",
    type=params.DURATION,
    default="30m",
    show_default=True,
    help="How long --wait follows the operation: a duration (90s, 30m, 1h30m).",
)
_OVERRIDE = click.option(
    "--override",
    is_flag=True,
    help="Pass a compatibility refusal (needs the RBAC verb override; recorded as an Event).",
)
_DRY_RUN = click.option("--dry-run", is_flag=True, help="Ask the server's plan only.")


def _component_command(component: Component) -> click.Command:
    name = output.NAMES[component]
    type_ = OperationType(component.value)

    @click.command(name=component.value)
    @click.argument("cluster", shell_complete=completers.clusters)
    @click.argument("version", required=False, shell_complete=completers.versions)
    @click.option(
        "--list", "list_", is_flag=True, help="Print the choices and what is not offered."
    )
    @_OVERRIDE
    @_DRY_RUN
    @_WAIT
    @_TIMEOUT
    @output.OUTPUT_OPTION
    @common.connection_options
    @click.pass_context
    def command(
        ctx: click.Context,
        cluster: str,
        version: str | None,
        list_: bool,
        override: bool,
        dry_run: bool,
        wait: bool,
        timeout: float,
        fmt: str,
    ) -> None:
        if list_ and version is not None:
            raise click.UsageError("--list takes no VERSION")
        if version is not None:
            version = _form(version)  # a usage error comes before any call
        target = common.target(ctx)
        if list_:
            _, view = _choices(target, cluster, component)
            if fmt != output.Format.TABLE:
                output.emit(view.to_json(), fmt)
            else:
                output.choice_list(view)
            return
        if version is None:
            _, view = _choices(target, cluster, component)
            if not view.availability.available:
                common.refused(
                    f"no VERSION given, and the {name} release list is unavailable: "
                    f"{view.availability.reason}; give a VERSION."
                )
            if view.choices.default is None:
                common.refused(
                    f"no VERSION given, and no recorded {name} release passes the upgrade "
                    f"rules for {target.namespace}/{cluster}; "
                    f"`ichor upgrade {component.value} {cluster} --list` says why."
                )
            version = view.choices.default.tag
            click.echo(f"No VERSION given: the default choice is {name} {version}.")
        start_operation(
            ctx,
            cluster=cluster,
            type_=type_,
            version=version,
            override=override,
            dry_run=dry_run,
            wait=wait,
            timeout=timeout,
        )

    command.help = (
        f"Upgrade {name} of CLUSTER to VERSION (default: the default choice).\n\n"
        f"VERSION is checked for its form here; the server's plan applies the rules."
    )
    return command


@click.group()
def upgrade() -> None:
    """Upgrade one component of a cluster: talos, kubernetes; or plan the path."""


upgrade.add_command(_component_command(Component.TALOS))
upgrade.add_command(_component_command(Component.KUBERNETES))


@upgrade.command(name="plan")
@click.argument("cluster", shell_complete=completers.clusters)
@click.option("--talos", "talos_goal", help="Talos goal (default: the newest recorded).")
@click.option("--kubernetes", "kubernetes_goal", help="Kubernetes goal (default: the newest).")
@output.OUTPUT_OPTION
@common.connection_options
@click.pass_context
def plan_command(
    ctx: click.Context,
    cluster: str,
    talos_goal: str | None,
    kubernetes_goal: str | None,
    fmt: str,
) -> None:
    """The shortest ordered list of upgrades to a goal; runs nothing."""
    for given, hint in ((talos_goal, "--talos"), (kubernetes_goal, "--kubernetes")):
        if given is not None:
            _form(given, hint=hint)
    target = common.target(ctx)
    seen = _read_cluster(target, cluster)
    installation = kube.get_installation(target)
    result = views.path_plan(
        seen,
        talos=views.release_list(installation, Component.TALOS),
        kubernetes=views.release_list(installation, Component.KUBERNETES),
        policy=views.site_policy(installation),
        talos_goal=_form(talos_goal, hint="--talos") if talos_goal else None,
        kubernetes_goal=_form(kubernetes_goal, hint="--kubernetes") if kubernetes_goal else None,
    )
    if fmt != output.Format.TABLE:
        output.emit(views.plan_json(result), fmt)
    else:
        output.path_plan(result, cluster=f"{target.namespace}/{cluster}")
    # A goal the rules do not reach is a refusal, the newest releases' too (the default
    # goal): a script that runs the steps only on success must not run half a path.
    if not result.reachable:
        raise SystemExit(common.EXIT_REFUSED)


@upgrade.command(name="cluster", hidden=True, context_settings={"ignore_unknown_options": True})
@click.argument("ignored", nargs=-1, type=click.UNPROCESSED)
def removed_cluster(ignored: tuple[str, ...]) -> None:
    """Removed: each component upgrades on its own (docs/design/decisions.md)."""
    del ignored
    raise click.UsageError(
        "ichor upgrade cluster was removed: each component upgrades on its own "
        "(ichor upgrade talos, ichor upgrade kubernetes, ichor cni upgrade); "
        "ichor upgrade plan CLUSTER gives the order."
    )


@click.group()
def cni() -> None:
    """The cluster's CNI: Cilium, moved only to the chart this Ichor embeds."""


@cni.command(name="upgrade", context_settings={"allow_extra_args": True})
@click.argument("cluster", shell_complete=completers.clusters)
@_OVERRIDE
@_DRY_RUN
@_WAIT
@_TIMEOUT
@common.connection_options
@click.pass_context
def cni_upgrade(
    ctx: click.Context,
    cluster: str,
    override: bool,
    dry_run: bool,
    wait: bool,
    timeout: float,
) -> None:
    """Upgrade Cilium of CLUSTER to the chart this Ichor embeds (no version)."""
    if ctx.args:
        raise click.UsageError(
            f"ichor cni upgrade takes no version: Cilium moves only to {PINNED.cilium_chart}, "
            "the chart this Ichor embeds."
        )
    start_operation(
        ctx,
        cluster=cluster,
        type_=OperationType.CNI,
        version=None,
        override=override,
        dry_run=dry_run,
        wait=wait,
        timeout=timeout,
    )
