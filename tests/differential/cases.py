"""The version strings and pairs the port and upstream machinery are both asked about.

Deterministic (no randomness): every run asks the same questions, so a mismatch found
once is found again. The vocabulary is built around machinery's table: every minor from
0.0 to 2.x on both sides of the rows (1.2..1.14) with patches 0, 1, 98, 99 and 100
(the 1.X.99 bound is exclusive), then the forms the tolerant parse treats specially:
pre-releases, build metadata, a leading ``v``, leading zeros, short forms, short forms
with a pre-release, whitespace, garbage and unknown minors (1.15, 1.16, 2.x).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from itertools import product
from typing import TypeVar

from ichor.release import go_printable
from tests.differential import unicode14_printable

__all__ = [
    "ODD",
    "kubernetes_pairs",
    "quoting",
    "scrambled",
    "talos_versions",
    "upgrade_pairs",
    "vocabulary",
]

PATCHES = (0, 1, 98, 99, 100)
TALOS_MINORS = [(0, m) for m in range(0, 16)] + [(1, m) for m in range(0, 18)]
TALOS_MINORS += [(2, m) for m in range(0, 3)]
KUBERNETES_MINORS = [(1, m) for m in range(18, 41)] + [(0, 99), (2, 0)]

# Forms the tolerant parse treats specially, written around versions the table cares
# about (1.12 is the lowest host for 1.14, 1.16 the first host too new to come back).
ODD: tuple[str, ...] = (
    # pre-releases and build metadata (ignored by the range checks, kept in messages)
    "1.14.0-alpha.0",
    "1.14.0-beta.1",
    "1.14.0-rc.0",
    "v1.14.0-rc.1",
    "1.12.0-alpha.0",
    "1.11.99-rc.0",
    "1.16.0-alpha.0",
    "1.15.99-beta.1",
    "1.17.0-alpha.0",
    "1.0.0-alpha.0",
    "1.14.1-0",
    "1.14.1-x.7.z.92",
    "1.14.1-alpha-beta",
    "1.14.1+build.1",
    "v1.14.1+20260101.abc",
    "1.14.0-rc.0+meta",
    "1.13.99+meta-data",
    "1.14.1-alpha.01",
    "1.14.1-alpha..1",
    "1.14.1-",
    "1.14.1+",
    "1.14.1-alpha_1",
    "1.14.1+build_1",
    "1.14.1+b..c",
    "1.14.1-ä",
    # leading v
    "v1.14.1",
    "v1.12.0",
    "v1.16.0",
    "vv1.14.1",
    "V1.14.1",
    "v",
    # leading zeros
    "01.014.001",
    "v01.14.00",
    "1.14.01-rc.0",
    "1.014",
    "00.0.0",
    "0.0.0",
    "1.12.000",
    "001",
    "1.0012.0",
    # short forms
    "1.14",
    "v1.14",
    "1.12",
    "1.16",
    "1.15",
    "1",
    "v1",
    "2",
    "0",
    # short form with pre-release or build
    "1.14-alpha.0",
    "1.14-rc",
    "v1.14-rc.0",
    "1-rc.1",
    "1.14+build",
    "1+b",
    # whitespace
    " 1.14.1",
    "1.14.1 ",
    "\t1.14.1\n",
    " v1.14.1 ",
    "1. 14.1",
    "1.14 .1",
    "1.14.1\u00a0",
    "\u20031.14.1",
    "\u200b1.14.1",
    "\u001c1.14.1",
    # garbage
    "",
    " ",
    "latest",
    "x.y.z",
    "1.14.x",
    "1..14",
    "1.14.1.2",
    "-1.14.1",
    "+1.14.1",
    "1.-14.1",
    "\uff11.\uff11\uff14.\uff11",  # fullwidth digits
    "1.14.1-rc.0\u0000",
    "v1.14.1\\n",
    '"1.14.1"',
    "18446744073709551615.0.0",
    "18446744073709551616.0.0",
    "1.18446744073709551616.0",
    "1.14.18446744073709551616",
    "1.14.1-18446744073709551616",
    "ghcr.io/siderolabs/installer:v1.14.1",
    # unknown minors, both ends
    "1.15.0",
    "1.15.3",
    "1.16.0",
    "1.17.0",
    "1.1.0",
    "0.14.3",
    "2.0.0",
    "3.14.1",
)


def scrambled(count: int = 3000, *, seed: int = 11) -> list[str]:
    """Short strings over the characters a version is made of (digits, dots, ``v``,
    ``-``, ``+``, a letter, a space, a zero-width space), from a fixed seed: forms nobody
    thought to list, the same ones every run."""
    rng = random.Random(seed)
    alphabet = "0123456789" * 3 + "....." + "vv--++a \u200b"
    return _unique(
        ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 14))) for _ in range(count)]
    )


def talos_versions() -> list[str]:
    """Every Talos minor 0.0..2.2 with each of the patches, then the odd forms."""
    core = [f"{a}.{b}.{p}" for (a, b), p in product(TALOS_MINORS, PATCHES)]
    return _unique(core + list(ODD))


def kubernetes_versions() -> list[str]:
    """Kubernetes 1.18..1.40 (and two outside majors) with each patch, pre-releases around
    the 1.14 row's bounds (1.32 .. 1.37.99), then the odd forms."""
    core = [f"{a}.{b}.{p}" for (a, b), p in product(KUBERNETES_MINORS, PATCHES)]
    around = [
        "1.31.99",
        "1.32.0-alpha.1",
        "1.32.0-rc.0",
        "1.37.0-rc.0",
        "1.37.98",
        "1.37.99-rc.0",
        "1.38.0-alpha.0",
        "v1.36.6",
        "v1.37.2+k3s1",
        "1.33",
        "1.38",
        "v1.36",
    ]
    return _unique(core + around + list(ODD))


