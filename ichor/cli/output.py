"""How the CLI prints: kubectl's plain columns for a person, JSON or YAML for a program.

Reads take ``--output table|json|yaml``. A table is kubectl's: each column as wide as its
widest cell, three spaces apart, nothing ever cut to fit the terminal (a cut
``v1.13…`` would read as v1.13.10 as well as v1.13.4); a line wider than the terminal
wraps there, as kubectl's do. The table form is for reading and may change; the JSON and
YAML forms are the ``to_json()`` of the views and keep their keys. Messages go to stderr
so a piped ``-o json`` stays parseable. Nothing here decides anything.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from ichor.cli import common, completers

if TYPE_CHECKING:
    from rich.console import Console

    from ichor.cli import views
    from ichor.upgrade import path_plan as plans


_Command = TypeVar("_Command", bound=Callable[..., Any])


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


OUTPUT_OPTION = click.option(
    "-o",
    "--output",
    "fmt",
    type=click.Choice([f.value for f in Format]),
    default=Format.TABLE.value,
    show_default=True,
    help="How to print the answer.",
)

#: What each ``Component`` is called in a sentence (keyed by its value: a ``Component``
#: is the string, so the rules need not be loaded to print a version).
NAMES: dict[str, str] = {"talos": "Talos", "kubernetes": "Kubernetes", "cni": "Cilium"}


def console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def listing(what: str) -> Callable[[_Command], _Command]:
    """The arguments and options of a command that lists ``what`` (a plural): an optional
    CLUSTER, ``-A``, ``-o`` and the connection options, then the click context."""

    def decorate(command: _Command) -> _Command:
        decorated: Callable[..., Any] = command
        for option in (
            click.pass_context,
            common.connection_options,
            OUTPUT_OPTION,
            click.option(
                "-A", "--all-namespaces", is_flag=True, help=f"{what} of every namespace."
            ),
            click.argument("cluster", required=False, shell_complete=completers.clusters),
        ):
            decorated = option(decorated)
        return cast("_Command", decorated)

    return decorate


def emitted(rows: Sequence[Any], fmt: str) -> bool:
    """Whether the rows went out as JSON or YAML (their ``to_json()``); a table is the
    caller's to print."""
    if fmt == Format.TABLE:
        return False
    emit([row.to_json() for row in rows], fmt)
    return True


def emit(data: Mapping[str, Any] | list[Any], fmt: str) -> None:
    """Print machine-readable ``data`` as JSON or YAML."""
    if fmt == Format.JSON:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False))


#: kubectl's tabwriter: three spaces between columns, a column at least six wide.
PADDING = 3
MIN_WIDTH = 6


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """``header`` and ``rows`` as kubectl prints them: every cell whole, left-aligned,
    each column as wide as its widest cell plus three spaces (at least six)."""
    table = [list(header), *(list(row) for row in rows)]
    widths = [
        max(MIN_WIDTH, max(len(line[index]) for line in table) + PADDING)
        for index in range(len(header))
    ]
    lines = []
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=False)]
        lines.append(("".join(cells) + line[-1]).rstrip())
    return lines


def note(message: str) -> None:
    """A line for the person at the terminal (stderr)."""
    click.echo(message, err=True)


def choice_list(view: views.ChoiceList) -> None:
    out = console()
    name = NAMES[view.component]
    out.print(
        f"{name} choices for TalosCluster {view.namespace}/{view.cluster} "
        f"(runs {name} {view.running}):"
    )
    if not view.availability.available:
        out.print(f"  The release list is unavailable: {view.availability.reason}.")
        return
    if view.availability.reason:
        out.print(f"  Note: {view.availability.reason}.")
    if view.note:
        out.print(f"  {view.note[0].upper()}{view.note[1:]}.")
    default = view.choices.default

    def mark(version: Any) -> str:
        return f"{version.tag}  (default)" if version == default else version.tag

    groups = (
        ("Recommended", [view.choices.recommended] if view.choices.recommended else []),
        ("Patch", view.choices.patch),
        ("Next minor", view.choices.next_minor),
    )
    for title, versions in groups:
        out.print(f"  {title}:")
        if not versions:
            out.print("    (none)")
        for version in versions:
            out.print(f"    {mark(version)}")
    if default is None:
        out.print("  No default choice: no recorded release passes the upgrade rules.")
    if view.not_offered:
        out.print("  Not offered:")
        for line in view.not_offered:
            more = f" ({line.not_offered} releases of this minor)" if line.not_offered > 1 else ""
            out.print(f"    {line.message}{more}")


