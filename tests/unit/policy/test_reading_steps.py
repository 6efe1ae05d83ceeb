"""The named steps that read a site policy's versions and entries (``ichor.release.policy``)
and machinery's bounds (``ichor.release.machinery``), each on its own: a change to one
step fails the test that names it."""

from __future__ import annotations

from ichor.release import machinery, policy
from ichor.release.policy import PolicyComponent, Span
from ichor.release.versions import Version, parse


def v(tag: str) -> Version:
    return parse(tag)


def test__exact_reads_each_release_and_names_each_one_that_is_not() -> None:
    problems = policy._Problems()
    assert policy._exact(None, "e.versions", problems) == ()
    assert policy._exact(["1.14.4", "garbage", "v1.14.5"], "e.versions", problems) == (
        v("v1.14.4"),
        v("v1.14.5"),
    )
    assert problems.found == ["e.versions[1] 'garbage' is not a final release X.Y.Z (vX.Y.Z)"]
    bad: object
    for bad in ([], "1.14.4", {"a": 1}):
        found = policy._Problems()
        assert policy._exact(bad, "e.versions", found) == ()
        assert found.found == ["e.versions is not a list of releases"]


def test__ranges_reads_either_end_and_refuses_a_downward_one() -> None:
    problems = policy._Problems()
    assert policy._ranges(None, "e.range", problems) == ()
    assert policy._ranges({"from": "1.14.0"}, "e.range", problems) == ((v("v1.14.0"), None),)
    assert policy._ranges({"to": "1.14.2"}, "e.range", problems) == ((None, v("v1.14.2")),)
    one = policy._ranges({"from": "1.14.2", "to": "1.14.2"}, "e.range", problems)
    assert one == ((v("v1.14.2"), v("v1.14.2")),)
    assert problems.found == []  # a range of one release holds it
    down = policy._ranges({"from": "1.14.2", "to": "1.14.0"}, "e.range", problems)
    assert down == ((v("v1.14.2"), v("v1.14.0")),)
    assert problems.found == ["e.range goes from 1.14.2 down to 1.14.0, and holds nothing"]
    wrong: object
    for wrong in ({}, ["1.14.0"], "from"):
        found = policy._Problems()
        assert policy._ranges(wrong, "e.range", found) == ()
        assert found.found == ["e.range is not a range with from and/or to"]
    extra = policy._Problems()
    policy._ranges({"from": "1.14.0", "upto": "x"}, "e.range", extra)
    assert len(extra.found) == 1
    assert extra.found[0].startswith("e.range.upto is not a field of a site policy")


def test__span_needs_versions_or_a_range_and_reads_the_versions_first() -> None:
    problems = policy._Problems()
    assert policy._span({}, "e", problems) is None
    assert problems.found == ["e names no versions (versions or range)"]
    both = policy._Problems()
    span = policy._span({"versions": ["bad"], "range": {"from": "worse"}}, "e", both)
    assert span == Span(ranges=((None, None),))  # an open range, as the entry wrote it
    assert [found.split(" ")[0] for found in both.found] == ["e.versions[0]", "e.range.from"]
    alone = policy._Problems()
    assert policy._span({"versions": ["1.14.4"]}, "e", alone) == Span(exact=(v("v1.14.4"),))
    assert policy._span({"range": {"to": "1.14.2"}}, "e", alone) == Span(
        ranges=((None, v("v1.14.2")),)
    )
    assert alone.found == []
    read = policy._span({"versions": ["1.14.4"], "range": {"to": "1.14.2"}}, "e", both)
    assert read == Span(exact=(v("v1.14.4"),), ranges=((None, v("v1.14.2")),))


def test__head_reads_the_name_and_component_of_an_entry() -> None:
    problems = policy._Problems()
    assert policy._head(["not", "an", "entry"], policy._DENY_KEYS, "d[0]", problems) is None
    assert problems.found == ["d[0] is not an entry"]
    found = policy._Problems()
    raw = {"name": "nic", "component": "talos", "size": 3}
    head = policy._head(raw, policy._DENY_KEYS, "d[0]", found)
    assert head is not None
    assert (head.raw, head.name, head.component) == (raw, "nic", PolicyComponent.TALOS)
    assert [f.split(" ")[0] for f in found.found] == ["d[0].size"]
    worse = policy._Problems()
    head = policy._head({"name": "Not A Label", "component": "etcd"}, frozenset(), "h", worse)
    assert head is not None
    assert (head.name, head.component) == ("", None)
    assert [f.split(" ")[0] for f in worse.found] == [
        "h.component",  # the unknown fields first, sorted
        "h.name",
        "h.name",  # then the name, then the component
        "h.component",
    ]


def test__as_version_parses_a_tag_and_keeps_a_version() -> None:
    version = v("v1.14.4")
    assert machinery._as_version(version) is version
    assert machinery._as_version("v1.14.4") == version


def test__outside_is_old_below_new_at_or_above_the_bounds() -> None:
    low, high = (1, 12, 0), (1, 15, 0)
    assert machinery._outside(v("v1.11.9"), low=low, high=high) == "old"
    assert machinery._outside(v("v1.12.0"), low=low, high=high) is None
    assert machinery._outside(v("v1.14.9"), low=low, high=high) is None
    assert machinery._outside(v("v1.15.0"), low=low, high=high) == "new"


def head(**raw: object) -> policy._Head:
    found = policy._head(dict(raw), policy._DENY_KEYS, "d[0]", policy._Problems())
    assert found is not None
    return found


def test__together_reads_another_components_versions_only() -> None:
    problems = policy._Problems()
    assert policy._together(head(component="talos"), "d[0]", problems) is None
    cilium = {"component": "cilium", "versions": ["1.20.4"]}
    together = policy._together(head(component="kubernetes", **{"with": cilium}), "d", problems)
    assert together == (PolicyComponent.CILIUM, Span(exact=(v("v1.20.4"),)))
    assert problems.found == []
    extra = policy._Problems()
    wider = {**cilium, "reason": "x"}
    assert policy._together(head(component="kubernetes", **{"with": wider}), "d", extra) == together
    assert [found.split(" ")[0] for found in extra.found] == ["d.with.reason"]
    own = policy._Problems()
    same = {"component": "talos", "versions": ["1.14.4"]}
    assert policy._together(head(component="talos", **{"with": same}), "d", own) is None
    assert own.found == ["d.with.component names the entry's own component"]
    bad = policy._Problems()
    assert policy._together(head(component="talos", **{"with": "cilium"}), "d", bad) is None
    assert bad.found == ["d.with is not a component and its versions"]
    none = policy._Problems()
    assert (
        policy._together(head(component="talos", **{"with": {"component": "cilium"}}), "d", none)
        is None
    )
    assert none.found == ["d.with names no versions (versions or range)"]


def test__entry_needs_a_name_and_a_component() -> None:
    entry = policy._entry(
        head(name="nic", component="talos"), policy.EntryKind.HIGHEST_MINOR, "r", highest=(1, 14)
    )
    assert entry is not None
    assert (entry.name, entry.component, entry.highest, entry.reason) == (
        "nic",
        PolicyComponent.TALOS,
        (1, 14),
        "r",
    )
    assert policy._entry(head(name="nic"), policy.EntryKind.DENY, "r") is None
    assert policy._entry(head(component="talos"), policy.EntryKind.DENY, "r") is None
