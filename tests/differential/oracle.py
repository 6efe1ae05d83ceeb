"""The Talos machinery oracle built by ``make oracle``, seen from Python.

The oracle (tests/oracle) is upstream ``pkg/machinery/compatibility`` behind a JSON-lines
pipe. This module finds the binary for the machinery version pinned in
tests/oracle/go.mod, in the cache the test binaries use (``tests.harness.binaries``), and
sends it one batch of questions through one process. It refuses to fall back: a missing
or stale oracle is a ``MissingBinaryError`` naming ``make oracle``, never a skip, and an
oracle that answers a different number of lines than it was asked is an error.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from hashlib import sha256
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

from tests.harness.binaries import MissingBinaryError, cache_dir

__all__ = [
    "MODULE",
    "SOURCE",
    "Answer",
    "BenchResult",
    "Info",
    "Printable",
    "Request",
    "ask",
    "bench",
    "find_oracle",
    "info",
    "pinned_version",
    "printable",
]

MODULE = "github.com/siderolabs/talos/pkg/machinery"
SOURCE = Path(__file__).resolve().parents[1] / "oracle"


class Request(TypedDict, total=False):
    """One question: ``op`` is upgrade (host, target), k8s (kubernetes, talos) or parse."""

    op: Literal["upgrade", "k8s", "parse", "info"]
    host: str
    target: str
    kubernetes: str
    talos: str
    version: str


class Answer(TypedDict):
    """The oracle's verdict: ok, refused (``error``: the rule's text) or parse_error
    (``errors``: blang/semver's text for every field that did not parse)."""

    verdict: Literal["ok", "refused", "parse_error", "bad_request"]
    error: NotRequired[str]
    errors: NotRequired[dict[str, str]]
    normalised: NotRequired[str]


class Info(TypedDict):
    """What the oracle was built from, and the Talos minors machinery has rows for."""

    verdict: str
    module: str
    version: str
    go: str
    upgrade_minors: list[str]
    kubernetes_minors: list[str]
    replaced: NotRequired[str]


class Printable(TypedDict):
    """strconv.IsPrint over every code point, as the oracle's Go answers it."""

    verdict: str
    go: str
    unicode: str
    ranges: list[list[int]]


class BenchResult(TypedDict):
    op: str
    pairs: int
    rounds: int
    best_ns: int
    median_ns: int
    best_cpu_ns: int
    best_ns_per_pair: float
    ok: int
    refused: int
    parse_errors: int
    measured: str


def pinned_version() -> str:
    """The machinery version tests/oracle/go.mod requires (the pin)."""
    text = (SOURCE / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(MODULE)}\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise MissingBinaryError(f"{SOURCE / 'go.mod'} does not require {MODULE}")
    return match.group(1)


def _source_stamp() -> str:
    # Same stamp as hack/oracle.sh: sha256 of main.go, go.mod and go.sum, concatenated.
    digest = sha256()
    for name in ("main.go", "go.mod", "go.sum"):
        digest.update((SOURCE / name).read_bytes())
    return digest.hexdigest()


def find_oracle() -> Path:
    """The oracle binary for the pinned machinery version, built from the current sources."""
    version = pinned_version()
    # The folder is named by the sources' stamp too (hack/oracle.sh), so a checkout with
    # other oracle sources never finds, or replaces, this one's binary.
    folder = cache_dir() / "oracle" / f"{version}-{_source_stamp()[:12]}"
    path = folder / "oracle"
    if not (path.exists() and os.access(path, os.X_OK)):
        raise MissingBinaryError(
            f"the Talos machinery oracle ({MODULE} {version}) is not built (looked for "
            f"{path}): run `make oracle` to build it from its Go module; it is cached "
            "outside the repo and reused afterwards"
        )
    stamp = folder / "source.sha256"
    if not stamp.exists() or stamp.read_text().strip() != _source_stamp():
        raise MissingBinaryError(
            f"the oracle at {path} was built from other sources than tests/oracle: "
            "run `make oracle` to rebuild it"
        )
    return path


def _run(args: Sequence[str], lines: str, *, timeout: float) -> str:
    done = subprocess.run(
        [str(find_oracle()), *args],
        input=lines,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the oracle failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _encode(requests: Sequence[Request]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)


def ask(requests: Sequence[Request], *, timeout: float = 120.0) -> list[Answer]:
    """Judge a batch with one oracle process; answers come back in the same order."""
    out = _run([], _encode(requests), timeout=timeout).splitlines()
    if len(out) != len(requests):
        raise RuntimeError(f"the oracle answered {len(out)} lines to {len(requests)} questions")
    answers: list[Answer] = [json.loads(line) for line in out]
    return answers


def info() -> Info:
    """The module version the oracle was built with and the minors it knows."""
    result: Info = json.loads(_run(["version"], "", timeout=30.0))
    return result


def printable() -> Printable:
    """The Go version and Unicode version of the oracle, and its printable ranges."""
    result: Printable = json.loads(_run(["printable"], "", timeout=60.0))
    return result


def bench(requests: Sequence[Request], *, rounds: int = 5, timeout: float = 300.0) -> BenchResult:
    """Time the batch inside the oracle (parse and rule per pair; no process start, no
    JSON): the best and median of ``rounds`` passes over the whole batch, wall clock, and
    the best in process CPU time."""
    result: BenchResult = json.loads(
        _run(["bench", "-rounds", str(rounds)], _encode(requests), timeout=timeout)
    )
    return result
