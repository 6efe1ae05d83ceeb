"""Properties that hold for any input: the choices agree with the plan, printing is
stable, and no string makes a rule fail with anything but the typed error."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ichor.release import compat, machinery, steps
from ichor.release.observed import Unreadable
from ichor.release.refusals import Refusal
from ichor.release.release_set import ReleaseSet, check_adopt_compat, check_init_compat
from ichor.release.versions import VersionError, parse
from ichor.upgrade import paths
from ichor.upgrade.choices import availability, finals, kubernetes_choices, talos_choices
from ichor.upgrade.rule import ClusterVersions, Component, check_target
from tests.support import table

# No example database on disk: unit tests do no I/O.
pure = settings(database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])

number = st.one_of(st.integers(0, 40), st.sampled_from(["00", "007", "18446744073709551616"]))
identifier = st.from_regex(r"[0-9A-Za-z-]{1,6}", fullmatch=True)
pre_or_build = st.lists(identifier, min_size=1, max_size=3).map(".".join)


@st.composite
def version_like(draw: st.DrawFn) -> str:
    """Strings near the version grammar: the corners where parsers disagree."""
    parts = draw(st.lists(number.map(str), min_size=1, max_size=4))
    text = ".".join(parts)
    if draw(st.booleans()):
        text += "-" + draw(pre_or_build)
    if draw(st.booleans()):
        text += "+" + draw(pre_or_build)
    prefix = draw(st.sampled_from(["", "v", "vv", "V", " ", "\t v"]))
    suffix = draw(st.sampled_from(["", " ", "\n", "."]))
    return prefix + text + suffix


texts = st.one_of(version_like(), st.text(max_size=24))


@pure
@given(texts)
def test_parse_then_print_is_stable(text: str) -> None:
    try:
        version = parse(text)
    except VersionError:
        return
    again = parse(str(version))
    assert again == version
    assert str(again) == str(version)
    assert parse(version.tag) == version


@pure
@given(texts, texts)
def test_ordering_is_a_total_order_consistent_with_equality(a: str, b: str) -> None:
    try:
        x, y = parse(a), parse(b)
    except VersionError:
        return
    assert sum([x < y, x == y, x > y]) == 1
    assert (x <= y) == (x < y or x == y)


def _typed_or_none(call: Callable[[], object]) -> object:
    try:
        return call()
    except VersionError:
        return None


@pure
@given(texts, texts, st.one_of(st.none(), texts))
def test_no_input_makes_a_rule_raise_anything_but_the_typed_error(
    a: str, b: str, c: str | None
) -> None:
    for result in (
        _typed_or_none(lambda: machinery.upgradeable_from(target=a, host=b)),
        _typed_or_none(lambda: machinery.kubernetes_supported_with(kubernetes=a, talos=b)),
    ):
        assert result is None or isinstance(result, str)
    for verdict in (
        _typed_or_none(lambda: compat.talos_kubernetes_error(talos=a, kubernetes=b)),
        _typed_or_none(lambda: compat.cilium_kubernetes_error(cilium=a, kubernetes=b)),
        _typed_or_none(lambda: steps.check_kubernetes_step(talos=a, kubernetes=b, cilium=c)),
        _typed_or_none(lambda: paths.talos_path(running=a, target=b)),
        _typed_or_none(lambda: paths.kubernetes_skew(running=a, target=b)),
        _typed_or_none(lambda: paths.kubernetes_pairing(target=a, talos=b)),
    ):
        assert verdict is None or isinstance(verdict, Refusal)


@pure
@given(texts, texts, texts, st.one_of(st.none(), texts), st.sampled_from(list(Component)))
def test_the_edge_facing_rules_never_raise(
    a: str, b: str, c: str, d: str | None, component: Component
) -> None:
    cluster = ClusterVersions(talos=a, kubernetes=b, cilium=d, cni=d)
    for verdict in (
        check_target(component=component, target=c, cluster=cluster),
        steps.check_update(old=steps.VersionFields(a, b, c), new=steps.VersionFields(c, a, b)),
        check_init_compat(ReleaseSet(talos=a, kubernetes=b, contract=c, cilium_chart=d or "")),
        check_adopt_compat(talos=a, kubernetes=b, managed_cni=d is None).refusal,
    ):
        assert verdict is None or isinstance(verdict, Refusal)
    release = steps.cilium_release(detected=d, version=a)
    if a.strip():
        assert release in (None, a.strip())
    else:  # seen, no release: unreadable where the Cilium half applies, never an empty one
        assert release is None or isinstance(release, Unreadable)
    talos_choices(cluster=cluster, releases=[a, b, c])
    kubernetes_choices(cluster=cluster, releases=[a, b, c])
    finals([a, b, c])
    availability(check_enabled=bool(a), recorded=bool(b), error=d)


# Clusters and release lists around the rows this build knows, with their odd corners.
talos_running = st.builds("v1.{}.{}".format, st.integers(10, 15), st.integers(0, 6))
kubernetes_running = st.builds("v1.{}.{}".format, st.integers(29, 38), st.integers(0, 6))
cilium_running = st.one_of(
    st.none(), st.builds("1.{}.{}".format, st.integers(17, 21), st.integers(0, 12))
)
cni = st.sampled_from([None, "cilium", "flannel", "calico"])
tag = st.one_of(
    st.builds("v1.{}.{}".format, st.integers(10, 39), st.integers(0, 12)),
    st.builds("v1.{}.{}-rc.{}".format, st.integers(10, 39), st.integers(0, 3), st.integers(0, 2)),
    st.builds("1.{}.{}".format, st.integers(10, 39), st.integers(0, 12)),
    st.sampled_from(["v1.14.3", "v1.36.6", "v1.37.99", "v1.14", "latest"]),
)


@pure
@given(
    st.builds(ClusterVersions, talos_running, kubernetes_running, cilium_running, cni),
    st.lists(tag, max_size=60),
)
def test_a_target_offered_by_the_choices_always_passes_the_target_rule(
    cluster: ClusterVersions, tags: list[str]
) -> None:
    for component, choices in (
        (Component.TALOS, talos_choices(cluster=cluster, releases=tags)),
        (Component.KUBERNETES, kubernetes_choices(cluster=cluster, releases=tags)),
    ):
        offered = choices.offered
        for version in offered:
            assert check_target(component=component, target=version.tag, cluster=cluster) is None
        assert offered == sorted(offered, reverse=True)
        assert choices.patch == sorted(choices.patch, reverse=True)
        assert choices.next_minor == sorted(choices.next_minor, reverse=True)
        if choices.default is not None:
            assert choices.default in offered
        if offered:
            assert choices.default is not None or choices.patch == []


def test_every_offer_over_a_grid_of_clusters_passes_the_target_rule() -> None:
    # up to the first minor this build does not know, of Talos, Kubernetes and Cilium
    last_talos, last_kubernetes = table.UNKNOWN_TALOS_MINOR[1], table.UNKNOWN_KUBERNETES_MINOR[1]
    tags = [f"v1.{minor}.{patch}" for minor in range(10, last_kubernetes + 1) for patch in range(8)]
    offers = 0
    for talos_minor in range(10, last_talos + 1):
        for kubernetes_minor in range(29, last_kubernetes + 1):
            for cilium in (None, "1.18.16", "1.19.10", "1.20.4", table.unknown_cilium()):
                for kind in (None, "cilium", "flannel"):
                    cluster = ClusterVersions(
                        f"v1.{talos_minor}.2", f"v1.{kubernetes_minor}.3", cilium, kind
                    )
                    for component, choices in (
                        (Component.TALOS, talos_choices(cluster=cluster, releases=tags)),
                        (Component.KUBERNETES, kubernetes_choices(cluster=cluster, releases=tags)),
                    ):
                        for version in choices.offered:
                            offers += 1
                            assert (
                                check_target(
                                    component=component, target=version.tag, cluster=cluster
                                )
                                is None
                            )
    assert offers > 1000  # the grid exercises the groups, not only empty answers
