"""Examples taken from the compatibility table, so adding a row changes only its own tests.

A test that needs "a Talos this build does not know" or "the newest Kubernetes it knows"
reads it here, from ``ichor.release`` (the machinery rows and the two tables), never as a
literal: the first minor past what the build knows is unknown whatever the rows say
today, and the newest known one is the last row. Literals stay where a test is about a
row itself (``tests/unit/machinery``, ``tests/unit/compat``) or about upstream's words.

Everything here is derived; nothing is a number of its own.
"""

from __future__ import annotations

from ichor.release import compat, machinery

Minor = tuple[int, int]


def _text(minor: Minor) -> str:
    return f"{minor[0]}.{minor[1]}"


def after(minor: Minor, minors: int = 1) -> Minor:
    """The minor ``minors`` past ``minor`` (same major)."""
    return (minor[0], minor[1] + minors)


def release(minor: Minor, patch: int = 0, *, v: bool = True) -> str:
    """A release of ``minor``: ``v1.15.0`` (``1.15.0`` with ``v=False``)."""
    return f"{'v' if v else ''}{minor[0]}.{minor[1]}.{patch}"


#: Talos minors known to machinery or the table, oldest first.
TALOS_MINORS: tuple[Minor, ...] = compat.known_talos_minors()
#: The newest Talos minor this build knows (its last row).
NEWEST_TALOS_MINOR: Minor = TALOS_MINORS[-1]
#: The first Talos minor past what this build knows: unknown, refused with no override.
UNKNOWN_TALOS_MINOR: Minor = after(NEWEST_TALOS_MINOR)
#: "1.2 to 1.14": how the refusals name the Talos minors this build knows.
KNOWN_TALOS = f"{_text(TALOS_MINORS[0])} to {_text(NEWEST_TALOS_MINOR)}"


def kubernetes_of(talos: Minor) -> tuple[Minor, ...]:
    """The Kubernetes minors a Talos minor runs, read from the data: its machinery row's,
    within its table range when the table holds the minor."""
    row = machinery.bounds(talos)
    minors = row.kubernetes_minors if row is not None else ()
    entry = compat.TALOS_KUBERNETES.get(talos)
    return tuple(m for m in minors if entry is None or entry.holds(m))


#: The newest Kubernetes minor the newest Talos runs; the one after it no Talos this build
#: knows runs (unknown, or known only to a Cilium range).
NEWEST_TALOS_KUBERNETES_MINOR: Minor = kubernetes_of(NEWEST_TALOS_MINOR)[-1]

#: Kubernetes minors any row or table range mentions, oldest first.
KUBERNETES_MINORS: tuple[Minor, ...] = tuple(sorted(compat.known_kubernetes_minors()))
NEWEST_KUBERNETES_MINOR: Minor = KUBERNETES_MINORS[-1]
UNKNOWN_KUBERNETES_MINOR: Minor = after(NEWEST_KUBERNETES_MINOR)
KNOWN_KUBERNETES = f"{_text(KUBERNETES_MINORS[0])} to {_text(NEWEST_KUBERNETES_MINOR)}"

#: Cilium minors of the table, oldest first.
CILIUM_MINORS: tuple[Minor, ...] = tuple(sorted(compat.CILIUM_KUBERNETES))
NEWEST_CILIUM_MINOR: Minor = CILIUM_MINORS[-1]
UNKNOWN_CILIUM_MINOR: Minor = after(NEWEST_CILIUM_MINOR)
KNOWN_CILIUM = f"{_text(CILIUM_MINORS[0])} to {_text(NEWEST_CILIUM_MINOR)}"


def unknown_talos(patch: int = 0, *, v: bool = True) -> str:
    """A release of the first Talos minor past what this build knows (``v1.15.0``)."""
    return release(UNKNOWN_TALOS_MINOR, patch, v=v)


def unknown_kubernetes(patch: int = 0, *, v: bool = True) -> str:
    """A release of the first Kubernetes minor no row or range mentions (``v1.38.0``)."""
    return release(UNKNOWN_KUBERNETES_MINOR, patch, v=v)


def unknown_cilium(patch: int = 0) -> str:
    """A release of the first Cilium minor past the table (``1.21.0``, no ``v``)."""
    return release(UNKNOWN_CILIUM_MINOR, patch, v=False)


def unknown_talos_contract() -> str:
    """The version contract of the first unknown Talos minor (``v1.15``)."""
    return f"v{_text(UNKNOWN_TALOS_MINOR)}"


def newest_talos(patch: int = 0) -> str:
    """A release of the newest Talos minor this build knows (``v1.14.0``)."""
    return release(NEWEST_TALOS_MINOR, patch)


def newest_kubernetes(patch: int = 0) -> str:
    """A release of the newest Kubernetes minor this build knows (``v1.37.0``)."""
    return release(NEWEST_KUBERNETES_MINOR, patch)


def newest_talos_row() -> machinery.Bounds:
    """The machinery row of the newest Talos minor."""
    row = machinery.bounds(NEWEST_TALOS_MINOR)
    assert row is not None, "the newest known Talos minor has no machinery row"
    return row
