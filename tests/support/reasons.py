"""The troubleshooting page's tables, rendered from the reasons of ``ichor.api``.

Every condition reason and Event reason is a member of a str enum in
``ichor/api/conditions.py`` or ``ichor/api/events.py`` (and a refusal's reason is the
rule, ``ichor.release.refusals.Rule``). The text a person reads sits next to the member,
as the ``#:`` comment above it: what the reason means, then ``Step:`` and what to do
(``none`` when nothing is to be done). ``missing`` names every member without that text;
tests/unit/docs fails on it, and ``render`` refuses to write a page without it.
"""

from __future__ import annotations

import ast
import enum
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ichor.api import conditions, events
from ichor.release import refusals

ROOT = Path(__file__).resolve().parents[2]
STEP = " Step: "

#: Section titles of the enums known today; an enum added later is titled by its
#: docstring's first line.
TITLES: dict[str, str] = {
    "ClusterReason": "TalosCluster conditions",
    "SpecReachedReason": "TalosCluster: `SpecReached` (Declarative)",
    "AutoPatchReason": "TalosCluster: `AutoPatchReady`",
    "OperationReason": "TalosOperation conditions",
    "Rule": "TalosOperation `Accepted=False`, and webhook denials: the rule that refused",
    "InstallationReason": "IchorInstallation conditions",
    "ClusterEventReason": "Events on a TalosCluster",
    "OperationEventReason": "Events of the operations",
    "AutoPatchEventReason": "Events of auto-patch",
    "ReleaseCheckEventReason": "Events of the release check",
    "RecordEventReason": "Events of admission records",
}


@dataclass(frozen=True)
class Entry:
    enum_name: str
    member: str
    reason: str
    meaning: str
    step: str


class MissingText(Exception):
    """A reason without its ``#:`` text (the message says which and how to add it)."""


def reason_enums(
    modules: tuple[ModuleType, ...] = (conditions, events),
) -> list[type[enum.StrEnum]]:
    """Every reason enum of ``modules`` in the order of their source, with ``Rule`` after
    the TalosOperation reasons."""
    found: list[type[enum.StrEnum]] = []
    for module in modules:
        members = [
            value
            for name, value in vars(module).items()
            if inspect.isclass(value)
            and issubclass(value, enum.StrEnum)
            and value.__module__ == module.__name__
            and name.endswith("Reason")
        ]
        members.sort(key=lambda cls: inspect.getsourcelines(cls)[1])
        found += members
        if module is conditions:
            found.append(refusals.Rule)
    return found


def member_comments(cls: type[Any]) -> dict[str, str]:
    """Each member's ``#:`` comment (the lines right above it), joined into one line."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.ClassDef)
    said: dict[str, str] = {}
    for item in node.body:
        if isinstance(item, ast.Assign) and len(item.targets) == 1:
            target = item.targets[0]
            if not isinstance(target, ast.Name):
                continue
            above: list[str] = []
            row = item.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#:"):
                above.insert(0, lines[row].strip().removeprefix("#:").strip())
                row -= 1
            said[target.id] = " ".join(above)
    return said


def _where(cls: type[Any]) -> str:
    path = Path(inspect.getfile(cls)).resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def _problem(cls: type[Any], member: enum.StrEnum, text: str) -> str | None:
    where = f"{_where(cls)}: {cls.__name__}.{member.name} ({member.value!r})"
    example = "`#: <what it means>. Step: <what to do, or none>.`"
    if not text:
        return f"{where} has no #: comment above it: write one, {example}, then run `make docs`"
    meaning, _, step = text.partition(STEP)
    if not step.strip() or not meaning.strip():
        return (
            f"{where}: its #: comment {text!r} does not say both what the reason means and "
            f"the step to take: write it as {example}, then run `make docs`"
        )
    return None


def missing(enums: list[type[enum.StrEnum]] | None = None) -> list[str]:
    """One sentence per reason without its meaning and step."""
    problems: list[str] = []
    for cls in enums if enums is not None else reason_enums():
        said = member_comments(cls)
        for member in cls:
            problem = _problem(cls, member, said.get(member.name, ""))
            if problem:
                problems.append(problem)
    return problems


def entries(cls: type[enum.StrEnum]) -> list[Entry]:
    said = member_comments(cls)
    found: list[Entry] = []
    for member in cls:
        text = said.get(member.name, "")
        problem = _problem(cls, member, text)
        if problem:
            raise MissingText(problem)
        meaning, _, step = text.partition(STEP)
        found.append(
            Entry(
                enum_name=cls.__name__,
                member=member.name,
                reason=member.value,
                meaning=_markdown(meaning.strip()),
                step=_markdown(step.strip().rstrip(".")),
            )
        )
    return found


def _markdown(text: str) -> str:
    """reStructuredText's inline code (double backticks) as Markdown's; no table breaks."""
    return text.replace("``", "`").replace("|", "\\|")


def _title(cls: type[Any]) -> str:
    if cls.__name__ in TITLES:
        return TITLES[cls.__name__]
    first = (inspect.getdoc(cls) or cls.__name__).split("\n")[0]
    return _markdown(first.rstrip("."))


def render() -> str:
    """The tables, one per enum, in the order of ``reason_enums``."""
    out: list[str] = []
    for cls in reason_enums():
        out += [
            f"## {_title(cls)}",
            "",
            f"`{cls.__name__}` in `{_where(cls)}`.",
            "",
            "| reason | what it means | the step to take |",
            "| --- | --- | --- |",
        ]
        out += [f"| `{e.reason}` | {e.meaning} | {e.step} |" for e in entries(cls)]
        out.append("")
    return "\n".join(out)
