"""What every command shares: the kubectl-like connection options and the refusal exit.

The options are taken on the ``ichor`` group and on each command (``ichor -n team-a
status`` and ``ichor status -n team-a`` mean the same; the command's value wins).
Exit codes: 0 done, 1 refused (or failed, with one sentence), 2 usage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NoReturn, TypeVar

import click

from ichor.cli import kube

F = TypeVar("F", bound=Callable[..., Any])

EXIT_REFUSED = 1


@dataclass(frozen=True)
class Connection:
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None


def _store(field: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, _: click.Parameter, value: Any) -> Any:
        if value is not None:
            current = ctx.find_object(Connection) or Connection()
            root = ctx.find_root()
            root.obj = replace(current, **{field: value})
            ctx.obj = root.obj
        return value

    return callback


def kubeconfig_option(
    help_text: str = "Path of the kubeconfig (else $KUBECONFIG).",
) -> Callable[[F], F]:
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False),
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_store("kubeconfig"),
        help=help_text,
    )


context_option = click.option(
    "--context",
    default=None,
    expose_value=False,
    is_eager=True,
    callback=_store("context"),
    help="The kubeconfig context to use.",
)
namespace_option = click.option(
    "-n",
    "--namespace",
    default=None,
    expose_value=False,
    is_eager=True,
    callback=_store("namespace"),
    help="Namespace of the TalosCluster (else the context's, else default).",
)


def connection_options(fn: F) -> F:
    """``--kubeconfig``, ``--context``, ``-n`` on a command (like kubectl)."""
    return kubeconfig_option()(context_option(namespace_option(fn)))


def target(ctx: click.Context) -> kube.Target:
    """The API client and namespace of the options given so far."""
    connection = ctx.find_object(Connection) or Connection()
    return kube.connect(
        kubeconfig=connection.kubeconfig,
        context=connection.context,
        namespace=connection.namespace,
    )


def refused(message: str, *, hint: str | None = None) -> NoReturn:
    """Print a refusal (and the step that may pass it) and exit with 1."""
    click.echo(f"Refused: {message}", err=True)
    if hint:
        click.echo(hint, err=True)
    raise SystemExit(EXIT_REFUSED)


def warn(message: str) -> None:
    click.echo(f"Warning: {message}", err=True)
