"""``ichor autopatch unhalt``'s arguments and the Event the recorder posts for a request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ichor.api import records
from ichor.api.autopatch import Halt, HaltScope
from ichor.cli.main import main
from ichor.controller.recorder.recorder import unhalt_message
from ichor.settings import CliSettings

NOW = datetime(2026, 6, 1, 2, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["kubernetes"],
        ["kubernetes", "v1.36.7", "--all"],
        ["cilium", "v1.20.4"],
        ["kubernetes", "1.36.7"],
        ["kubernetes", "v1.36.7-rc.1"],
        ["kubernetes/v1.36.7"],
    ],
)
def test_unhalt_takes_a_component_and_a_version_or_all(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["autopatch", "unhalt", *argv], settings=CliSettings(kubeconfig="/nonexistent"))
    assert code == 2
    said = capsys.readouterr().err
    assert "Traceback" not in said
    assert "COMPONENT VERSION" in said or "<component>/<version>" in said


def halt(operation: str, scope: HaltScope) -> Halt:
    return Halt(component="kubernetes", version="v1.36.7", cluster=f"team-a/{operation}",
                operation=operation, reason="x", time=NOW, until=NOW + timedelta(hours=4),
                scope=scope, lifted_by="olivia", lifted_at=NOW)  # fmt: skip


def test_the_event_names_the_requester_and_what_was_lifted() -> None:
    record = records.Record(
        kind=records.RecordKind.UNHALT, user="olivia", detail="kubernetes/v1.36.7"
    )
    said = unhalt_message(
        record, (halt("op-a", HaltScope.NAMESPACE), halt("op-b", HaltScope.FLEET))
    )
    assert said.startswith("User olivia lifted the auto-patch halt kubernetes/v1.36.7")
    assert "TalosOperation op-a; namespace team-a" in said
    assert "TalosOperation op-b; the fleet" in said
    nothing = unhalt_message(record, ())
    assert "User olivia asked to lift" in nothing
    assert "nothing was lifted" in nothing
    many = unhalt_message(record, tuple(halt(f"op-{i}", HaltScope.FLEET) for i in range(30)))
    assert "and 22 more" in many
    assert len(many) < 2048
