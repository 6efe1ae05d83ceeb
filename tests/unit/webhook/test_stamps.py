"""The annotations the webhook writes into what it admits, and the check of them."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.api import records
from ichor.webhook import stamps


def record(user: str, detail: str = "update") -> records.Record:
    return records.Record(
        kind=records.RecordKind.OVERRIDE,
        user=user,
        detail=detail,
        passed=(records.Passed(rule="TalosKubernetes", message="Talos 1.14 runs 1.33 to 1.37"),),
    )


def held(*found: records.Record, **extra: str) -> dict[str, Any]:
    value = records.dump(found)
    return {**({records.RECORDS: value} if value else {}), **extra}


A, B, C = record("olivia"), record("root"), record("olivia", "create")


def test_a_write_keeps_the_old_records_and_adds_its_own() -> None:
    stamp = stamps.cluster_stamp(old=held(A, B), given=held(), operator=False, admitted=C)
    assert stamp.records == records.dump([A, B, C])
    assert stamps.problem(stamp, held(A, B, C), what="x") is None


@pytest.mark.parametrize(
    "given",
    [held(), held(A), held(B), held(A, C), held(C, A, B)],
    ids=["all-dropped", "tail-dropped", "head-dropped", "one-replaced", "reordered"],
)
def test_a_user_cannot_drop_or_change_a_record(given: dict[str, Any]) -> None:
    stamp = stamps.cluster_stamp(old=held(A, B), given=given, operator=False, admitted=None)
    assert stamp.records == records.dump([A, B])
    problem = stamps.problem(stamp, given, what="TalosCluster team-a/prod")
    assert problem is not None
    assert "written by the ichor admission webhook alone" in problem


def test_the_operator_drops_what_it_posted_from_the_front_only() -> None:
    front = stamps.cluster_stamp(old=held(A, B), given=held(B), operator=True, admitted=None)
    assert front.records == records.dump([B])
    everything = stamps.cluster_stamp(old=held(A, B), given=held(), operator=True, admitted=None)
    assert everything.records is None
    middle = stamps.cluster_stamp(old=held(A, B, C), given=held(A, C), operator=True, admitted=None)
    assert middle.records == records.dump([A, B, C])


def test_a_record_no_reader_can_parse_was_never_one() -> None:
    old = {records.RECORDS: "not json"}
    stamp = stamps.cluster_stamp(old=old, given=old, operator=False, admitted=A)
    assert stamp.records == records.dump([A])


def test_a_create_starts_from_nothing_whatever_the_user_wrote() -> None:
    forged = held(B)
    stamp = stamps.cluster_stamp(old=None, given=forged, operator=False, admitted=None)
    assert stamp.records is None
    assert stamps.problem(stamp, forged, what="x") is not None
    assert stamps.problem(stamp, {}, what="x") is None


def test_an_operations_stamp_is_its_creator_and_never_moves() -> None:
    created = stamps.operation_stamp(
        old=None, given={records.OVERRIDE_BY: "nadia"}, operator=False, admitted=A,
        override_by="olivia",
    )  # fmt: skip
    assert created.annotations()[records.OVERRIDE_BY] == "olivia"
    assert stamps.problem(created, {records.OVERRIDE_BY: "nadia"}, what="x") is not None
    kept = stamps.operation_stamp(
        old={records.OVERRIDE_BY: "olivia"}, given={records.OVERRIDE_BY: "nadia"},
        operator=True, admitted=None, override_by=None,
    )  # fmt: skip
    assert kept.annotations()[records.OVERRIDE_BY] == "olivia"
    removed = stamps.problem(kept, {}, what="x")
    assert removed is not None
    assert records.OVERRIDE_BY in removed
    plain = stamps.operation_stamp(
        old=None, given={}, operator=False, admitted=None, override_by=None
    )
    assert stamps.problem(plain, {records.OVERRIDE_BY: "olivia"}, what="x") is not None


def test_at_most_sixteen_records_wait_and_none_is_dropped_for_room() -> None:
    waiting = [record(f"u{i}") for i in range(records.MAX_PENDING)]
    stamp = stamps.cluster_stamp(
        old=held(*waiting), given=held(*waiting), operator=False, admitted=A
    )
    refusal = stamps.too_many(stamp, what="TalosCluster team-a/prod")
    assert refusal is not None
    assert "no record is ever dropped" in refusal
    fits = stamps.cluster_stamp(old=held(*waiting[1:]), given=held(), operator=False, admitted=A)
    assert stamps.too_many(fits, what="x") is None


def test_records_read_back_as_written_and_refuse_garbage() -> None:
    assert records.read(held(A, B)) == (A, B)
    assert records.read({}) == ()
    for bad in ("[1]", "{}", "null", "x", '[{"kind": "Nope", "user": "a", "detail": "b"}]'):
        with pytest.raises(records.RecordsUnreadable):
            records.read({records.RECORDS: bad})
    message = records.message(A, kind="TalosCluster", namespace="team-a", name="prod")
    assert message.startswith("User olivia overrode a refusal of TalosCluster team-a/prod")
