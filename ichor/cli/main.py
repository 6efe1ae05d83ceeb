"""The ``ichor`` command: the entry point that puts the commands together.

``main()`` runs the click group and turns every outcome into an exit code: 0 done,
1 refused or failed (one sentence on stderr), 2 usage. It refuses to show a stack trace:
an exception nobody expected becomes one sentence naming it, and ``ICHOR_DEBUG=1``
raises it instead for whoever is debugging.
"""

from __future__ import annotations

import sys

import click

from ichor.cli import autopatch, clusters, common, kube, upgrades
from ichor.settings import CliSettings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@common.kubeconfig_option()
@common.context_option
@common.namespace_option
def cli() -> None:
    """Ichor: keep Talos Linux clusters current, one component at a time.

    Talks to the cluster Ichor runs in like kubectl: --kubeconfig, --context, -n.
    """


cli.add_command(clusters.version)
cli.add_command(clusters.init)
cli.add_command(clusters.adopt)
cli.add_command(clusters.status)
cli.add_command(upgrades.upgrade)
cli.add_command(upgrades.cni)
cli.add_command(autopatch.autopatch)


def main(argv: list[str] | None = None, *, settings: CliSettings | None = None) -> int:
    """Run ``ichor``; returns the exit code (the console script exits with it).
    ``settings`` are read from the environment when not given."""
    settings = settings if settings is not None else CliSettings.from_env()
    try:
        cli.main(
            args=argv,
            prog_name="ichor",
            standalone_mode=False,
            obj=common.Connection(kubeconfig=settings.kubeconfig),
        )
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    except click.ClickException as error:
        error.show()
        return int(error.exit_code)
    except click.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except SystemExit as done:
        return int(done.code) if isinstance(done.code, int) else 1
    except kube.Denied as denial:
        click.echo(f"Refused: {denial.message}", err=True)
        return common.EXIT_REFUSED
    except Exception as error:
        if settings.debug:
            raise
        click.echo(
            f"Error: ichor stopped on an unexpected {type(error).__name__}: {error} "
            "(set ICHOR_DEBUG=1 to see where)",
            err=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
