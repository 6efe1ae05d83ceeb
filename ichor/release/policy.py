"""A site's policy: versions a platform team refuses, each with the reason a person wrote.

The IchorInstallation's ``spec.policy`` holds it; the controllers and the webhook hand it
to the rules, which read it through ``refusals.judge`` with the table (this module reads
no object). It can only refuse: its refusal (rule ``SitePolicy``) names the entry and its
reason, and only the override verb passes it. A policy that cannot be read refuses every
step it would judge (``SitePolicyUnreadable``). More in docs/design/notes.md,
"ichor/release/policy.py".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ichor.release import compat
from ichor.release.refusals import Refusal, Rule, Verdict, judge, refuse
from ichor.release.versions import Version, VersionError, parse

__all__ = [
    "MAX_ENTRIES",
    "NO_POLICY",
    "Entry",
    "EntryKind",
    "PolicyComponent",
    "SitePolicy",
    "Span",
    "read",
]

Minor = tuple[int, int]

#: Where the policy lives, for the sentences.
WHERE = "IchorInstallation ichor, spec.policy"
#: Entries of each list (the CRD caps them too).
MAX_ENTRIES = 64
#: The longest reason kept (the CRD caps it too).
MAX_REASON = 512
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_VERSION = re.compile(r"v?(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})")
_MINOR = re.compile(r"v?(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})")
_NO_OVERRIDE = "no override passes a policy that cannot be read"


class PolicyComponent(StrEnum):
    TALOS = "talos"
    KUBERNETES = "kubernetes"
    CILIUM = "cilium"

    @property
    def display(self) -> str:
        return {"talos": "Talos", "kubernetes": "Kubernetes", "cilium": "Cilium"}[self.value]


class EntryKind(StrEnum):
    #: ``spec.policy.deny``: versions (and ranges) refused, alone or with another's.
    DENY = "Deny"
    #: ``spec.policy.highestMinor``: every minor above one refused.
    HIGHEST_MINOR = "HighestMinor"


@dataclass(frozen=True, slots=True)
class Span:
    """Single versions and inclusive ranges (either end may be open)."""

    exact: tuple[Version, ...] = ()
    ranges: tuple[tuple[Version | None, Version | None], ...] = ()

    def holds(self, version: Version) -> bool:
        if any(version == one for one in self.exact):
            return True
        return any(
            (low is None or version >= low) and (high is None or version <= high)
            for low, high in self.ranges
        )

    def text(self, component: PolicyComponent) -> str:
        def shown(version: Version) -> str:
            return str(version) if component is PolicyComponent.CILIUM else version.tag

        parts = [shown(one) for one in self.exact]
        for low, high in self.ranges:
            if low is not None and high is not None:
                parts.append(f"{shown(low)} to {shown(high)}")
            elif low is not None:
                parts.append(f"{shown(low)} and newer")
            elif high is not None:
                parts.append(f"{shown(high)} and older")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry: a person's refusal, its name and reason."""

    name: str
    kind: EntryKind
    component: PolicyComponent
    reason: str
    #: DENY: the versions refused.
    versions: Span = Span()
    #: DENY: refused only together with these versions of another component.
    together: tuple[PolicyComponent, Span] | None = None
    #: HIGHEST_MINOR: every minor above this one is refused.
    highest: Minor | None = None

    @property
    def components(self) -> frozenset[PolicyComponent]:
        """The components whose step the entry judges."""
        other = {self.together[0]} if self.together is not None else set()
        return frozenset({self.component, *other})

    def _holds(self, component: PolicyComponent, version: Version | None) -> bool:
        if version is None:
            return False
        if self.kind is EntryKind.HIGHEST_MINOR:
            assert self.highest is not None
            return version.minor_key > self.highest
        return self.versions.holds(version)

    def holds(self, state: Mapping[PolicyComponent, Version | None]) -> bool:
        """Whether the versions ``state`` names are the ones this entry refuses."""
        if not self._holds(self.component, state.get(self.component)):
            return False
        if self.together is None:
            return True
        other, span = self.together
        found = state.get(other)
        return found is not None and span.holds(found)

    def describe(self) -> str:
        """What the entry refuses, for a sentence: ``denies Talos v1.14.4``."""
        name = self.component.display
        if self.kind is EntryKind.HIGHEST_MINOR:
            assert self.highest is not None
            return f"holds {name} at {compat.minor_text(self.highest)}"
        said = f"denies {name} {self.versions.text(self.component)}"
        if self.together is not None:
            other, span = self.together
            said += f" together with {other.display} {span.text(other)}"
        return said

    @property
    def where(self) -> str:
        field = "deny" if self.kind is EntryKind.DENY else "highestMinor"
        return f"{WHERE}.{field} entry {self.name!r}"


