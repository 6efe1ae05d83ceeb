"""The tables of docs/configuration.md, rendered from ``ichor.settings``.

Each settings class is a section; each field that names a variable is a row: the
variable, its default and its meaning (the field's ``#:`` comment). The page keeps them
between two markers; ``make configuration`` (``python -m tests.support.configuration``)
writes them there and tests/unit/settings keeps the page equal to this rendering.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ichor import settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
BEGIN = "<!-- settings: generated from ichor/settings.py by `make configuration` -->"
END = "<!-- settings: end -->"

#: The sections in the order of the page: the operator's, then the ``ichor`` command's.
SECTIONS: tuple[type[Any], ...] = (
    settings.Settings,
    settings.KubeSettings,
    settings.WebhookSettings,
    settings.MetricsSettings,
    settings.ControllerSettings,
    settings.OperationSettings,
    settings.ExecutorSettings,
    settings.TenantSettings,
    settings.ReleaseCheckSettings,
    settings.CredentialSettings,
    settings.CliSettings,
)


@dataclass(frozen=True)
class Variable:
    name: str
    field: str
    default: str
    meaning: str


def comments(cls: type[Any]) -> dict[str, str]:
    """Each field's ``#:`` comment, joined into one line."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    found: dict[str, str] = {}
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.ClassDef)
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            above: list[str] = []
            row = item.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#:"):
                above.insert(0, lines[row].strip().removeprefix("#:").strip())
                row -= 1
            found[item.target.id] = " ".join(above)
    return found


def _default(item: dataclasses.Field[Any]) -> str:
    if item.default_factory is not dataclasses.MISSING:
        doc = (inspect.getdoc(item.default_factory) or "computed").split("\n")[0]
        return _markdown(doc[:1].lower() + doc[1:].rstrip("."))
    value = item.default
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "unset" if not value else "set"
    if isinstance(value, tuple):
        return f"`{' '.join(value)}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def variables(cls: type[Any]) -> Iterator[Variable]:
    meaning = comments(cls)
    for item in dataclasses.fields(cls):
        if "env" in item.metadata:
            yield Variable(
                name=item.metadata["env"],
                field=item.name,
                default=_default(item),
                meaning=_markdown(meaning.get(item.name, "")),
            )


def _markdown(text: str) -> str:
    """reStructuredText's inline code (double backticks) as Markdown's."""
    return text.replace("``", "`")


def _title(cls: type[Any]) -> str:
    """The first sentence of the class's docstring, up to its colon."""
    first = (inspect.getdoc(cls) or cls.__name__).split("\n")[0]
    return _markdown(first.split(":")[0].rstrip("."))


def render() -> str:
    """The generated part of the page, markers included."""
    out = [BEGIN, ""]
    for cls in SECTIONS:
        rows = list(variables(cls))
        if not rows:
            continue
        doc = " ".join((inspect.getdoc(cls) or "").split("\n\n")[0].split())
        rest = doc.partition(": ")[2] or doc
        out += [f"## {_title(cls)}", "", f"`{cls.__name__}`: {_markdown(rest)}", ""]
        out += ["| variable | default | meaning |", "| --- | --- | --- |"]
        out += [f"| `{v.name}` | {v.default} | {v.meaning.replace('|', '/')} |" for v in rows]
        out.append("")
    out.append(END)
    return "\n".join(out)


def generated(page: str) -> str:
    """The part of ``page`` between the markers (markers included), or ``""``."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        return ""
    return page[start : end + len(END)]


def write(path: Path = PAGE) -> None:
    page = path.read_text()
    old = generated(page)
    if not old:
        raise SystemExit(f"{path} has no {BEGIN!r} ... {END!r} markers to write between")
    path.write_text(page.replace(old, render()))


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
