"""The compatibility table as data holds together, and the rules never raise on a table
that holds (``tests/support/table_check.py``).

A Talos range without its machinery row used to pass every test: the rules then raised
an AssertionError for a pair of that minor, and the webhook answered 503. The check
refuses it, with every other way a table can fail to hold (a range out of order, a row
without its source, a release set the table does not hold together), and the property
below runs the real rules on generated tables: whatever the check accepts, no rule
raises on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ichor.release import compat, machinery, machinery_rows, steps
from ichor.release.compat import KubernetesRange
from ichor.release.machinery_rows import SNAPSHOT, MachineryRow
from ichor.release.refusals import Refusal, Verdict
from ichor.release.release_set import PINNED, ReleaseSet, check_adopt_compat, check_init_compat
from ichor.release.versions import parse
from ichor.upgrade import blocked, choices, path_plan, paths
from ichor.upgrade.rule import ClusterVersions, Component, judge_target
from tests.support import table_check

pure = settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))

Minor = tuple[int, int]
ROWS = machinery_rows.ROWS
TALOS = dict(compat.TALOS_KUBERNETES)
CILIUM = dict(compat.CILIUM_KUBERNETES)


def found(
    *,
    rows: tuple[MachineryRow, ...] = ROWS,
    talos: dict[Minor, KubernetesRange] | None = None,
    cilium: dict[Minor, KubernetesRange] | None = None,
    release_set: ReleaseSet = PINNED,
    snapshot: str = SNAPSHOT,
) -> list[str]:
    return table_check.problems(
        rows=rows,
        talos_kubernetes=TALOS if talos is None else talos,
        cilium_kubernetes=CILIUM if cilium is None else cilium,
        release_set=release_set,
        snapshot=snapshot,
    )


def test_this_builds_table_holds() -> None:
    assert found() == []


def _source(minor: Minor) -> str:
    return (
        f"https://docs.siderolabs.com/talos/v{minor[0]}.{minor[1]}/getting-started/support-matrix"
    )


def _row(minor: Minor, **changes: Any) -> MachineryRow:
    base = next(row for row in ROWS if row.talos == minor)
    return dataclasses.replace(base, **changes)


def _next_talos() -> Minor:
    newest = ROWS[-1].talos
    return (newest[0], newest[1] + 1)


# The row cases break the newest row and compare it with the one before, whichever they are,
# so a new row changes none of them.
NEWEST: Minor = ROWS[-1].talos
BEFORE: Minor = ROWS[-2].talos


def _package(minor: Minor) -> str:
    return f"talos{minor[0]}{minor[1]}"


def _first(minor: Minor) -> str:
    """The first release of ``minor``, as machinery writes it (``1.14.0``)."""
    return f"{minor[0]}.{minor[1]}.0"


def _past(row: MachineryRow) -> str:
    """A Kubernetes above the row's newest (its minor's ``.99`` bound plus one minor)."""
    major, minor, _ = row.max_kubernetes.split(".")
    return f"{major}.{int(minor) + 1}.0"


def _below(row: MachineryRow) -> str:
    """A newest Kubernetes one minor older than the row's."""
    major, minor, patch = row.max_kubernetes.split(".")
    return f"{major}.{int(minor) - 1}.{patch}"


def _contract_before(release_set: ReleaseSet) -> str:
    """The contract of the minor before the release set's Talos."""
    major, minor = parse(release_set.talos).minor_key
    return f"v{major}.{minor - 1}"


def _outside_talos_range(release_set: ReleaseSet) -> str:
    """A Kubernetes one minor below the lowest the release set's Talos runs (the table
    refuses the pair, whatever the rows)."""
    talos = parse(release_set.talos).minor_key
    entry = compat.TALOS_KUBERNETES.get(talos)
    bounds = machinery.bounds(talos)
    assert bounds is not None, "the release set's Talos has no machinery row"
    low = entry.low if entry is not None else bounds.kubernetes_minors[0]
    return f"v{low[0]}.{low[1] - 1}.0"