@dataclass(frozen=True, slots=True)
class SitePolicy:
    """The entries of a site's policy, or why it cannot be read (``unreadable``)."""

    entries: tuple[Entry, ...] = ()
    unreadable: str | None = None

    @property
    def empty(self) -> bool:
        return not self.entries and self.unreadable is None

    def entry(self, name: str) -> Entry | None:
        return next((entry for entry in self.entries if entry.name == name), None)

    def step(
        self,
        *,
        moved: PolicyComponent,
        talos: str | Version | None,
        kubernetes: str | Version | None,
        cilium: object = None,
    ) -> Verdict:
        """What the policy says of a step that moves ``moved``, leaving the cluster on
        ``talos``, ``kubernetes`` and (when the Cilium half applies) ``cilium``.

        Only entries that name the moved component are asked: a cluster that already
        runs what an entry denies is not stopped from moving something else. A version
        that does not parse matches nothing here (the form and unknown rules refuse it).
        """
        state = _state(talos=talos, kubernetes=kubernetes, cilium=cilium)
        moved_to = state.get(moved)
        what = f"{moved.display} {_shown(moved, moved_to)}" if moved_to else moved.display
        if self.unreadable is not None:
            return judge(
                (
                    refuse(
                        Rule.SITE_POLICY_UNREADABLE,
                        f"{what} is refused: this site's policy ({WHERE}) cannot be read "
                        f"({self.unreadable}), so what it denies is not known; correct "
                        f"spec.policy; {_NO_OVERRIDE}.",
                    ),
                )
            )
        if moved_to is None:
            return Verdict()
        answers: list[Refusal] = []
        for entry in self.entries:
            if moved in entry.components and entry.holds(state):
                answers.append(_refusal(entry, moved=moved, state=state))
        return judge(answers)

    def running(
        self,
        *,
        talos: str | Version | None,
        kubernetes: str | Version | None,
        cilium: object = None,
    ) -> tuple[Entry, ...]:
        """The entries that refuse what a cluster runs now (it is not moved back: this is
        for the status to say so)."""
        state = _state(talos=talos, kubernetes=kubernetes, cilium=cilium)
        return tuple(entry for entry in self.entries if entry.holds(state))


NO_POLICY = SitePolicy()


def _shown(component: PolicyComponent, version: Version | None) -> str:
    if version is None:
        return "(not read)"
    return str(version) if component is PolicyComponent.CILIUM else version.tag


def _maybe(value: object) -> Version | None:
    if isinstance(value, Version):
        return value
    if not isinstance(value, str):
        return None
    try:
        return parse(value)
    except VersionError:
        return None


def _state(
    *, talos: str | Version | None, kubernetes: str | Version | None, cilium: object
) -> dict[PolicyComponent, Version | None]:
    return {
        PolicyComponent.TALOS: _maybe(talos),
        PolicyComponent.KUBERNETES: _maybe(kubernetes),
        PolicyComponent.CILIUM: _maybe(cilium),
    }


def _refusal(
    entry: Entry, *, moved: PolicyComponent, state: Mapping[PolicyComponent, Version | None]
) -> Refusal:
    name = entry.component.display
    target = f"{moved.display} {_shown(moved, state.get(moved))}"
    if entry.together is not None:
        other = entry.together[0] if moved is entry.component else entry.component
        target += f" with {other.display} {_shown(other, state.get(other))}"
    if entry.kind is EntryKind.HIGHEST_MINOR:
        assert entry.highest is not None
        step = f"choose {name} {compat.minor_text(entry.highest)} or older"
    else:
        step = "choose another release"
    return Refusal(
        rule=Rule.SITE_POLICY,
        message=(
            f"{target} is refused by this site's policy: {entry.where} {entry.describe()} "
            f'("{entry.reason}"); {step}, or change that entry.'
        ),
        overridable=True,
        entry=entry.name,
    )


# --- reading the object's spec.policy ---------------------------------------------------------

