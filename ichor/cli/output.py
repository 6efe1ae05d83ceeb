"""How the CLI prints: rich tables for a person, JSON or YAML for a program.

Reads take ``--output table|json|yaml``. The table form is for reading and may change;
the JSON and YAML forms are the ``to_json()`` of the views and keep their keys. Messages
go to stderr so a piped ``-o json`` stays parseable. Nothing here decides anything.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from ichor.cli import views
from ichor.upgrade import path_plan as plans
from ichor.upgrade.rule import Component


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

NAMES = {Component.TALOS: "Talos", Component.KUBERNETES: "Kubernetes", Component.CNI: "Cilium"}


def console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def err_console() -> Console:
    return Console(stderr=True, highlight=False)


def emit(data: Mapping[str, Any] | list[Any], fmt: str) -> None:
    """Print machine-readable ``data`` as JSON or YAML."""
    if fmt == Format.JSON:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False))


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


def status_table(rows: list[views.StatusRow], *, namespaces: bool) -> None:
    out = console()
    if not out.is_terminal:
        # Piped, rich assumes 80 columns and would cut the cells; a pipe has no width.
        out = Console(highlight=False, soft_wrap=True, width=250)
    if not rows:
        out.print("No TalosClusters found.")
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    if namespaces:
        table.add_column("NAMESPACE")
    for column in (
        "NAME",
        "TALOS",
        "KUBERNETES",
        "CILIUM",
        "COMPATIBLE",
        "TALOS-UPGRADE",
        "KUBERNETES-UPGRADE",
        "READY",
    ):
        table.add_column(column, no_wrap=True)
    # the column is there once any cluster has auto-patch configured
    auto_patch = any(row.auto_patch != "-" for row in rows)
    if auto_patch:
        table.add_column("AUTO-PATCH", no_wrap=True)
    # the column is there once any cluster's nodes were read (each node's own image)
    images = any(row.images != "-" for row in rows)
    if images:
        table.add_column("IMAGES", no_wrap=True)
    for row in rows:
        cells = [
            row.name,
            row.talos,
            row.kubernetes,
            row.cilium,
            row.compatible,
            row.talos_upgrade,
            row.kubernetes_upgrade,
            row.ready,
            *([row.auto_patch] if auto_patch else []),
            *([row.images] if images else []),
        ]
        table.add_row(*([row.namespace, *cells] if namespaces else cells))
    with out.capture() as captured:
        out.print(table)
    for line in captured.get().splitlines():
        click.echo(line.rstrip())
    for row in rows:
        if row.message:
            out.print(f"{row.namespace}/{row.name}: {row.message}", soft_wrap=True)
        if row.image_lines:
            out.print(
                f"{row.namespace}/{row.name}: the nodes differ, each is upgraded to its own image:",
                soft_wrap=True,
            )
            for line in row.image_lines:
                out.print(f"  {line}", soft_wrap=True)
