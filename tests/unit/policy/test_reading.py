"""A site's policy is read exactly: every entry it can hold, and every way a written
policy is refused (above all, anything that would allow rather than refuse)."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.release import policy
from ichor.release.policy import EntryKind, PolicyComponent, SitePolicy
from ichor.release.refusals import Rule
from ichor.release.versions import parse
from tests.support import table

#: A policy that uses every form an entry can take.
EVERY_FORM: dict[str, Any] = {
    "deny": [
        {
            "name": "nic-regression",
            "component": "talos",
            "versions": ["v1.14.4"],
            "reason": "NIC driver regression on the R650s (INC-1234)",
        },
        {
            "name": "early-patches",
            "component": "kubernetes",
            "range": {"from": "v1.36.0", "to": "v1.36.2"},
            "reason": "apiserver memory leak",
        },
        {
            "name": "cilium-pair",
            "component": "kubernetes",
            "range": {"from": "v1.36.0"},
            "with": {"component": "cilium", "versions": ["1.20.4"]},
            "reason": "our conformance run failed",
        },
    ],
    "highestMinor": [
        {
            "name": "k8s-validation",
            "component": "kubernetes",
            "minor": "1.36",
            "reason": "1.37 is not validated yet (PLAT-412)",
        }
    ],
}


def test_every_form_is_read() -> None:
    site = policy.read(EVERY_FORM)
    assert site.unreadable is None
    assert [entry.name for entry in site.entries] == [
        "nic-regression",
        "early-patches",
        "cilium-pair",
        "k8s-validation",
    ]
    nic, early, pair, held = site.entries
    assert (nic.kind, nic.component) == (EntryKind.DENY, PolicyComponent.TALOS)
    assert nic.versions.holds(parse("v1.14.4"))
    assert not nic.versions.holds(parse("v1.14.5"))
    assert early.versions.holds(parse("v1.36.2"))
    assert not early.versions.holds(parse("v1.36.3"))
    assert pair.together is not None
    assert pair.together[0] is PolicyComponent.CILIUM
    assert (held.kind, held.highest) == (EntryKind.HIGHEST_MINOR, (1, 36))
    assert policy.read(None) == policy.NO_POLICY
    assert policy.read({}) == SitePolicy()
    assert policy.problems(EVERY_FORM) == ()


def _deny(**fields: Any) -> dict[str, Any]:
    base = {"name": "x", "component": "talos", "versions": ["v1.14.4"], "reason": "why"}
    base.update(fields)
    return {"deny": [{k: v for k, v in base.items() if v is not None}]}


REFUSED: dict[str, tuple[object, str]] = {
    # the forged entries: a field that would allow something is no field of a policy
    "an-allow-list": ({"allow": [{"component": "talos", "versions": ["v1.15.0"]}]}, "allow"),
    "an-entry-that-allows": (_deny(effect="Allow"), "effect"),
    "an-allow-flag": (_deny(allow=True), "allow"),
    "a-with-that-allows": (
        _deny(**{"with": {"component": "kubernetes", "versions": ["v1.36.0"], "allow": True}}),
        "allow",
    ),
    "a-range-that-allows": (
        _deny(versions=None, range={"from": "v1.14.0", "allow": "v1.15"}),
        "allow",
    ),
    # what a refusal cannot be read without
    "no-reason": (_deny(reason=None), "reason is missing"),
    "a-blank-reason": (_deny(reason="   "), "reason is missing"),
    "no-versions": (_deny(versions=None), "names no versions"),
    "an-empty-version-list": (_deny(versions=[]), "is not a list of releases"),
    "a-pre-release": (_deny(versions=["v1.14.4-rc.0"]), "is not a final release"),
    "a-word": (_deny(versions=["latest"]), "is not a final release"),
    "an-upside-down-range": (
        _deny(versions=None, range={"from": "v1.14.6", "to": "v1.14.4"}),
        "holds nothing",
    ),
    "an-empty-range": (_deny(versions=None, range={}), "is not a range"),
    "another-component": (_deny(component="etcd"), "is not one of"),
    "a-bad-name": (_deny(name="Not A Label"), "is not a lowercase DNS label"),
    "a-pair-with-itself": (
        _deny(**{"with": {"component": "talos", "versions": ["v1.14.3"]}}),
        "names the entry's own component",
    ),
    "a-name-twice": (
        {
            "deny": _deny()["deny"],
            "highestMinor": [
                {"name": "x", "component": "kubernetes", "minor": "1.36", "reason": "why"}
            ],
        },
        "names entry 'x' more than once",
    ),
    "not-an-object": ("deny everything", "is not an object"),
    "not-a-list": ({"deny": {"name": "x"}}, "is not a list"),
    "a-minor-that-is-a-release": (
        {"highestMinor": [{"name": "h", "component": "talos", "minor": "1.14.3", "reason": "r"}]},
        "is not a minor",
    ),
    # an entry that claims to allow what the table refuses: a highest minor above every
    # minor this build knows would read as "allowed up to there"
    "a-highest-minor-past-the-table": (
        {
            "highestMinor": [
                {
                    "name": "h",
                    "component": "kubernetes",
                    "minor": table.unknown_kubernetes(v=False).rsplit(".", 1)[0],
                    "reason": "r",
                }
            ]
        },
        "would claim to allow what the table refuses",
    ),
    "too-many": ({"deny": [_deny(name=f"e{i}")["deny"][0] for i in range(65)]}, "more than 64"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_policy_that_cannot_be_read_is_refused_and_refuses_everything(case: str) -> None:
    raw, words = REFUSED[case]
    found = policy.problems(raw)
    assert any(words in sentence for sentence in found), found
    site = policy.read(raw)
    assert site.entries == ()
    assert site.unreadable is not None
    # every step it would judge is refused, and no override passes it
    verdict = site.step(
        moved=PolicyComponent.KUBERNETES, talos="v1.14.3", kubernetes="v1.36.6", cilium=None
    )
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.SITE_POLICY_UNREADABLE
    assert not verdict.blocking.overridable
    assert "cannot be read" in verdict.blocking.message


def test_a_highest_minor_at_the_newest_known_is_read() -> None:
    newest = table.NEWEST_KUBERNETES_MINOR
    raw = {
        "highestMinor": [
            {
                "name": "h",
                "component": "kubernetes",
                "minor": f"{newest[0]}.{newest[1]}",
                "reason": "r",
            }
        ]
    }
    assert policy.problems(raw) == ()


def test_a_reason_is_kept_on_one_line() -> None:
    site = policy.read(_deny(reason="first line\n\tsecond   line"))
    assert site.entries[0].reason == "first line second line"
