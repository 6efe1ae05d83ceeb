"""Nothing a user meets is missing from the docs: every condition reason and Event reason,
every metric, every setting and every ``ichor`` command, each enumerated from the code.

The reasons and metrics are in generated pages (tests/support/pages.py) and the settings
in docs/configuration.md (tests/support/configuration.py), so a new one without its
page fails there too; these tests say what is missing where, in one line each. The
``ichor`` commands are in the README's command table, written by hand.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from ichor.cli.main import cli
from tests.support import configuration, metrics_page, reasons

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"


def _missing(names: list[str], page: Path, pattern: str = "`{}`") -> list[str]:
    text = page.read_text()
    return [name for name in names if pattern.format(name) not in text]


def test_every_condition_and_event_reason_is_on_the_troubleshooting_page() -> None:
    page = DOCS / "troubleshooting.md"
    missing = []
    for cls in reasons.reason_enums():
        for member in cls:
            if f"| `{member.value}` |" not in page.read_text():
                missing.append(f"{cls.__name__}.{member.name} ({member.value})")
    assert not missing, f"{page.name} lacks {', '.join(missing)}: run `make docs`"


def test_every_metric_is_on_the_metrics_page() -> None:
    names = [family.name for family in metrics_page.families()]
    assert "ichor_build_info" in names
    missing = _missing(names, DOCS / "metrics.md", "| `{}` |")
    assert not missing, f"docs/metrics.md lacks {', '.join(missing)}: run `make docs`"


def test_every_setting_is_on_the_configuration_page() -> None:
    names = [v.name for cls in configuration.SECTIONS for v in configuration.variables(cls)]
    assert "ICHOR_METRICS_PORT" in names
    missing = _missing(names, configuration.PAGE, "| `{}` |")
    assert not missing, f"docs/configuration.md lacks {', '.join(missing)}: run `make docs`"


def commands(group: click.Group = cli, path: tuple[str, ...] = ("ichor",)) -> list[str]:
    """Every command a user can run (hidden ones are refusals that point elsewhere)."""
    found: list[str] = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the lazy group's names, each imported here
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        if isinstance(command, click.Group):
            found += commands(command, (*path, name))
        else:
            found.append(" ".join((*path, name)))
    return found


def _readme_table() -> str:
    text = (ROOT / "README.md").read_text()
    rows = [line for line in text.splitlines() if re.match(r"^\| `ichor ", line)]
    return "\n".join(rows)


def missing_rows(found: list[str], table: str) -> list[str]:
    """The commands of ``found`` no row of ``table`` names. A row may name several
    subcommands of one group: `ichor upgrade talos\\|kubernetes ...`."""
    rows = [row.replace("\\|", "|") for row in table.splitlines()]
    missing = []
    for command in found:
        *group, last = command.split()
        prefix = re.escape(" ".join(group))
        named = rf"`{prefix} (?:[\w-]+\|)*{re.escape(last)}(?:\|[\w-]+)*[ `]"
        if not any(re.search(named, row) for row in rows):
            missing.append(command)
    return missing


def test_every_ichor_command_has_a_row_in_the_readme() -> None:
    found = commands()
    assert {"ichor autopatch resume", "ichor upgrade kubernetes"} <= set(found)
    missing = missing_rows(found, _readme_table())
    assert not missing, (
        f"README.md's command table has no row for {', '.join(missing)}: add one "
        "(| `ichor ...` | what it does |)"
    )


def test_the_readme_check_catches_a_command_without_a_row() -> None:
    group = click.Group("ichor")
    sub = click.Group("autopatch")
    sub.add_command(click.Command("unhalt"))
    sub.add_command(click.Command("resume"))
    group.add_command(sub)
    table = "| `ichor autopatch suspend\\|resume CLUSTER` | ... |"
    assert missing_rows(commands(group), table) == ["ichor autopatch unhalt"]
    assert missing_rows(["ichor upgrade cluster"], "| `ichor upgrade clusters` | |") == [
        "ichor upgrade cluster"
    ]
