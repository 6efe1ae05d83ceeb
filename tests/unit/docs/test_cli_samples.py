"""The ``ichor`` command lines of the docs are ones the CLI accepts.

Each ``$ ichor ...`` line, and each line of a ``sh`` block that starts with ``ichor``, is
parsed by the CLI's own groups and commands (click's ``make_context``: the options, the
arguments, the subcommands), without running it. A renamed flag or command fails here
with the page and the line. ``ichor adopt`` refuses in its body, not its parser, an adopt
without ``--workload-kubeconfig``, so its samples are held to that flag too.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from ichor.cli.main import cli

ROOT = Path(__file__).resolve().parents[3]
_FENCE = re.compile(r"^```(\w*)")


def _logical_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, fence language, line) with ``\\`` continuations joined."""
    found: list[tuple[int, str, str]] = []
    fence: str | None = None
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = _FENCE.match(line)
        if opened and pending is None:
            fence = None if fence is not None else opened.group(1)
            continue
        if pending is not None:
            start, head = pending
            line, number = head + " " + line.strip(), start
            pending = None
        if line.rstrip().endswith("\\"):
            pending = (number, line.rstrip()[:-1])
            continue
        found.append((number, fence or "", line))
    return found


def samples() -> list[tuple[str, list[str]]]:
    found = []
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        if "design" in page.parts:
            continue
        for number, fence, line in _logical_lines(page.read_text()):
            stripped = line.strip()
            if stripped.startswith("$ ichor "):
                command = stripped[2:]
            elif fence in ("sh", "bash") and stripped.startswith("ichor "):
                command = stripped
            else:
                continue
            words = shlex.split(command.split(" #")[0].split(" |")[0])
            found.append((f"{page.relative_to(ROOT)}:{number}", words[1:]))
    return found


def parse(args: list[str]) -> list[str]:
    """The command path ``args`` names, parsed as the CLI parses it; raises click's
    UsageError as the CLI would show it."""
    ctx = cli.make_context("ichor", list(args), resilient_parsing=False)
    path = ["ichor"]
    group: click.Command = cli
    while isinstance(group, click.Group):
        # a group's parse keeps the subcommand's name apart (public until click 8.2)
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            break
        name, command, remaining = group.resolve_command(ctx, rest)
        assert command is not None
        path.append(str(name))
        ctx = command.make_context(str(name), remaining, parent=ctx)
        group = command
    return path


def _as_files(args: list[str], into: Path) -> None:
    """Every word of ``args`` an empty file under ``into``: the samples name files the
    reader has (a kubeconfig), and the parser checks that a path exists."""
    for word in args:
        if word.startswith("-") or word.startswith("/") or ".." in word or "~" in word:
            continue
        (into / word).parent.mkdir(parents=True, exist_ok=True)
        if not (into / word).exists():
            (into / word).touch()


@pytest.fixture(autouse=True)
def _in_a_folder_of_the_samples_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for _, args in samples():
        _as_files(args, tmp_path)
    monkeypatch.chdir(tmp_path)


def test_the_docs_have_samples_of_the_commands_a_new_user_runs() -> None:
    paths = {" ".join(parse(args)) for _, args in samples()}
    assert {"ichor adopt", "ichor status", "ichor upgrade talos", "ichor logs"} <= paths


@pytest.mark.parametrize(("where", "args"), samples(), ids=lambda v: str(v)[:50])
def test_a_sample_is_a_command_the_cli_accepts(where: str, args: list[str]) -> None:
    try:
        path = parse(args)
    except click.UsageError as error:
        pytest.fail(f"{where}: ichor {shlex.join(args)}: {error.format_message()}")
    if path == ["ichor", "adopt"]:
        assert "--workload-kubeconfig" in args, f"{where}: adopt names no --workload-kubeconfig"


def test_the_check_refuses_an_unknown_flag_and_an_unknown_command() -> None:
    with pytest.raises(click.UsageError):
        parse(["upgrade", "talos", "prod", "--no-such-flag"])
    with pytest.raises(click.UsageError):
        parse(["upgrades", "talos", "prod"])
    assert parse(["-n", "team-a", "upgrade", "plan", "edge"]) == ["ichor", "upgrade", "plan"]