_DENY_KEYS = frozenset({"name", "component", "versions", "range", "with", "reason"})
_WITH_KEYS = frozenset({"component", "versions", "range"})
_RANGE_KEYS = frozenset({"from", "to"})
_HIGHEST_KEYS = frozenset({"name", "component", "minor", "reason"})
_POLICY_KEYS = frozenset({"deny", "highestMinor"})


class _Problems:
    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, where: str, what: str) -> None:
        self.found.append(f"{where} {what}")


def _version(text: object, where: str, problems: _Problems) -> Version | None:
    if not isinstance(text, str) or not _VERSION.fullmatch(text):
        problems.add(where, f"{text!r} is not a final release X.Y.Z (vX.Y.Z)")
        return None
    return parse(text)


def _component(value: object, where: str, problems: _Problems) -> PolicyComponent | None:
    try:
        return PolicyComponent(value) if isinstance(value, str) else PolicyComponent("")
    except ValueError:
        problems.add(where, f"{value!r} is not one of talos, kubernetes, cilium")
        return None


def _unknown_keys(
    raw: Mapping[str, object], known: frozenset[str], where: str, problems: _Problems
) -> None:
    for key in sorted(set(raw) - known, key=str):
        problems.add(
            f"{where}.{key}",
            "is not a field of a site policy, which can only refuse (its fields: "
            f"{', '.join(sorted(known))})",
        )


def _span(raw: Mapping[str, object], where: str, problems: _Problems) -> Span | None:
    """The versions an entry (or its ``with``) names: ``versions`` and/or ``range``."""
    versions, bounds = raw.get("versions"), raw.get("range")
    if versions is None and bounds is None:
        problems.add(where, "names no versions (versions or range)")
        return None
    return Span(
        exact=_exact(versions, f"{where}.versions", problems),
        ranges=_ranges(bounds, f"{where}.range", problems),
    )


def _exact(versions: object, where: str, problems: _Problems) -> tuple[Version, ...]:
    """The releases of ``versions`` (absent: none), each a problem when it is not one."""
    if versions is None:
        return ()
    if not isinstance(versions, list) or not versions:
        problems.add(where, "is not a list of releases")
        return ()
    found = (_version(text, f"{where}[{index}]", problems) for index, text in enumerate(versions))
    return tuple(version for version in found if version is not None)


def _ranges(
    bounds: object, where: str, problems: _Problems
) -> tuple[tuple[Version | None, Version | None], ...]:
    """The range of ``range`` (absent: none): from and/or to, never downward."""
    if bounds is None:
        return ()
    if not isinstance(bounds, Mapping) or not bounds:
        problems.add(where, "is not a range with from and/or to")
        return ()
    _unknown_keys(bounds, _RANGE_KEYS, where, problems)
    low = _version(bounds["from"], f"{where}.from", problems) if "from" in bounds else None
    high = _version(bounds["to"], f"{where}.to", problems) if "to" in bounds else None
    if low is not None and high is not None and low > high:
        problems.add(where, f"goes from {low} down to {high}, and holds nothing")
    return ((low, high),)


def _reason(raw: Mapping[str, object], where: str, problems: _Problems) -> str:
    reason = raw.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        problems.add(f"{where}.reason", "is missing: each entry says why, in a person's words")
        return ""
    said = " ".join(reason.split())
    if len(said) > MAX_REASON:
        problems.add(f"{where}.reason", f"is longer than {MAX_REASON} characters")
    return said


def _name(raw: Mapping[str, object], where: str, problems: _Problems) -> str:
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        problems.add(f"{where}.name", f"{name!r} is not a lowercase DNS label")
        return ""
    return name


@dataclass(frozen=True)
class _Head:
    """What every entry holds: the raw entry, its name and its component."""

    raw: Mapping[str, object]
    name: str
    component: PolicyComponent | None


def _head(raw: object, keys: frozenset[str], where: str, problems: _Problems) -> _Head | None:
    """The name and component of an entry whose fields are ``keys`` (None: not an entry)."""
    if not isinstance(raw, Mapping):
        problems.add(where, "is not an entry")
        return None
    _unknown_keys(raw, keys, where, problems)
    name = _name(raw, where, problems)
    return _Head(raw, name, _component(raw.get("component"), f"{where}.component", problems))


def _deny(given: object, where: str, problems: _Problems) -> Entry | None:
    head = _head(given, _DENY_KEYS, where, problems)
    if head is None:
        return None
    span = _span(head.raw, where, problems)
    together = _together(head, where, problems)
    reason = _reason(head.raw, where, problems)
    if span is None:
        return None
    return _entry(head, EntryKind.DENY, reason, versions=span, together=together)


