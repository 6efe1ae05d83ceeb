"""The generated pages (troubleshooting, compatibility, metrics) equal what the code
renders, and every reason carries the text its page shows.

A reason added to ``ichor/api`` without its ``#:`` text fails here, saying which reason,
in which file, and what to write; one with its text but no regeneration fails the page's
equality, saying ``make docs``.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import pages, reasons


@pytest.mark.parametrize("part", pages.parts(), ids=lambda p: p.page.name)
def test_the_page_holds_what_the_code_renders(part: pages.Part) -> None:
    found = part.found()
    assert found, f"{part.page.name} lost its markers {part.begin!r} ... {part.end!r}"
    assert found == part.render(), (
        f"docs/{part.page.name} differs from the code it is generated from: run `make docs`"
    )


def test_every_reason_says_what_it_means_and_the_step_to_take() -> None:
    missing = reasons.missing()
    assert not missing, "\n".join(missing)


def test_the_reasons_cover_every_enum_of_the_api_and_the_refusal_rules() -> None:
    names = [cls.__name__ for cls in reasons.reason_enums()]
    assert {
        "ClusterReason",
        "SpecReachedReason",
        "AutoPatchReason",
        "OperationReason",
        "InstallationReason",
        "Rule",
        "ClusterEventReason",
        "OperationEventReason",
        "AutoPatchEventReason",
        "ReleaseCheckEventReason",
        "RecordEventReason",
    } <= set(names)
    assert len(names) == len(set(names))


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> ModuleType:
    """A module of reasons as another change would add it (inspect reads its source)."""
    path = tmp_path / "later_reasons.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location("later_reasons", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "later_reasons", module)
    spec.loader.exec_module(module)
    return module


def test_a_reason_added_without_its_text_is_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What another change adding a reason meets: the member, its file, and the line to
    write, before any page is generated."""
    module = _module(
        tmp_path,
        monkeypatch,
        """
        from enum import StrEnum

        class HaltReason(StrEnum):
            #: Nothing halts. Step: none.
            NONE = "None"
            UNHALTED = "Unhalted"
            #: Said without a step.
            SCOPED = "Scoped"
        """,
    )
    found = reasons.missing([module.HaltReason])
    assert len(found) == 2
    unhalted, scoped = found
    assert "HaltReason.UNHALTED ('Unhalted') has no #: comment" in unhalted
    assert "later_reasons.py" in unhalted
    assert "Step:" in unhalted
    assert "make docs" in unhalted
    assert "HaltReason.SCOPED ('Scoped')" in scoped
    assert "does not say both what the reason means and the step" in scoped
    with pytest.raises(reasons.MissingText, match="UNHALTED"):
        reasons.entries(module.HaltReason)


def test_a_reason_enum_added_later_is_picked_up_and_titled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _module(
        tmp_path,
        monkeypatch,
        '''
        from enum import StrEnum

        class HaltReason(StrEnum):
            """Reasons of the fleet's halt."""

            #: A halt ended early. Step: none.
            UNHALTED = "Unhalted"

        class NotAReasonEnum(StrEnum):
            A = "a"
        ''',
    )
    assert reasons.reason_enums((module,)) == [module.HaltReason]
    (entry,) = reasons.entries(module.HaltReason)
    assert (entry.reason, entry.meaning, entry.step) == ("Unhalted", "A halt ended early.", "none")
    assert reasons._title(module.HaltReason) == "Reasons of the fleet's halt"


def test_a_reason_text_cannot_break_the_table() -> None:
    assert reasons._markdown("a | b ``c``") == "a \\| b `c`"
