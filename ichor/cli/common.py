"""What every command shares: the kubectl-like global options and the refusal exit.

The global options (``--kubeconfig``, ``--context``, ``-n``, ``--as``, ``--as-group``)
always name the management cluster, the one Ichor runs in, and they are taken in either
place, as kubectl takes them: ``ichor -n team-a status`` and ``ichor status -n team-a``
mean the same (the later value wins). ``add_global_options`` puts them on a command that
lacks them, so a command gets them whatever module defines it. Exit codes: 0 done, 1
refused (or failed, with one sentence), 2 usage, 130 interrupted.

Nothing here imports the API client: ``target`` loads it when a command first needs the
cluster, so ``ichor version`` and ``--help`` start without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    from ichor.cli import kube

F = TypeVar("F", bound=Callable[..., Any])

EXIT_REFUSED = 1
EXIT_USAGE = 2
#: 128 + SIGINT, what a shell reports for a program Ctrl-C stopped.
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Connection:
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    #: ``--as``: the user the management API calls impersonate.
    as_user: str | None = None
    #: ``--as-group``: the groups they impersonate (with ``--as`` only, as kubectl).
    as_groups: tuple[str, ...] = ()


def _store(field: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, _: click.Parameter, value: Any) -> Any:
        if value is not None and value != ():
            current = ctx.find_object(Connection) or Connection()
            root = ctx.find_root()
            given: Any = tuple(value) if field == "as_groups" else value
            root.obj = replace(current, **{field: given})
            ctx.obj = root.obj
        return value

    return callback


def _global_option(*decls: str, field: str, **attrs: Any) -> Callable[[F], F]:
    """One global option: taken before the command runs, kept in the ``Connection``
    (``field``), never passed to the command itself."""
    return click.option(*decls, expose_value=False, is_eager=True, callback=_store(field), **attrs)


def kubeconfig_option(
    help_text: str = "Path of the kubeconfig of the management cluster (else $KUBECONFIG).",
) -> Callable[[F], F]:
    return _global_option(
        "--kubeconfig", field="kubeconfig", type=click.Path(dir_okay=False), help=help_text
    )


context_option = _global_option("--context", field="context", help="The kubeconfig context to use.")
namespace_option = _global_option(
    "-n",
    "--namespace",
    field="namespace",
    help="Namespace of the TalosCluster (else the context's, else default).",
)
as_option = _global_option(
    "--as",
    "as_user",
    field="as_user",
    metavar="USER",
    help="Call the management cluster's API as USER (impersonation, as kubectl --as).",
)
as_group_option = _global_option(
    "--as-group",
    "as_groups",
    field="as_groups",
    multiple=True,
    metavar="GROUP",
    help="A group to impersonate with --as; repeat for more.",
)


def connection_options(fn: F) -> F:
    """The global options on a command (like kubectl's): ``--kubeconfig``, ``--context``,
    ``-n``, ``--as``, ``--as-group``."""
    return kubeconfig_option()(context_option(namespace_option(as_option(as_group_option(fn)))))


#: The parameter names of the global options.
GLOBAL_NAMES = ("kubeconfig", "context", "namespace", "as_user", "as_groups")


def _global_params() -> list[click.Parameter]:
    """A fresh copy of each global option, in the order of ``--help``."""

    def holder() -> None: ...

    connection_options(holder)
    found: list[click.Parameter] = holder.__click_params__  # type: ignore[attr-defined]
    return list(reversed(found))


def add_global_options(command: click.Command) -> click.Command:
    """``command`` (and every command of a group) with each global option it lacks."""
    have = {param.name for param in command.params}
    for param in _global_params():
        if param.name not in have:
            command.params.append(param)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_global_options(sub)
    return command


def connection(ctx: click.Context) -> Connection:
    return ctx.find_object(Connection) or Connection()


def target(ctx: click.Context) -> kube.Target:
    """The API client and namespace of the options given so far."""
    from ichor.cli import kube

    given = connection(ctx)
    if given.as_groups and not given.as_user:
        raise click.UsageError(
            "--as-group needs --as: a group is impersonated together with a user, as kubectl does"
        )
    return kube.connect(
        kubeconfig=given.kubeconfig,
        context=given.context,
        namespace=given.namespace,
        as_user=given.as_user,
        as_groups=given.as_groups,
    )


def refused(message: str, *, hint: str | None = None) -> NoReturn:
    """Print a refusal (and the step that may pass it) and exit with 1."""
    click.echo(f"Refused: {message}", err=True)
    if hint:
        click.echo(hint, err=True)
    raise SystemExit(EXIT_REFUSED)


def warn(message: str) -> None:
    click.echo(f"Warning: {message}", err=True)
