"""The complexity check of ``make check``: no function in ``ichor/`` above cyclomatic
complexity 15 (radon's count), but for the ones ``ALLOWED`` names at their figure.

``python -m tests.support.complexity`` prints every finding and exits 1 on any: a
function over the limit that the list does not name, a listed one that grew, and a
listed one now within the limit (drop its line). Split a function that grows into
small named steps (as ``ichor/upgrade/rule.py`` orders its rules) rather than raise a
figure here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 15

#: Functions allowed over the limit, by ``path:qualified name``, at their figure: none
#: since every function was split (a listed one may shrink, never grow, and leaves the
#: list once within the limit).
ALLOWED: dict[str, int] = {}


@dataclass(frozen=True)
class Finding:
    name: str
    complexity: int
    allowed: int | None

    def __str__(self) -> str:
        if self.allowed is None:
            return (
                f"{self.name}: complexity {self.complexity}, over the limit of {LIMIT}: "
                "split it into small named steps"
            )
        if self.complexity > LIMIT:
            return (
                f"{self.name}: complexity {self.complexity}, grown from the {self.allowed} "
                "the list allows: split it into small named steps"
            )
        return (
            f"{self.name}: complexity {self.complexity}, within the limit now: "
            "drop its line from ALLOWED in tests/support/complexity.py"
        )


def figures(source: str, path: str) -> Iterator[tuple[str, int]]:
    """``(path:qualified name, complexity)`` of every function, method and closure."""

    def walk(block: object, prefix: str) -> Iterator[tuple[str, int]]:
        name = f"{prefix}{block.name}"  # type: ignore[attr-defined]
        if hasattr(block, "methods"):
            for method in block.methods:
                yield from walk(method, f"{name}.")
            return
        yield f"{path}:{name}", int(block.complexity)  # type: ignore[attr-defined]
        for closure in getattr(block, "closures", []):
            yield from walk(closure, f"{name}.")

    for block in cc_visit(source):
        if getattr(block, "is_method", False):
            continue  # reached through its class
        yield from walk(block, "")


def measure(root: Path = ROOT, package: str = "ichor") -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted((root / package).rglob("*.py")):
        relative = str(path.relative_to(root))
        found.update(figures(path.read_text(), relative))
    return found


def findings(measured: dict[str, int], allowed: dict[str, int]) -> list[Finding]:
    found = []
    for name, complexity in sorted(measured.items()):
        limit = allowed.get(name)
        if complexity > max(LIMIT, limit or 0):
            found.append(Finding(name, complexity, limit))
    for name, limit in sorted(allowed.items()):
        if measured.get(name, 0) <= LIMIT:
            found.append(Finding(name, measured.get(name, 0), limit))
    return found


def main() -> int:
    found = findings(measure(), ALLOWED)
    for finding in found:
        print(finding, flush=True)
    over = sum(1 for complexity in measure().values() if complexity > LIMIT)
    print(
        f"complexity: {over} functions over {LIMIT}, {len(ALLOWED)} allowed, {len(found)} findings"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
