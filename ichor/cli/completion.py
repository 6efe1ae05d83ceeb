"""``ichor completion bash|zsh|fish``: the script that makes a shell complete ``ichor``.

It is click's own completion (the shell calls ``ichor`` back with ``_ICHOR_COMPLETE``
set), printed for the shell named; the completers of ``ichor.cli.completers`` add cluster
names, offered versions and operation names. ``source <(ichor completion bash)`` in a
shell, or the file the shell reads at start (docs/cli.md says where).
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """The shell completion script for bash, zsh or fish.

    Load it with `source <(ichor completion bash)` (zsh: `source <(ichor completion zsh)`;
    fish: `ichor completion fish | source`).
    """
    root = ctx.find_root()
    # as `kubectl ichor` the shell calls kubectl-ichor itself (kubectl completes through
    # kubectl_complete-ichor, which needs no script)
    program = (root.info_name or "ichor").replace("kubectl ichor", "kubectl-ichor")
    variable = "_{}_COMPLETE".format(program.replace("-", "_").replace(" ", "_").upper())
    found = get_completion_class(shell)
    assert found is not None  # the Choice admits only the shells click knows
    command = root.command
    script = found(command, {}, program, variable).source()
    click.echo(script, nl=False)
