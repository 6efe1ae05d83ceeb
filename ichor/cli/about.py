"""``ichor version``: this build, and the versions a new install gets.

Apart from the commands that talk to a cluster so that it loads no API client, no
registry client and no API model: it answers in a few tens of milliseconds.
"""

from __future__ import annotations

import click

from ichor.cli import output
from ichor.release import release_set


def build_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("ichor")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


@click.command()
@output.OUTPUT_OPTION
def version(fmt: str) -> None:
    """This build, and the versions a new install gets."""
    release = release_set.PINNED
    if fmt != output.Format.TABLE:
        output.emit(
            {
                "ichor": build_version(),
                "newInstall": {
                    "talos": release.talos,
                    "kubernetes": release.kubernetes,
                    "versionContract": release.contract,
                    "ciliumChart": release.cilium_chart,
                },
            },
            fmt,
        )
        return
    click.echo(f"ichor {build_version()}")
    click.echo(f"Versions a new install gets: {release}")
    click.echo(
        "After the install each component upgrades on its own, to any version the rules "
        "accept (ichor upgrade talos|kubernetes, ichor cni upgrade)."
    )
