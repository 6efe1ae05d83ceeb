"""Each source of a TalosCluster's Events (``status.EVENT_CHAIN``) and each condition's
Events (``status.TRANSITION_EVENTS``) on its own, and in its place in ``_events``.

Every test names the step it proves; ``test_status_events_mutations`` skips each step
in turn and checks that a test naming it fails.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import ClusterReason as Reason
from ichor.api.conditions import Condition, ConditionStatus
from ichor.api.events import ClusterEventReason as Event
from ichor.api.taloscluster import ChoiceGroup, CNIStatus, TalosClusterStatus, UpgradeChoices
from ichor.controller.taloscluster import status as s
from ichor.kube.bodies import EventType, PlannedEvent

WHEN = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
T, F, U = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN


def cond(type_: str, status: ConditionStatus, reason: str, *, generation: int = 1) -> Condition:
    return Condition(
        type=type_, status=status, reason=reason, message=f"{type_} is {reason}",
        observed_generation=generation, last_transition_time=WHEN,
    )  # fmt: skip


def st(*conditions: Condition, **fields: object) -> TalosClusterStatus:
    return TalosClusterStatus(conditions=conditions, **fields)


def reasons(events: list[PlannedEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for e in events]


def test_the_chain_holds_each_source_once_in_the_order_events_are_posted() -> None:
    assert [step.__name__ for step in s.EVENT_CHAIN] == [
        "transition_events",
        "spec_refused_again_events",
        "default_choice_events",
        "version_change_events",
    ]
    assert {t: f.__name__ for t, f in s.TRANSITION_EVENTS.items()} == {
        Type.READY: "ready_events",
        Type.VERSIONS_COMPATIBLE: "compatibility_events",
        Type.SPEC_REACHED: "spec_reached_events",
        Type.CILIUM_UPGRADE_AVAILABLE: "cilium_upgrade_events",
    }


def test_nothing_changed_posts_nothing() -> None:
    same = st(cond(Type.READY, T, Reason.OBSERVED), talos_version="v1.14.3")
    assert s._events(same, same) == []


# ready_events


def test_ready_events_warn_of_a_failed_read_and_say_when_observed_again() -> None:
    down = cond(Type.READY, F, Reason.WORKLOAD_UNREACHABLE)
    assert reasons(s.ready_events(None, down)) == [(EventType.WARNING, Event.UNREACHABLE)]
    up = cond(Type.READY, T, Reason.OBSERVED)
    assert reasons(s.ready_events(down, up)) == [(EventType.NORMAL, Event.OBSERVED)]
    differ = cond(Type.READY, T, Reason.NODES_DIFFER)
    assert reasons(s.ready_events(up, differ)) == [(EventType.NORMAL, Event.NODES_DIFFER)]
    assert s.ready_events(differ, up) == []  # True before: nothing new to say


def test_ready_events_in_the_chain() -> None:
    before = st(cond(Type.READY, T, Reason.OBSERVED))
    after = st(cond(Type.READY, F, Reason.KUBECONFIG_UNUSABLE))
    assert reasons(s._events(before, after)) == [(EventType.WARNING, Event.KUBECONFIG_UNUSABLE)]


# compatibility_events


def test_compatibility_events_warn_of_a_refused_pair_and_say_when_compatible_again() -> None:
    refused = cond(Type.VERSIONS_COMPATIBLE, F, Reason.TALOS_KUBERNETES_INCOMPATIBLE)
    assert reasons(s.compatibility_events(None, refused)) == [
        (EventType.WARNING, Event.INCOMPATIBLE)
    ]
    bad = cond(Type.VERSIONS_COMPATIBLE, F, Reason.INVALID_SPEC)
    assert reasons(s.compatibility_events(None, bad)) == [(EventType.WARNING, Event.INVALID_SPEC)]
    ok = cond(Type.VERSIONS_COMPATIBLE, T, Reason.COMPATIBLE)
    assert reasons(s.compatibility_events(refused, ok)) == [(EventType.NORMAL, Event.COMPATIBLE)]
    assert s.compatibility_events(None, ok) == []  # compatible from the first look: quiet
    unread = cond(Type.VERSIONS_COMPATIBLE, U, Reason.CILIUM_VERSION_UNREADABLE)
    assert reasons(s.compatibility_events(ok, unread)) == [
        (EventType.WARNING, Event.CILIUM_VERSION_UNREADABLE)
    ]
    shown = cond(Type.VERSIONS_COMPATIBLE, T, Reason.UNMANAGED_CILIUM)
    assert reasons(s.compatibility_events(ok, shown)) == [
        (EventType.NORMAL, Event.UNMANAGED_CILIUM)
    ]


def test_compatibility_events_in_the_chain() -> None:
    refused = st(cond(Type.VERSIONS_COMPATIBLE, F, Reason.CILIUM_KUBERNETES_INCOMPATIBLE))
    assert reasons(s._events(st(), refused)) == [(EventType.WARNING, Event.INCOMPATIBLE)]


# spec_reached_events


def test_spec_reached_events_warn_while_refused_and_say_when_reached() -> None:
    refused = cond(Type.SPEC_REACHED, F, "Refused")
    assert reasons(s.spec_reached_events(None, refused)) == [
        (EventType.WARNING, Event.UPGRADE_REFUSED)
    ]
    reached = cond(Type.SPEC_REACHED, T, "Reached")
    assert reasons(s.spec_reached_events(refused, reached)) == [
        (EventType.NORMAL, Event.SPEC_REACHED)
    ]
    assert s.spec_reached_events(None, reached) == []


def test_spec_reached_events_in_the_chain() -> None:
    before = st(cond(Type.SPEC_REACHED, F, "Upgrading"))
    after = st(cond(Type.SPEC_REACHED, T, "Reached"))
    assert reasons(s._events(before, after)) == [(EventType.NORMAL, Event.SPEC_REACHED)]


# cilium_upgrade_events


def test_cilium_upgrade_events_only_when_the_chart_is_newer() -> None:
    newer = cond(Type.CILIUM_UPGRADE_AVAILABLE, T, Reason.CHART_NEWER)
    assert reasons(s.cilium_upgrade_events(None, newer)) == [
        (EventType.NORMAL, Event.CILIUM_UPGRADE)
    ]
    assert s.cilium_upgrade_events(newer, cond(Type.CILIUM_UPGRADE_AVAILABLE, F, "UpToDate")) == []


def test_cilium_upgrade_events_in_the_chain() -> None:
    after = st(cond(Type.CILIUM_UPGRADE_AVAILABLE, T, Reason.CHART_NEWER))
    assert reasons(s._events(st(), after)) == [(EventType.NORMAL, Event.CILIUM_UPGRADE)]


# transition_events


def test_transition_events_follow_the_order_of_the_conditions() -> None:
    after = st(
        cond(Type.VERSIONS_COMPATIBLE, F, Reason.TALOS_KUBERNETES_INCOMPATIBLE),
        cond(Type.READY, F, Reason.WORKLOAD_UNREACHABLE),
        cond(Type.TALOS_UPGRADE_AVAILABLE, T, Reason.UPGRADE_AVAILABLE),  # no Event of its own
    )
    assert reasons(s.transition_events(st(), after)) == [
        (EventType.WARNING, Event.INCOMPATIBLE),
        (EventType.WARNING, Event.UNREACHABLE),
    ]
    assert reasons(s._events(st(), after)) == reasons(s.transition_events(st(), after))


# spec_refused_again_events


def test_spec_refused_again_events_for_a_new_generation_only() -> None:
    first = st(cond(Type.SPEC_REACHED, F, "Refused", generation=1))
    again = st(cond(Type.SPEC_REACHED, F, "Refused", generation=2))
    assert reasons(s.spec_refused_again_events(first, again)) == [
        (EventType.WARNING, Event.UPGRADE_REFUSED)
    ]
    assert s.spec_refused_again_events(first, first) == []
    moved = st(cond(Type.SPEC_REACHED, T, "Reached", generation=2))
    assert s.spec_refused_again_events(first, moved) == []  # a change: transition_events


def test_spec_refused_again_events_in_the_chain() -> None:
    first = st(cond(Type.SPEC_REACHED, F, "Refused", generation=1))
    again = st(cond(Type.SPEC_REACHED, F, "Refused", generation=2))
    assert reasons(s._events(first, again)) == [(EventType.WARNING, Event.UPGRADE_REFUSED)]


# default_choice_events


def choices(talos: str | None, kubernetes: str | None) -> UpgradeChoices:
    return UpgradeChoices(
        talos=ChoiceGroup(default=talos), kubernetes=ChoiceGroup(default=kubernetes)
    )


def test_default_choice_events_name_each_new_default() -> None:
    before = st(upgrade_choices=choices("v1.14.4", None))
    after = st(upgrade_choices=choices("v1.14.5", "v1.36.7"))
    events = s.default_choice_events(before, after)
    assert reasons(events) == [
        (EventType.NORMAL, Event.TALOS_UPGRADE),
        (EventType.NORMAL, Event.KUBERNETES_UPGRADE),
    ]
    assert events[0].message == "Talos v1.14.5 is available (the default upgrade choice)"
    assert s.default_choice_events(after, after) == []
    assert s.default_choice_events(after, st(upgrade_choices=choices(None, None))) == []


def test_default_choice_events_in_the_chain() -> None:
    after = st(upgrade_choices=choices("v1.14.5", None))
    assert reasons(s._events(st(), after)) == [(EventType.NORMAL, Event.TALOS_UPGRADE)]


# version_change_events


def test_version_change_events_name_what_moved() -> None:
    before = st(talos_version="v1.14.3", kubernetes_version="v1.36.6",
                cni=CNIStatus(detected="cilium", detected_version="1.19.1"))  # fmt: skip
    after = st(talos_version="v1.14.4", kubernetes_version="v1.36.6",
               cni=CNIStatus(detected="cilium", detected_version="1.20.4"))  # fmt: skip
    events = s.version_change_events(before, after)
    assert [e.message for e in events] == [
        "the cluster now runs Talos v1.14.4 (was v1.14.3)",
        "the cluster now runs Cilium 1.20.4 (was 1.19.1)",
    ]
    assert s.version_change_events(st(), after) == []  # nothing seen before: no change


def test_version_change_events_in_the_chain() -> None:
    before, after = st(talos_version="v1.14.3"), st(talos_version="v1.14.4")
    assert reasons(s._events(before, after)) == [(EventType.NORMAL, Event.VERSION_CHANGED)]
