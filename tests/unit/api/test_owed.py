"""Owed Events as stored (``ichor.api.owed``): their keys, the Event names those give, and
what a reader makes of a status or annotation it did not write."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from ichor.api import owed
from ichor.controller.recorder import recorder

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
#: A DNS subdomain (RFC 1123), what the API server takes as an Event's name.
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def test_a_key_is_a_function_of_its_parts_alone() -> None:
    assert owed.key("uid", "Started") == owed.key("uid", "Started")
    assert owed.key("uid", "Started") != owed.key("uid", "Succeeded")
    assert owed.key("uid", "Started") != owed.key("other", "Started")
    # parts are kept apart: ("ab", "c") is not ("a", "bc")
    assert owed.key("ab", "c") != owed.key("a", "bc")
    assert len(owed.key("x")) == owed.KEY_LENGTH


@pytest.mark.parametrize(
    "involved", ["prod", "a" * 253, "x" * 240 + ".y-", "auto-patch.prod", "-", ""]
)
def test_the_event_name_is_a_subdomain_of_at_most_253_characters(involved: str) -> None:
    name = owed.event_name(involved, owed.key("uid", "Started"))
    assert len(name) <= owed.NAME_LIMIT
    assert SUBDOMAIN.match(name), name
    assert name.endswith("." + owed.key("uid", "Started"))


def test_a_message_is_cut_to_what_the_api_takes() -> None:
    event = owed.owe("Warning", "Override", "m" * 5000, at=NOW)
    assert len(event.message) == owed.MESSAGE_LIMIT
    assert event.message.endswith("...")
    assert event.type == "Warning"
    assert owed.owe("anything else", "Started", "m", at=NOW).type == "Normal"


def test_pending_reads_only_what_it_can_and_skips_the_rest() -> None:
    good = owed.owe("Normal", "Started", "ok", at=NOW).to_api()
    status = {
        owed.FIELD: {
            "k1": good,
            "k2": {"type": "Loud", "reason": "X", "message": "m", "at": "2026-12-03T08:00:00Z"},
            "k3": "not an object",
            "k4": None,
            "k5": {"reason": "no type"},
        }
    }
    assert list(owed.pending(status)) == ["k1"]
    assert owed.pending({owed.FIELD: ["a", "list"]}) == {}
    assert owed.pending(None) == {}
    assert owed.pending("garbage") == {}


def test_the_annotation_round_trips_and_garbage_reads_as_nothing() -> None:
    entries = {"k": owed.owe("Normal", "AutoPatchStarted", "s", at=NOW, about=owed.CLUSTER)}
    dumped = owed.dump(entries)
    assert owed.annotated({owed.OWED_ANNOTATION: dumped}) == entries
    assert json.loads(dumped)["k"]["about"] == "TalosCluster"
    for garbage in ("{", "[]", "null", "7", '{"k": 1}'):
        assert owed.annotated({owed.OWED_ANNOTATION: garbage}) == {}
    assert owed.annotated({owed.OWED_ANNOTATION: 7}) == {}
    assert owed.annotated(None) == {}


def test_merged_keeps_the_newest_when_more_wait_than_may() -> None:
    entries = {
        f"k{i:02d}": owed.owe("Normal", "R", f"{i}", at=NOW + timedelta(seconds=i))
        for i in range(owed.MOST + 5)
    }
    kept = owed.merged({}, entries)
    assert kept is not None
    assert len(kept) == owed.MOST
    assert min(int(e.message) for e in kept.values()) == 5
    assert owed.merged(None, {}) is None
    assert [k for k, _ in owed.in_order(kept)][:2] == ["k05", "k06"]


def test_each_admission_record_has_a_name_of_its_own_for_the_life_of_the_object() -> None:
    """A record's Event is named by the object's uid and the record's number among all the
    records it ever held, so the first record after two were removed is record 2, never
    record 0 again (an Event of that name exists: it would be taken as posted)."""
    assert recorder.record_key("uid", 0) != recorder.record_key("uid", 2)
    assert recorder.record_key("uid", 2) == recorder.record_key("uid", 2)
    assert recorder.record_key("uid", 2) != recorder.record_key("uid2", 2)
    body = {"metadata": {"annotations": {recorder.POSTED: "2"}}}
    assert recorder.posted_before(body) == 2
    for raw in ("-3", "x", "", "1e3"):
        assert recorder.posted_before({"metadata": {"annotations": {recorder.POSTED: raw}}}) == 0
    assert recorder.posted_before({}) == 0