def _plan_steps(result: plans.PathPlan, *, indent: str = "  ") -> None:
    out = console()
    for number, step in enumerate(result.steps, start=1):
        out.print(f"{indent}{number}. {step.command}")
        out.print(f"{indent}   why: {step.why}")


def path_plan(result: plans.PathPlan, *, cluster: str) -> None:
    out = console()
    for warning in result.warnings:
        out.print(f"Note: {warning}")
    goal = str(result.goal) if result.goal else "the newest recorded releases"
    if result.reachable:
        if not result.steps:
            out.print(f"TalosCluster {cluster} already runs {goal}: nothing to do.")
            return
        plural = "s" if len(result.steps) != 1 else ""
        out.print(
            f"Plan for TalosCluster {cluster} to {goal}: {len(result.steps)} operation{plural}, "
            "in this order (nothing is run by this command):"
        )
        _plan_steps(result)
        return
    out.print(f"Plan for TalosCluster {cluster} to {goal}: {result.outcome}.")
    if result.reason:
        out.print(f"  {result.reason}")
    if result.instead is not None and result.instead.steps:
        out.print(f"What the rules reach instead, {result.instead.goal}:")
        _plan_steps(result.instead)


#: The columns of ``ichor status`` every table has, and the attribute of a row each shows.
_STATUS_COLUMNS = (
    ("NAME", "name"),
    ("TALOS", "talos"),
    ("KUBERNETES", "kubernetes"),
    ("CILIUM", "cilium"),
    ("COMPATIBLE", "compatible"),
    ("TALOS-UPGRADE", "talos_upgrade"),
    ("KUBERNETES-UPGRADE", "kubernetes_upgrade"),
    ("READY", "ready"),
)


def status_table(rows: list[views.StatusRow], *, namespaces: bool) -> None:
    if not rows:
        click.echo("No TalosClusters found.")
        return
    shown = _status_columns(rows, namespaces=namespaces)
    cells = [[str(getattr(row, field)) for _, field in shown] for row in rows]
    for text in columns([header for header, _ in shown], cells):
        click.echo(text)
    for row in rows:
        _status_notes(row)


def _status_columns(rows: list[views.StatusRow], *, namespaces: bool) -> list[tuple[str, str]]:
    """The columns in order: NAMESPACE with ``-A``, the fixed ones, then AUTO-PATCH once
    any cluster has auto-patch configured and IMAGES once any cluster's nodes were read
    (each node's own image)."""
    shown = [("NAMESPACE", "namespace")] if namespaces else []
    shown += _STATUS_COLUMNS
    if any(row.auto_patch != "-" for row in rows):
        shown.append(("AUTO-PATCH", "auto_patch"))
    if any(row.images != "-" for row in rows):
        shown.append(("IMAGES", "images"))
    return shown


def _status_notes(row: views.StatusRow) -> None:
    """What follows the table for one cluster: its message, and the images of nodes
    that differ."""
    if row.message:
        click.echo(f"{row.namespace}/{row.name}: {row.message}")
    if row.image_lines:
        click.echo(
            f"{row.namespace}/{row.name}: the nodes differ, each is upgraded to its own image:"
        )
        for text in row.image_lines:
            click.echo(f"  {text}")