def upgrade_pairs() -> list[tuple[str, str]]:
    """(host, target): every plain version against every plain version, and every odd
    form against the plain versions of the minors around the 1.14 row, both ways."""
    plain = [f"{a}.{b}.{p}" for (a, b), p in product(TALOS_MINORS, PATCHES)]
    around = [f"{a}.{b}.{p}" for (a, b), p in product([(1, m) for m in range(10, 18)], (0, 99))]
    pairs = list(product(plain, plain))
    for odd in ODD:
        pairs += [(odd, t) for t in around] + [(h, odd) for h in around]
    pairs += list(product(ODD[:40], ODD[:40]))
    pairs += [(odd, "1.14.0") for odd in scrambled()] + [("1.12.0", odd) for odd in scrambled()]
    # The same against a 1.13 target, a row every oracle since v1.13 has.
    pairs += [(odd, "1.13.0") for odd in scrambled()]
    return _unique(pairs)


def kubernetes_pairs() -> list[tuple[str, str]]:
    """(kubernetes, talos): every Kubernetes version against every Talos minor's .0 and
    .99 and the Talos pre-releases, and the odd forms on both sides."""
    talos = [f"{a}.{b}.{p}" for (a, b), p in product(TALOS_MINORS, (0, 99))]
    talos += ["1.14.0-beta.0", "1.14.7", "v1.14.3", "1.14.0-rc.0+meta", "1.15.0", "1.16.0-alpha.0"]
    pairs = list(product(kubernetes_versions(), talos))
    pairs += [("1.33.1", odd) for odd in ODD] + [("1.36.6", odd) for odd in ODD]
    pairs += [(odd, "1.14.0") for odd in scrambled()] + [("1.33.1", odd) for odd in scrambled()]
    pairs += [(odd, "1.13.0") for odd in scrambled()]
    return _unique(pairs)


def vocabulary() -> list[str]:
    """Every distinct string the pairs use (each is also parsed on its own, and the
    parse of a pair's Talos side tells which machinery row the pair is about)."""
    sides = [s for pair in upgrade_pairs() + kubernetes_pairs() for s in pair]
    return _unique(talos_versions() + kubernetes_versions() + scrambled() + sides)


#: Characters Go's %q escapes by name, and ones it escapes as \x, \u and \U.
ESCAPED = (
    "\a",
    "\b",
    "\f",
    "\v",
    "\x00",
    "\x1b",
    "\x7f",
    "\x85",
    "\xa0",
    "\xad",
    "\u2028",
    "\u200e",
    "\ufeff",
    "\U000e0001",
    "\U0010ffff",
)


def _points(ranges: Iterable[tuple[int, int]]) -> set[int]:
    found: set[int] = set()
    for first, last in ranges:
        found.update(range(first, last + 1))
    return found


def quoting() -> list[str]:
    """Strings whose parse error quotes a character where Go's %q and Unicode 14 differ.

    From committed data only, never from the running Python: every code point on which
    Go's table (``ichor.release.go_printable``, held equal to the oracle's by the
    differential test) and Unicode 14's (``unicode14_printable``, Python 3.11's
    ``str.isprintable``) disagree, i.e. Unicode 15.0's additions for Go 1.26, and the
    escapes of ``ESCAPED``; each where a number, a pre-release and build metadata are
    quoted. Neither table holds a surrogate (no UTF-8 string holds one)."""
    differ = sorted(_points(go_printable.RANGES) ^ _points(unicode14_printable.RANGES))
    texts: list[str] = []
    for ch in [*ESCAPED, *map(chr, differ)]:
        # inside the text, as Go's TrimSpace strips some of them at the ends
        texts += [f"1.{ch}.0", f"1.2.3-{ch}x", f"1.2.3+{ch}b"]
    return _unique(texts)


_T = TypeVar("_T")


def _unique(items: list[_T]) -> list[_T]:
    return list(dict.fromkeys(items))
