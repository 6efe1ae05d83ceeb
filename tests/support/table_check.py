"""The compatibility table as data: what must hold for the rules to read it, and a way to
run the rules on another table.

``problems`` says what is wrong with a table (the machinery rows, the Talos and Cilium
ranges and the release set), one sentence each: every Talos range has its machinery row,
every range and bound is ordered, every entry names its source, and the release set is
one the table holds together. A table it accepts is one the rules can read without
raising (``tests/unit/compat/test_tables_hold.py`` checks that on generated tables).

``swapped`` puts another table in place of this build's for the length of a ``with``
block (the rules read module globals and cache their answers, both are put back), so a
test can run the real rules on a table it made.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType

from ichor.release import compat, machinery
from ichor.release.compat import KubernetesRange
from ichor.release.machinery_rows import SNAPSHOT, MachineryRow
from ichor.release.release_set import ReleaseSet, check_init_compat
from ichor.release.versions import VersionError, check_contract, check_final, parse
from ichor.upgrade import blocked

Minor = tuple[int, int]

_COMMIT = re.compile(r"[0-9a-f]{40}")
_ROW_SOURCE = re.compile(
    r"https://github\.com/siderolabs/talos/blob/(?P<commit>[0-9a-f]{40})"
    r"/pkg/machinery/compatibility/talos(?P<major>\d)(?P<minor>\d+)/talos(?P=major)(?P=minor)\.go"
)
_TALOS_SOURCE = "https://docs.siderolabs.com/talos/v{}.{}/getting-started/support-matrix"
_CILIUM_SOURCE = re.compile(
    r"https://github\.com/cilium/cilium/blob/v(?P<major>\d+)\.(?P<minor>\d+)\.\d+"
    r"/\.github/actions/ginkgo/main-k8s-versions\.yaml"
)


def _text(minor: Minor) -> str:
    return f"{minor[0]}.{minor[1]}"


def _row_problems(
    rows: Sequence[MachineryRow], snapshot: str
) -> tuple[list[str], dict[Minor, machinery.Bounds]]:
    """The problems of the rows, and the rows that parse (the ranges are judged by them)."""
    found: list[str] = []
    readable: dict[Minor, machinery.Bounds] = {}
    if not _COMMIT.fullmatch(snapshot):
        found.append(f"SNAPSHOT {snapshot!r} is not a commit")
    minors = [row.talos for row in rows]
    if minors != sorted(set(minors)):
        found.append(f"the machinery rows are not one per minor in order: {minors}")
    previous: tuple[MachineryRow, machinery.Bounds] | None = None
    for row in rows:
        name = f"the machinery row of Talos {_text(row.talos)}"
        try:
            lo, hi = parse(row.min_host), parse(row.max_host_downgrade)
            k_lo, k_hi = parse(row.min_kubernetes), parse(row.max_kubernetes)
            for denied in row.denied_hosts:
                parse(denied)
        except VersionError as error:
            found.append(f"{name} holds a version that does not parse: {error}")
            continue
        bounds = machinery._bounds(row)
        readable[row.talos] = bounds
        own = (row.talos[0], row.talos[1], 0)
        if not lo.core <= own < hi.core:
            found.append(
                f"{name} does not install over its own minor ({row.min_host} up to, not "
                f"including, {row.max_host_downgrade})"
            )
        if not k_lo.core < k_hi.core or k_lo.major != k_hi.major:
            found.append(
                f"{name}'s Kubernetes bounds are not ordered within one major "
                f"({row.min_kubernetes} to {row.max_kubernetes})"
            )
        elif not bounds.kubernetes_minors:
            found.append(f"{name} runs no Kubernetes minor")
        source = _ROW_SOURCE.fullmatch(row.source)
        if source is None or (int(source["major"]), int(source["minor"])) != row.talos:
            found.append(f"{name} does not name its talos{row.talos[0]}{row.talos[1]}.go")
        elif source["commit"] != snapshot:
            found.append(f"{name}'s source is not at SNAPSHOT {snapshot}")
        if previous is not None:
            before = previous[1]
            for what, earlier, later in (
                ("lowest host", before.min_host, bounds.min_host),
                ("highest host", before.max_host_downgrade, bounds.max_host_downgrade),
                ("newest Kubernetes", before.max_kubernetes, bounds.max_kubernetes),
            ):
                if later < earlier:
                    found.append(
                        f"{name}'s {what} is older than Talos {_text(previous[0].talos)}'s"
                    )
        previous = (row, bounds)
    return found, readable


def _range_problems(
    kind: str, table: Mapping[Minor, KubernetesRange], *, rows: Mapping[Minor, machinery.Bounds]
) -> list[str]:
    found: list[str] = []
    previous: tuple[Minor, KubernetesRange] | None = None
    for minor in sorted(table):
        entry = table[minor]
        name = f"the {kind} range of {kind} {_text(minor)}"
        if entry.low > entry.high or entry.low[0] != entry.high[0]:
            found.append(f"{name} is not ordered within one major ({entry})")
        if kind == "Talos":
            row = rows.get(minor)
            if row is None:
                found.append(
                    f"{name} has no machinery row: the table may only narrow what machinery accepts"
                )
            else:
                runs = set(row.kubernetes_minors)
                outside = [
                    m
                    for m in range(entry.low[1], entry.high[1] + 1)
                    if (entry.low[0], m) not in runs
                ]
                if outside:
                    found.append(
                        f"{name} ({entry}) is wider than its machinery row, which does not "
                        f"run Kubernetes {', '.join(f'{entry.low[0]}.{m}' for m in outside)}"
                    )
            if entry.source != _TALOS_SOURCE.format(*minor):
                found.append(f"{name} does not name the Talos {_text(minor)} support matrix")
        else:
            source = _CILIUM_SOURCE.fullmatch(entry.source)
            if source is None or (int(source["major"]), int(source["minor"])) != minor:
                found.append(f"{name} does not name the CI matrix of a Cilium {_text(minor)} tag")
        if previous is not None:
            earlier = previous[1]
            if entry.low < earlier.low or entry.high < earlier.high:
                found.append(f"{name} ({entry}) starts or ends before {_text(previous[0])}'s")
        previous = (minor, entry)
    return found


def _set_problems(release_set: ReleaseSet) -> list[str]:
    found: list[str] = []
    try:
        talos = check_final(release_set.talos, field="the release set's Talos")
        check_final(release_set.kubernetes, field="the release set's Kubernetes")
        contract = check_contract(release_set.contract)
        parse(release_set.cilium_chart)
    except VersionError as error:
        return [f"the release set does not parse: {error}"]
    if contract != talos.minor_key:
        found.append(f"the release set's contract {release_set.contract} is not its Talos's minor")
    refusal = check_init_compat(release_set)
    if refusal is not None:
        found.append(f"the release set does not hold together: {refusal.message}")
    return found


def problems(
    *,
    rows: Sequence[MachineryRow],
    talos_kubernetes: Mapping[Minor, KubernetesRange],
    cilium_kubernetes: Mapping[Minor, KubernetesRange],
    release_set: ReleaseSet,
    snapshot: str = SNAPSHOT,
) -> list[str]:
    """What is wrong with a table, one sentence each (empty: the rules can read it).

    The release set is judged with the table swapped in, since the rules that judge it
    read the table.
    """
    found, by_minor = _row_problems(rows, snapshot)
    if not rows:
        found.append("there is no machinery row: the rules know no Talos")
    if not cilium_kubernetes:
        found.append("the Cilium table is empty: the rules know no Cilium")
    found += _range_problems("Talos", talos_kubernetes, rows=by_minor)
    found += _range_problems("Cilium", cilium_kubernetes, rows=by_minor)
    if found:
        return found  # the release set is judged by rules that read a table that holds
    with swapped(rows=rows, talos_kubernetes=talos_kubernetes, cilium_kubernetes=cilium_kubernetes):
        return _set_problems(release_set)


def _clear() -> None:
    compat.known_kubernetes_minors.cache_clear()
    compat._talos_kubernetes.cache_clear()
    compat._cilium_kubernetes.cache_clear()
    blocked.kubernetes_minors_of.cache_clear()


@contextmanager
def swapped(
    *,
    rows: Sequence[MachineryRow],
    talos_kubernetes: Mapping[Minor, KubernetesRange],
    cilium_kubernetes: Mapping[Minor, KubernetesRange],
) -> Iterator[None]:
    """This build's rules reading another table inside the block (caches cleared on the
    way in and out, so no answer of one table serves the other)."""
    kept = (machinery._BY_MINOR, compat.TALOS_KUBERNETES, compat.CILIUM_KUBERNETES)
    _clear()
    machinery._BY_MINOR = {row.talos: machinery._bounds(row) for row in rows}
    compat.TALOS_KUBERNETES = MappingProxyType(dict(talos_kubernetes))
    compat.CILIUM_KUBERNETES = MappingProxyType(dict(cilium_kubernetes))
    try:
        yield
    finally:
        machinery._BY_MINOR, compat.TALOS_KUBERNETES, compat.CILIUM_KUBERNETES = kept
        _clear()