def _together(head: _Head, where: str, problems: _Problems) -> tuple[PolicyComponent, Span] | None:
    """The other component's versions (``with``) the entry refuses its own together with
    (None: none, or not readable)."""
    if "with" not in head.raw:
        return None
    other_raw = head.raw["with"]
    if not isinstance(other_raw, Mapping):
        problems.add(f"{where}.with", "is not a component and its versions")
        return None
    _unknown_keys(other_raw, _WITH_KEYS, f"{where}.with", problems)
    other = _component(other_raw.get("component"), f"{where}.with.component", problems)
    other_span = _span(other_raw, f"{where}.with", problems)
    if other is not None and other is head.component:
        problems.add(f"{where}.with.component", "names the entry's own component")
        return None
    if other is None or other_span is None:
        return None
    return (other, other_span)


def _entry(
    head: _Head,
    kind: EntryKind,
    reason: str,
    *,
    versions: Span = Span(),
    together: tuple[PolicyComponent, Span] | None = None,
    highest: Minor | None = None,
) -> Entry | None:
    """The entry, once its name and component are read (None: either is not)."""
    if head.component is None or not head.name:
        return None
    return Entry(
        name=head.name,
        kind=kind,
        component=head.component,
        reason=reason,
        versions=versions,
        together=together,
        highest=highest,
    )


def _known_minors(component: PolicyComponent) -> Sequence[Minor]:
    if component is PolicyComponent.TALOS:
        return compat.known_talos_minors()
    if component is PolicyComponent.KUBERNETES:
        return sorted(compat.known_kubernetes_minors())
    return sorted(compat.CILIUM_KUBERNETES)


def _highest(given: object, where: str, problems: _Problems) -> Entry | None:
    head = _head(given, _HIGHEST_KEYS, where, problems)
    if head is None:
        return None
    raw, component = head.raw, head.component
    text = raw.get("minor")
    minor: Minor | None = None
    if not isinstance(text, str) or not (match := _MINOR.fullmatch(text)):
        problems.add(f"{where}.minor", f"{text!r} is not a minor X.Y")
    else:
        minor = (int(match[1]), int(match[2]))
    reason = _reason(raw, where, problems)
    if component is not None and minor is not None:
        known = _known_minors(component)
        if known and minor > max(known):
            problems.add(
                f"{where}.minor",
                f"{compat.minor_text(minor)} is above every {component.display} minor this "
                f"Ichor knows (up to {compat.minor_text(max(known))}): it would claim to allow "
                f"what the table refuses, and a site policy can only refuse; set "
                f"{compat.minor_text(max(known))} or lower",
            )
    if minor is None:
        return None
    return _entry(head, EntryKind.HIGHEST_MINOR, reason, highest=minor)


def problems(raw: object) -> tuple[str, ...]:
    """What keeps ``spec.policy`` from being read, one sentence each (empty: readable).

    The webhook refuses a write of a policy with any of these; the rules refuse every
    step under a stored one (``read``)."""
    return _read(raw)[1]


def read(raw: object) -> SitePolicy:
    """The policy of an IchorInstallation's ``spec.policy`` (None or absent: no policy)."""
    entries, found = _read(raw)
    if found:
        shown = "; ".join(found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
        return SitePolicy(unreadable=shown)
    return SitePolicy(entries=entries)


def _read(raw: object) -> tuple[tuple[Entry, ...], tuple[str, ...]]:
    if raw is None:
        return (), ()
    problems = _Problems()
    if not isinstance(raw, Mapping):
        return (), ("spec.policy is not an object",)
    _unknown_keys(raw, _POLICY_KEYS, "spec.policy", problems)
    entries: list[Entry] = []
    for key, reader in (("deny", _deny), ("highestMinor", _highest)):
        listed = raw.get(key)
        if listed is None:
            continue
        if not isinstance(listed, list):
            problems.add(f"spec.policy.{key}", "is not a list")
            continue
        if len(listed) > MAX_ENTRIES:
            problems.add(f"spec.policy.{key}", f"holds more than {MAX_ENTRIES} entries")
            continue
        for index, item in enumerate(listed):
            entry = reader(item, f"spec.policy.{key}[{index}]", problems)
            if entry is not None:
                entries.append(entry)
    names = [entry.name for entry in entries]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.add("spec.policy", f"names entry {name!r} more than once")
    return tuple(entries), tuple(problems.found)
