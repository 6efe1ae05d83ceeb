"""The ``ichor`` command (and ``kubectl ichor``): the entry point that puts the commands
together.

``main()`` turns every outcome into an exit code: 0 done, 1 refused or failed (one
sentence on stderr), 2 usage, 130 interrupted; never a stack trace unless
``ICHOR_DEBUG=1``. The commands are loaded when called (``COMMANDS``), so ``ichor
version`` and ``ichor --help`` load no API client; each gets the global options.

More in docs/design/notes.md, "ichor/cli/main.py".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from ichor.cli import common

if TYPE_CHECKING:
    from ichor.settings import CliSettings


@dataclass(frozen=True)
class Entry:
    module: str
    attribute: str
    #: What ``ichor --help`` shows for the command (its help's first sentence).
    help: str


COMMANDS: dict[str, Entry] = {
    "version": Entry(
        "ichor.cli.about", "version", "This build, and the versions a new install gets."
    ),
    "init": Entry(
        "ichor.cli.clusters",
        "init",
        "Write a TalosCluster NAME for a first install, with this build's release set.",
    ),
    "adopt": Entry(
        "ichor.cli.clusters",
        "adopt",
        "Take over a running Talos cluster as TalosCluster NAME, at the versions it runs.",
    ),
    "status": Entry(
        "ichor.cli.clusters",
        "status",
        "One table of clusters: versions, compatibility and the default upgrades.",
    ),
    "upgrade": Entry(
        "ichor.cli.upgrades",
        "upgrade",
        "Upgrade one component of a cluster: talos, kubernetes; or plan the path.",
    ),
    "cni": Entry(
        "ichor.cli.upgrades",
        "cni",
        "The cluster's CNI: Cilium, moved only to the chart this Ichor embeds.",
    ),
    "operations": Entry(
        "ichor.cli.operations",
        "operations",
        "The TalosOperations of a namespace, or of one CLUSTER, newest last.",
    ),
    "logs": Entry(
        "ichor.cli.operations",
        "logs",
        "The log of OPERATION's Job: each container's, in the order they ran.",
    ),
    "autopatch": Entry(
        "ichor.cli.autopatch",
        "autopatch",
        "Suspend or resume a cluster's unattended patch upgrades; lift a halt.",
    ),
    "completion": Entry(
        "ichor.cli.completion",
        "completion",
        "The shell completion script for bash, zsh or fish.",
    ),
}


class Commands(click.Group):
    """A group that imports a command's module only when the command is run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        assert isinstance(command, click.Command)
        return common.add_global_options(command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, entry.help) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@common.connection_options
def cli() -> None:
    """Ichor: keep Talos Linux clusters current, one component at a time.

    Talks to the management cluster, the one Ichor runs in, like kubectl: --kubeconfig,
    --context, -n, --as, before or after the command.
    """


def main(
    argv: list[str] | None = None,
    *,
    settings: CliSettings | None = None,
    prog_name: str = "ichor",
    complete_var: str = "_ICHOR_COMPLETE",
) -> int:
    """Run ``ichor``; returns the exit code (the console script exits with it).
    ``settings`` (``CliSettings``) are read from the environment when not given."""
    from ichor.settings import CliSettings

    given = settings if settings is not None else CliSettings.from_env()
    if complete_var == _COBRA:
        return _cobra(list(argv or []), common.Connection(kubeconfig=given.kubeconfig))
    try:
        cli.main(
            args=argv,
            prog_name=prog_name,
            complete_var=complete_var,
            standalone_mode=False,
            obj=common.Connection(kubeconfig=given.kubeconfig),
        )
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except click.ClickException as error:
        error.show()
        return int(error.exit_code)
    except click.Abort as abort:
        if isinstance(abort.__cause__, KeyboardInterrupt):
            click.echo("Interrupted.", err=True)
            return common.EXIT_INTERRUPTED
        click.echo("Aborted.", err=True)
        return 1
    except KeyboardInterrupt:
        click.echo("\nInterrupted.", err=True)
        return common.EXIT_INTERRUPTED
    except SystemExit as done:
        return int(done.code) if isinstance(done.code, int) else 1
    except Exception as error:
        from ichor.cli import kube

        if isinstance(error, kube.Denied):
            click.echo(f"Refused: {error.message}", err=True)
            return common.EXIT_REFUSED
        if given.debug:
            raise
        click.echo(
            f"Error: ichor stopped on an unexpected {type(error).__name__}: {error} "
            "(set ICHOR_DEBUG=1 to see where)",
            err=True,
        )
        return 1
    return 0


def kubectl_plugin() -> int:
    """The ``kubectl-ichor`` console script: ``kubectl ichor ...`` finds it on PATH and runs
    it with the words after ``ichor``."""
    return main(prog_name="kubectl ichor", complete_var="_KUBECTL_ICHOR_COMPLETE")


def kubectl_complete(argv: list[str] | None = None) -> int:
    """The ``kubectl_complete-ichor`` console script: kubectl (1.26 and later) runs it to
    complete ``kubectl ichor ...``, with the words typed after ``ichor``, the last one the
    word being completed, and reads Cobra's answer: one completion a line, then
    ``:4`` (no file names)."""
    import sys

    words = list(sys.argv[1:] if argv is None else argv)
    return main(words, prog_name="kubectl ichor", complete_var=_COBRA)


#: ``main``'s word for "answer kubectl's completion request" (no shell sets it).
_COBRA = "<cobra>"


def _cobra(words: list[str], connection: common.Connection) -> int:
    """Print Cobra's completion answer for ``words`` (the last one incomplete)."""
    from click.shell_completion import ShellComplete

    incomplete = words.pop() if words else ""
    completer = ShellComplete(cli, {"obj": connection}, "kubectl ichor", "_KUBECTL_ICHOR_COMPLETE")
    for item in completer.get_completions(words, incomplete):
        if item.type == "plain":
            click.echo(f"{item.value}\t{item.help}" if item.help else item.value)
    click.echo(":4")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