BROKEN: dict[str, tuple[Callable[[], list[str]], str]] = {
    # the case that used to pass: a Talos range for a minor machinery has no row for
    "talos-range-without-its-row": (
        lambda: found(
            talos={
                **TALOS,
                _next_talos(): KubernetesRange((1, 34), (1, 38), _source(_next_talos())),
            }
        ),
        "has no machinery row",
    ),
    "talos-range-wider-than-its-row": (
        lambda: found(talos={(1, 14): KubernetesRange((1, 31), (1, 37), _source((1, 14)))}),
        "is wider than its machinery row",
    ),
    "talos-range-upside-down": (
        lambda: found(talos={(1, 14): KubernetesRange((1, 37), (1, 33), _source((1, 14)))}),
        "is not ordered",
    ),
    "talos-range-without-its-source": (
        lambda: found(talos={(1, 14): KubernetesRange((1, 33), (1, 37), "")}),
        "does not name the Talos 1.14 support matrix",
    ),
    "cilium-range-upside-down": (
        lambda: found(
            cilium={**CILIUM, (1, 20): dataclasses.replace(CILIUM[(1, 20)], low=(1, 37))}
        ),
        "is not ordered",
    ),
    "cilium-range-of-another-tag": (
        lambda: found(
            cilium={
                **CILIUM,
                (1, 20): dataclasses.replace(CILIUM[(1, 20)], source=CILIUM[(1, 19)].source),
            }
        ),
        "does not name the CI matrix of a Cilium 1.20 tag",
    ),
    "cilium-ranges-out-of-order": (
        lambda: found(
            cilium={**CILIUM, (1, 20): dataclasses.replace(CILIUM[(1, 20)], low=(1, 29))}
        ),
        "starts or ends before 1.19's",
    ),
    "row-without-its-source": (
        lambda: found(rows=(*ROWS[:-1], _row(NEWEST, source=ROWS[-2].source))),
        f"does not name its {_package(NEWEST)}.go",
    ),
    "row-at-another-commit": (
        lambda: found(
            rows=(*ROWS[:-1], _row(NEWEST, source=ROWS[-1].source.replace(SNAPSHOT, "f" * 40)))
        ),
        "is not at SNAPSHOT",
    ),
    "row-kubernetes-upside-down": (
        lambda: found(rows=(*ROWS[:-1], _row(NEWEST, min_kubernetes=_past(ROWS[-1])))),
        "Kubernetes bounds are not ordered",
    ),
    "row-that-cannot-install-over-itself": (
        lambda: found(rows=(*ROWS[:-1], _row(NEWEST, max_host_downgrade=_first(NEWEST)))),
        "does not install over its own minor",
    ),
    "row-older-than-the-one-before": (
        lambda: found(rows=(*ROWS[:-1], _row(NEWEST, max_kubernetes=_below(ROWS[-2])))),
        f"newest Kubernetes is older than Talos {BEFORE[0]}.{BEFORE[1]}'s",
    ),
    "rows-out-of-order": (
        lambda: found(rows=(ROWS[-1], *ROWS[:-1])),
        "not one per minor in order",
    ),
    "row-that-does-not-parse": (
        lambda: found(rows=(*ROWS[:-1], _row(NEWEST, min_host="latest"))),
        "does not parse",
    ),
    "release-set-the-table-does-not-hold": (
        lambda: found(
            release_set=dataclasses.replace(PINNED, kubernetes=_outside_talos_range(PINNED))
        ),
        "does not hold together",
    ),
    "release-set-contract-of-another-minor": (
        lambda: found(release_set=dataclasses.replace(PINNED, contract=_contract_before(PINNED))),
        "is not its Talos's minor",
    ),
    "release-set-with-a-pre-release": (
        lambda: found(release_set=dataclasses.replace(PINNED, talos="v1.14.3-rc.0")),
        "does not parse",
    ),
    "snapshot-that-is-no-commit": (lambda: found(snapshot="main"), "is not a commit"),
    "no-cilium-at-all": (lambda: found(cilium={}), "the Cilium table is empty"),
    "no-row-at-all": (lambda: found(rows=(), talos={}), "there is no machinery row"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_table_that_does_not_hold_is_refused_with_the_reason(case: str) -> None:
    check, words = BROKEN[case]
    said = check()
    assert said, case
    assert any(words in sentence for sentence in said), said


def test_the_rules_raise_on_a_talos_range_without_its_row() -> None:
    """Why the check refuses it: the pair rule reads the machinery row of every minor the
    table holds, and there is none (the webhook answered 503)."""
    talos = {**TALOS, _next_talos(): KubernetesRange((1, 34), (1, 38), _source(_next_talos()))}
    with table_check.swapped(rows=ROWS, talos_kubernetes=talos, cilium_kubernetes=CILIUM):
        target = f"v{_next_talos()[0]}.{_next_talos()[1]}.0"
        with pytest.raises(AssertionError):
            compat.talos_kubernetes_error(talos=target, kubernetes="v1.36.0")
    # and the table is put back: the real rules answer as before
    assert compat.talos_kubernetes_error(talos="v1.14.3", kubernetes="v1.36.0") is None


# --- generated tables -------------------------------------------------------------------


@st.composite
def tables(draw: st.DrawFn) -> dict[str, Any]:
    """A table shaped like this build's: machinery rows for a run of Talos minors, Talos
    ranges for some of them (now and then one without a row, or wider than its row),
    Cilium ranges, a release set. Most hold; the ones that do not are refused by the
    check, and the property only runs the rules on the ones it accepts."""
    first = draw(st.integers(2, 12))
    count = draw(st.integers(1, 6))
    rows: list[MachineryRow] = []
    low_k8s = draw(st.integers(20, 28))
    high_k8s = low_k8s + draw(st.integers(0, 5))
    min_host = first - draw(st.integers(0, 2))
    for index in range(count):
        minor = first + index
        low_k8s += draw(st.integers(0, 1))
        high_k8s = max(high_k8s + draw(st.integers(0, 2)), low_k8s)
        min_host = min(max(min_host + draw(st.integers(0, 1)), minor - 3), minor)
        rows.append(
            MachineryRow(
                talos=(1, minor),
                min_host=f"1.{max(min_host, 0)}.0",
                max_host_downgrade=f"1.{minor + draw(st.integers(1, 3))}.0",
                denied_hosts=tuple(
                    draw(st.lists(st.sampled_from(["1.5.2", "1.9.0-rc.1"]), max_size=1))
                ),
                min_kubernetes=f"1.{low_k8s}.0",
                max_kubernetes=f"1.{high_k8s}.99",
                source=(
                    f"https://github.com/siderolabs/talos/blob/{SNAPSHOT}"
                    f"/pkg/machinery/compatibility/talos1{minor}/talos1{minor}.go"
                ),
            )
        )
    # machinery's ``max_host_downgrade`` only grows (the check asks it): keep it so
    highest = 0
    for index, row in enumerate(rows):
        top = max(int(row.max_host_downgrade.split(".")[1]), highest)
        highest = top
        rows[index] = dataclasses.replace(row, max_host_downgrade=f"1.{top}.0")
    talos: dict[Minor, KubernetesRange] = {}
    for row in rows:
        if draw(st.booleans()):
            # now and then one minor wider than its row: the check refuses it
            low = int(row.min_kubernetes.split(".")[1]) + draw(st.sampled_from([0] * 8 + [1, -1]))
            high = int(row.max_kubernetes.split(".")[1]) - draw(st.integers(0, 1))
            talos[row.talos] = KubernetesRange((1, low), (1, max(high, low)), _source(row.talos))
    if draw(st.integers(0, 9)) == 9:  # a range without its row: the check refuses it
        beyond = (1, first + count)
        talos[beyond] = KubernetesRange((1, high_k8s - 1), (1, high_k8s), _source(beyond))
    cilium: dict[Minor, KubernetesRange] = {}
    # around the Kubernetes the newest Talos runs, so a release set can hold
    low = draw(st.integers(int(rows[-1].min_kubernetes.split(".")[1]) - 1, high_k8s))
    ceiling = low + draw(st.integers(0, 4))
    first_cilium = draw(st.integers(15, 20))
    for minor in range(first_cilium, first_cilium + draw(st.integers(1, 4))):
        if cilium:
            low += draw(st.integers(0, 2))
            ceiling = max(ceiling + draw(st.integers(0, 2)), low)
        cilium[(1, minor)] = KubernetesRange(
            (1, low),
            (1, ceiling),
            f"https://github.com/cilium/cilium/blob/v1.{minor}.3/.github/actions/ginkgo/"
            "main-k8s-versions.yaml",
        )
    # the release set: the newest Talos, and mostly a Kubernetes it and the chart both run
    newest = rows[-1]
    runs = range(int(newest.min_kubernetes.split(".")[1]), high_k8s + 1)
    entry = talos.get(newest.talos)
    chart = draw(st.sampled_from(sorted(cilium)))
    both = [
        m for m in runs if (entry is None or entry.holds((1, m))) and cilium[chart].holds((1, m))
    ]
    kubernetes = draw(st.sampled_from(both)) if both and draw(st.integers(0, 9)) < 9 else low_k8s
    release_set = ReleaseSet(
        talos=f"v1.{newest.talos[1]}.3",
        kubernetes=f"v1.{kubernetes}.{draw(st.integers(0, 9))}",
        contract=f"v1.{newest.talos[1]}",
        cilium_chart=f"1.{chart[1]}.4",
    )
    return {"rows": tuple(rows), "talos": talos, "cilium": cilium, "release_set": release_set}


def _version(minor: int, patch: int, pre: bool) -> str:
    return f"v1.{minor}.{patch}" + ("-rc.0" if pre else "")


def _near(minors: list[int]) -> st.SearchStrategy[str]:
    """Versions of the minors a table names, one past each end, and anywhere."""
    near = sorted({*minors, min(minors) - 1, max(minors) + 1})
    return st.builds(
        _version,
        st.one_of(st.sampled_from(near), st.sampled_from(near), st.integers(0, 40)),
        st.integers(0, 9),
        st.booleans(),
    )


cni_kinds = st.sampled_from([None, "cilium", "flannel"])


def _answers(refusal: Refusal | Verdict | None) -> bool:
    return refusal is None or isinstance(refusal, Refusal | Verdict)


Inputs = list[tuple[str, str, str, str | None, str | None]]


@st.composite
def inputs_for(draw: st.DrawFn, made: dict[str, Any]) -> Inputs:
    """Clusters and targets around what the table names: its Talos minors (rows and
    ranges), its Kubernetes minors and its Cilium minors."""
    talos = _near([row.talos[1] for row in made["rows"]] + [m for _, m in made["talos"]])
    kubernetes_minors = [
        m
        for entry in [*made["talos"].values(), *made["cilium"].values()]
        for m in range(entry.low[1], entry.high[1] + 1)
    ] + [int(row.max_kubernetes.split(".")[1]) for row in made["rows"]]
    kubernetes = _near(kubernetes_minors)
    cilium_minors = [m for _, m in made["cilium"]]
    cilium = st.one_of(
        st.none(),
        st.builds(
            lambda m, p: f"1.{m}.{p}",
            st.sampled_from(sorted({*cilium_minors, max(cilium_minors) + 1})),
            st.integers(0, 9),
        ),
    )
    return draw(
        st.lists(
            st.tuples(talos, kubernetes, st.one_of(talos, kubernetes), cilium, cni_kinds),
            min_size=1,
            max_size=6,
        )
    )


def _sweep(made: dict[str, Any]) -> None:
    """Every pair of the minors the table names (and one past each end): the pair rules
    and the paths, which read the rows and ranges of exactly those minors."""
    talos = sorted({row.talos[1] for row in made["rows"]} | {m for _, m in made["talos"]})
    kubernetes = sorted(
        {
            m
            for entry in [*made["talos"].values(), *made["cilium"].values()]
            for m in range(entry.low[1], entry.high[1] + 1)
        }
        | {m for row in made["rows"] for _, m in machinery._bounds(row).kubernetes_minors}
    )
    ciliums = sorted(m for _, m in made["cilium"])
    for t in [talos[0] - 1, *talos, talos[-1] + 1]:
        for k in [kubernetes[0] - 1, *kubernetes, kubernetes[-1] + 1]:
            pair = (f"v1.{t}.2", f"v1.{k}.1")
            assert _answers(compat.talos_kubernetes_error(talos=pair[0], kubernetes=pair[1]))
            assert _answers(paths.kubernetes_pairing(target=pair[1], talos=pair[0]))
            assert _answers(paths.talos_path(running=f"v1.{talos[0]}.0", target=pair[0]))
            for c in [ciliums[0] - 1, *ciliums, ciliums[-1] + 1]:
                cilium = f"1.{c}.3"
                assert _answers(compat.cilium_kubernetes_error(cilium=cilium, kubernetes=pair[1]))
                assert _answers(
                    steps.kubernetes_step(talos=pair[0], kubernetes=pair[1], cilium=cilium)
                )


@settings(pure, max_examples=300)
@given(st.data(), tables())
def test_the_rules_never_raise_on_a_table_the_check_accepts(
    data: st.DataObject, made: dict[str, Any]
) -> None:
    said = table_check.problems(
        rows=made["rows"],
        talos_kubernetes=made["talos"],
        cilium_kubernetes=made["cilium"],
        release_set=made["release_set"],
    )
    event("table: refused" if said else "table: holds")
    if said:
        return
    inputs = data.draw(inputs_for(made))
    tags = [talos for talos, _, _, _, _ in inputs] + [k for _, k, _, _, _ in inputs]
    with table_check.swapped(
        rows=made["rows"], talos_kubernetes=made["talos"], cilium_kubernetes=made["cilium"]
    ):
        assert check_init_compat(made["release_set"]) is None
        _sweep(made)
        for talos, kubernetes, target, cilium, kind in inputs:
            assert _answers(compat.talos_kubernetes_error(talos=talos, kubernetes=kubernetes))
            assert _answers(compat.talos_kubernetes_error(talos=target, kubernetes=kubernetes))
            if cilium is not None:
                assert _answers(compat.cilium_kubernetes_error(cilium=cilium, kubernetes=target))
            assert _answers(steps.kubernetes_step(talos=talos, kubernetes=target, cilium=cilium))
            assert _answers(paths.talos_path(running=talos, target=target))
            assert _answers(paths.kubernetes_pairing(target=target, talos=talos))
            assert check_adopt_compat(talos=talos, kubernetes=kubernetes, managed_cni=True)
            cluster = ClusterVersions(
                talos=talos,
                kubernetes=kubernetes,
                cilium=steps.cilium_release(detected=kind, version=cilium),
                cni=kind,
            )
            for component in Component:
                assert _answers(judge_target(component=component, target=target, cluster=cluster))
            for component in (Component.TALOS, Component.KUBERNETES):
                blocked.blocked_releases(component=component, cluster=cluster, releases=tags)
            choices.talos_choices(cluster=cluster, releases=tags)
            choices.kubernetes_choices(cluster=cluster, releases=tags)
            path_plan.plan_path(cluster=cluster, talos_releases=tags, kubernetes_releases=tags)
