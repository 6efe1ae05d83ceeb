"""The choices: published finals the target rule accepts, grouped newest first."""

from __future__ import annotations

import pytest

from ichor.release.versions import Version, parse
from ichor.upgrade.choices import Choices, finals, kubernetes_choices, talos_choices
from ichor.upgrade.rule import ClusterVersions
from tests.support import table

TALOS_TAGS = [
    "v1.12.9",
    "v1.13.1",
    "v1.13.2",
    "v1.13.3",
    "v1.13.4",
    "v1.13.4",  # listed twice
    "v1.14.0",
    "v1.14.3",
    "v1.14.4",
    "v1.14.5-rc.1",
    "1.14.6",
    table.unknown_talos(0),  # the first minor this build does not know
    table.unknown_talos(1),
]
KUBERNETES_TAGS = [
    "v1.34.5",
    "v1.35.0",
    "v1.35.4",
    "v1.36.1",
    "v1.36.2",
    "v1.36.6",
    "v1.36.7",
    "v1.37.0",
    "v1.37.1",
    "v1.37.2-rc.0",
    table.unknown_kubernetes(),
]


def versions(*texts: str) -> list[Version]:
    return [parse(text) for text in texts]


def test_finals_keep_v_prefixed_releases_once_newest_first() -> None:
    tags = [*TALOS_TAGS, "v1.14", "v01.14.2", "latest", "sha256-abc.sig", "v1.14.3+b", ""]
    assert finals(tags) == versions(
        table.unknown_talos(1),
        table.unknown_talos(0),
        "1.14.4",
        "1.14.3",
        "1.14.0",
        "1.13.4",
        "1.13.3",
        "1.13.2",
        "1.13.1",
        "1.12.9",
    )


def test_talos_choices_group_recommended_patch_and_next_minor() -> None:
    cluster = ClusterVersions("v1.13.2", "v1.34.1", "1.20.4", "cilium")
    choices = talos_choices(cluster=cluster, releases=TALOS_TAGS)
    assert choices == Choices(
        recommended=parse("v1.14.3"),
        patch=versions("1.13.4", "1.13.3"),
        next_minor=versions("1.14.4", "1.14.3", "1.14.0"),
        default=parse("v1.14.3"),
    )


def test_talos_offers_only_the_adjacent_minor_though_the_path_may_skip_one() -> None:
    cluster = ClusterVersions("v1.12.4", "v1.33.1", "1.20.4", "cilium")
    choices = talos_choices(cluster=cluster, releases=TALOS_TAGS)
    assert choices.next_minor == versions("1.13.4", "1.13.3", "1.13.2", "1.13.1")
    assert choices.recommended == parse("v1.14.3")  # the set, valid by the path rule


def test_talos_choices_leave_out_a_talos_that_does_not_run_the_cluster_kubernetes() -> None:
    cluster = ClusterVersions("v1.13.2", "v1.32.3", "1.19.10", "cilium")
    choices = talos_choices(cluster=cluster, releases=TALOS_TAGS)
    assert choices.next_minor == []
    assert choices.recommended is None
    assert choices.default == parse("v1.13.4")  # else the newest patch


@pytest.mark.parametrize(
    ("running", "recommended", "default"),
    [
        ("v1.14.3", None, "v1.14.4"),  # the set is not newer: no recommendation
        ("v1.14.4", None, None),  # nothing newer to offer
    ],
)
def test_the_default_is_recommended_else_the_newest_patch_else_none(
    running: str, recommended: str | None, default: str | None
) -> None:
    cluster = ClusterVersions(running, "v1.36.2", "1.20.4", "cilium")
    choices = talos_choices(cluster=cluster, releases=TALOS_TAGS)
    assert choices.recommended == (parse(recommended) if recommended else None)
    assert choices.default == (parse(default) if default else None)


def test_the_set_is_recommended_only_when_listed() -> None:
    cluster = ClusterVersions("v1.13.2", "v1.34.1", "1.20.4", "cilium")
    unlisted = [tag for tag in TALOS_TAGS if tag != "v1.14.3"]
    choices = talos_choices(cluster=cluster, releases=unlisted)
    assert choices.recommended is None
    assert choices.default == parse("v1.13.4")


def test_kubernetes_choices_on_the_pinned_set() -> None:
    cluster = ClusterVersions("v1.14.3", "v1.36.2", "1.20.4", "cilium")
    choices = kubernetes_choices(cluster=cluster, releases=KUBERNETES_TAGS)
    assert choices == Choices(
        recommended=parse("v1.36.6"),
        patch=versions("1.36.7", "1.36.6"),
        next_minor=[],  # Cilium 1.20 runs up to 1.36
        default=parse("v1.36.6"),
    )


def test_kubernetes_choices_skip_the_cilium_constraint_of_a_non_cilium_cni() -> None:
    cluster = ClusterVersions("v1.14.3", "v1.36.2", None, "flannel")
    choices = kubernetes_choices(cluster=cluster, releases=KUBERNETES_TAGS)
    assert choices.next_minor == versions("1.37.1", "1.37.0")  # Talos pairing alone


@pytest.mark.parametrize(
    "cluster",
    [
        ClusterVersions("v1.14.3", "v1.36.2", None, None),  # no CNI observed yet
        ClusterVersions("v1.14.3", "v1.36.2", None, "cilium"),  # Cilium without a release
        ClusterVersions("v1.14.3", "v1.36.2", "1.17.3", "cilium"),  # a Cilium minor unknown
    ],
)
def test_kubernetes_unknown_cilium_offers_nothing(cluster: ClusterVersions) -> None:
    assert kubernetes_choices(cluster=cluster, releases=KUBERNETES_TAGS) == Choices()


def test_a_cluster_on_cilium_1_19_is_offered_kubernetes_up_to_1_35() -> None:
    cluster = ClusterVersions("v1.14.3", "v1.34.5", "1.19.10", "cilium")
    choices = kubernetes_choices(cluster=cluster, releases=KUBERNETES_TAGS)
    assert choices.next_minor == versions("1.35.4", "1.35.0")
    on_135 = ClusterVersions("v1.14.3", "v1.35.0", "1.19.10", "cilium")
    assert kubernetes_choices(cluster=on_135, releases=KUBERNETES_TAGS).next_minor == []


def test_kubernetes_moves_at_most_one_minor_and_never_to_an_unknown_one() -> None:
    newest = table.NEWEST_TALOS_KUBERNETES_MINOR  # the newest Talos runs up to it
    cluster = ClusterVersions(table.newest_talos(3), table.release(newest), None, "flannel")
    tags = [table.release(newest), table.release(newest, 1), table.release(table.after(newest))]
    choices = kubernetes_choices(cluster=cluster, releases=tags)
    assert choices.patch == versions(table.release(newest, 1))
    assert choices.next_minor == []  # no Talos this build knows runs the next minor


def test_a_cluster_spec_that_does_not_parse_is_offered_nothing() -> None:
    cluster = ClusterVersions("latest", "v1.36.2", None, "flannel")
    assert talos_choices(cluster=cluster, releases=TALOS_TAGS) == Choices()
    assert kubernetes_choices(cluster=cluster, releases=KUBERNETES_TAGS) == Choices()


def test_offered_lists_each_version_once_newest_first() -> None:
    cluster = ClusterVersions("v1.13.2", "v1.34.1", "1.20.4", "cilium")
    offered = talos_choices(cluster=cluster, releases=TALOS_TAGS).offered
    assert offered == versions("1.14.4", "1.14.3", "1.14.0", "1.13.4", "1.13.3")
