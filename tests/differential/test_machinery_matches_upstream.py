"""The Python port of Talos machinery answers exactly as upstream machinery does.

One oracle process (upstream ``pkg/machinery/compatibility`` at the version pinned in
tests/oracle/go.mod, built by ``make oracle``) judges tens of thousands of generated
(host, target) and (kubernetes, talos) pairs and every string they use in one batch; the
port judges the same questions. Rule results must agree in verdict and in every
character of the message. Inputs that do not parse must be rejected by both, with
blang/semver's own reason (the port reproduces those messages, so they are compared too).
A missing oracle fails with "run `make oracle`"; nothing here is skipped.

What is compared, and what is not. The port mirrors machinery v1.14 (rows for Talos
1.2..1.14); the oracle is v1.13.9, because the Go module proxy serves no v1.14.x of the
module (403 "This module version is not available", see hack/oracle.sh) and nothing is
built from anything but the proxy. v1.13.9's rows for 1.2..1.13 are the same as v1.14's
(upstream's ``talosNNN`` packages), and it has no 1.14 row. The oracle reports the
minors it knows (its ``info``), and a pair is keyed by the minor of its Talos side as
upstream's parse reads it (the target of an upgrade, the Talos version of a Kubernetes
pair):

- a minor the oracle knows: compared;
- a minor neither knows (1.0, 1.15, 2.x, ...): compared, both must say "not supported";
- a Talos side that does not parse: compared, both must reject it with the same reason;
- a minor only the port knows, which is 1.14 and nothing else (asserted): left out, all
  of its pairs, as there is nothing upstream to compare them with. Talos 1.14's row is
  checked by the vector tests in tests/unit/machinery instead: every 1.14 case of
  upstream's tests of UpgradeableFrom and SupportedWith, with upstream's words, and the
  row's bounds.

Every parse question is compared. When the pin moves to a v1.14.x (``hack/oracle.sh
newest``), the oracle knows 1.14 and nothing is left out, with no change here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import pytest

from ichor.release import go_printable, machinery, versions
from ichor.release.versions import VersionError
from tests.differential import cases, oracle

# (kind, text): ok / refused (the rule's message) / parse_error (blang's reason) / raised.
Verdict = tuple[str, str]
Minor = tuple[int, int]
Pair = tuple[str, str]

# The minors the port may know beyond the oracle: machinery v1.14's own row, which the
# proxy does not serve (see the module docstring).
PORT_ONLY_MINORS: frozenset[Minor] = frozenset({(1, 14)})


@dataclass(frozen=True)
class Questions:
    """One rule's pairs and upstream's answers, split by whether they can be compared."""

    compared: list[tuple[Pair, oracle.Answer]]
    left_out: list[tuple[Pair, oracle.Answer]]
    port_only: frozenset[Minor]
    left_out_minors: frozenset[Minor]


@dataclass(frozen=True)
class Judged:
    """The oracle's answers to the whole batch, split back by question."""

    info: oracle.Info
    upgrades: Questions
    kubernetes: Questions
    parses: list[tuple[str, oracle.Answer]]
    printable: oracle.Printable
    quoting: list[tuple[str, oracle.Answer]]


def _minors(names: Sequence[str]) -> frozenset[Minor]:
    return frozenset((int(a), int(b)) for a, b in (name.split(".") for name in names))


def _minor(answer: oracle.Answer) -> Minor | None:
    """The (major, minor) of a string as upstream's parse read it; None if it did not."""
    if answer["verdict"] != "ok":
        return None
    major, minor, _ = answer.get("normalised", "").split(".", 2)
    return int(major), int(minor)


def _split(
    pairs: list[tuple[Pair, oracle.Answer]],
    *,
    minor_of: dict[str, Minor | None],
    oracle_knows: frozenset[Minor],
) -> Questions:
    """Leave out the pairs whose Talos side (the second) is of a minor only the port knows."""
    port_only = frozenset(machinery.known_talos_minors()) - oracle_knows
    compared: list[tuple[Pair, oracle.Answer]] = []
    left_out: list[tuple[Pair, oracle.Answer]] = []
    left_out_minors: set[Minor] = set()
    for pair, answer in pairs:
        minor = minor_of[pair[1]]
        if minor is not None and minor in port_only:
            left_out.append((pair, answer))
            left_out_minors.add(minor)
        else:
            compared.append((pair, answer))
    return Questions(
        compared=compared,
        left_out=left_out,
        port_only=port_only,
        left_out_minors=frozenset(left_out_minors),
    )


@pytest.fixture(scope="module")
def judged() -> Judged:
    upgrades = cases.upgrade_pairs()
    kubernetes = cases.kubernetes_pairs()
    vocabulary = cases.vocabulary()
    printable = oracle.printable()
    quoting = cases.quoting()
    requests: list[oracle.Request] = []
    requests += [{"op": "upgrade", "host": h, "target": t} for h, t in upgrades]
    requests += [{"op": "k8s", "kubernetes": k, "talos": t} for k, t in kubernetes]
    requests += [{"op": "parse", "version": v} for v in vocabulary]
    requests += [{"op": "parse", "version": v} for v in quoting]
    rest = oracle.ask(requests)
    n_up, n_k8s, n_parse = len(upgrades), len(kubernetes), len(vocabulary)
    info = oracle.info()
    parses = list(zip(vocabulary, rest[n_up + n_k8s : n_up + n_k8s + n_parse], strict=True))
    minor_of = {text: _minor(answer) for text, answer in parses}
    return Judged(
        info=info,
        upgrades=_split(
            list(zip(upgrades, rest[:n_up], strict=True)),
            minor_of=minor_of,
            oracle_knows=_minors(info["upgrade_minors"]),
        ),
        kubernetes=_split(
            list(zip(kubernetes, rest[n_up : n_up + n_k8s], strict=True)),
            minor_of=minor_of,
            oracle_knows=_minors(info["kubernetes_minors"]),
        ),
        parses=parses,
        printable=printable,
        quoting=list(zip(quoting, rest[n_up + n_k8s + n_parse :], strict=True)),
    )


def _upstream(answer: oracle.Answer, *, order: Sequence[str]) -> Verdict:
    """The oracle's verdict; for a parse error, blang's reason for the first field the port
    parses (the port stops at its first failure, the oracle reports every field)."""
    kind = answer["verdict"]
    if kind == "refused":
        return ("refused", answer.get("error", ""))
    if kind == "parse_error":
        errors = answer.get("errors", {})
        field = next(f for f in order if f in errors)
        return ("parse_error", errors[field])
    if kind == "ok":
        return ("ok", "")
    return (kind, answer.get("error", ""))


def _port(rule: Callable[[], str | None]) -> Verdict:
    try:
        error = rule()
    except VersionError as rejected:
        return ("parse_error", rejected.detail)
    except Exception as unexpected:
        return ("raised", f"{type(unexpected).__name__}: {unexpected}")
    return ("ok", "") if error is None else ("refused", error)


def _report(mismatches: list[str], total: int) -> str:
    shown = "\n".join(mismatches[:25])
    more = f"\n... and {len(mismatches) - 25} more" if len(mismatches) > 25 else ""
    return f"{len(mismatches)} of {total} cases differ from upstream machinery:\n{shown}{more}"


def test_the_oracle_is_upstream_machinery_at_the_pinned_version(judged: Judged) -> None:
    assert judged.info["module"] == oracle.MODULE
    assert judged.info["version"] == oracle.pinned_version()
    assert "replaced" not in judged.info


def test_the_port_knows_the_oracles_talos_minors_and_1_14_besides(judged: Judged) -> None:
    port = frozenset(machinery.known_talos_minors())
    upstream = _minors(judged.info["upgrade_minors"])
    assert _minors(judged.info["kubernetes_minors"]) == upstream
    assert upstream <= port
    assert port - upstream <= PORT_ONLY_MINORS
    assert port == upstream | PORT_ONLY_MINORS


@pytest.mark.parametrize("questions", ["upgrades", "kubernetes"])
def test_only_the_pairs_of_a_minor_the_oracle_lacks_are_left_out(
    judged: Judged, questions: str
) -> None:
    split: Questions = getattr(judged, questions)
    assert split.port_only <= PORT_ONLY_MINORS
    assert split.left_out_minors == split.port_only
    assert len(split.compared) > len(split.left_out)
    # The pairs no one has a row for, and those whose Talos side does not parse, are in.
    compared = Counter(a["verdict"] for _, a in split.compared)
    assert compared["parse_error"] > 0
    assert any("not supported" in a.get("error", "") for _, a in split.compared)


def test_upgradeable_from_gives_upstreams_verdict_and_words(judged: Judged) -> None:
    mismatches = []
    for (host, target), answer in judged.upgrades.compared:
        want = _upstream(answer, order=("target", "host"))
        got = _port(partial(machinery.upgradeable_from, target=target, host=host))
        if got != want:
            mismatches.append(f"  host={host!r} target={target!r}: port {got}, upstream {want}")
    assert not mismatches, _report(mismatches, len(judged.upgrades.compared))


def test_kubernetes_supported_with_gives_upstreams_verdict_and_words(judged: Judged) -> None:
    mismatches = []
    for (k8s, talos), answer in judged.kubernetes.compared:
        want = _upstream(answer, order=("kubernetes", "talos"))
        got = _port(partial(machinery.kubernetes_supported_with, kubernetes=k8s, talos=talos))
        if got != want:
            mismatches.append(f"  kubernetes={k8s!r} talos={talos!r}: port {got}, upstream {want}")
    assert not mismatches, _report(mismatches, len(judged.kubernetes.compared))


def test_parse_reads_and_rejects_every_string_as_blang_semver_does(judged: Judged) -> None:
    mismatches = []
    for text, answer in judged.parses:
        if answer["verdict"] == "ok":
            want: Verdict = ("ok", answer.get("normalised", ""))
        else:
            want = ("parse_error", answer.get("errors", {}).get("version", ""))
        try:
            got: Verdict = ("ok", str(versions.parse(text)))
        except VersionError as rejected:
            got = ("parse_error", rejected.detail)
        except Exception as unexpected:
            got = ("raised", f"{type(unexpected).__name__}: {unexpected}")
        if got != want:
            mismatches.append(f"  {text!r}: port {got}, upstream {want}")
    assert not mismatches, _report(mismatches, len(judged.parses))


@pytest.mark.parametrize(
    ("questions", "kinds"),
    [
        ("upgrades", {"ok", "refused", "parse_error"}),
        ("kubernetes", {"ok", "refused", "parse_error"}),
    ],
)
def test_the_cases_reach_every_verdict_and_every_message(
    judged: Judged, questions: str, kinds: set[str]
) -> None:
    answers = [a for _, a in getattr(judged, questions).compared]
    seen = Counter(a["verdict"] for a in answers)
    assert set(seen) == kinds, seen
    wordings = {
        " ".join(w for w in a.get("error", "").split() if not w[0].isdigit())
        for a in answers
        if a["verdict"] == "refused"
    }
    expected = (
        {
            "upgrades to version are not supported",
            "host version is too old to upgrade to Talos",
            "host version is too new to downgrade to Talos",
        }
        if questions == "upgrades"
        else {
            "compatibility with version is not supported",
            "version of Kubernetes is too old to be used with Talos",
            "version of Kubernetes is too new to be used with Talos",
        }
    )
    assert expected <= wordings, wordings


def test_the_committed_printable_table_is_the_oracles(judged: Judged) -> None:
    """ichor/release/go_printable.py is what `make printable` writes from this oracle: a Go
    whose strconv.IsPrint differs fails here until the table is generated again."""
    table = judged.printable
    assert table["unicode"] == go_printable.UNICODE_VERSION
    assert [tuple(r) for r in table["ranges"]] == list(go_printable.RANGES), (
        f"the oracle's {table['go']} (Unicode {table['unicode']}) has another printable "
        f"table than the committed one ({go_printable.SOURCE}): run `make printable`"
    )


def test_a_parse_error_quotes_every_character_as_gos_percent_q(judged: Judged) -> None:
    """The characters where Go's %q and Unicode 14 (Python 3.11's str.isprintable)
    differ, from committed tables (``cases.quoting``), and the escapes Go names (\\a,
    \\b) or writes as \\x, \\u, \\U: the message is the oracle's, byte for byte."""
    assert len(judged.quoting) > 3 * 4000  # the Unicode 15.0 additions are all there
    mismatches = []
    for text, answer in judged.quoting:
        assert answer["verdict"] == "parse_error", (text, answer)
        want = answer.get("errors", {}).get("version", "")
        try:
            versions.parse(text)
        except VersionError as rejected:
            got = rejected.detail
        else:
            got = "<accepted>"
        if got != want:
            mismatches.append(f"  {text!r}: port {got!r}, upstream {want!r}")
    assert not mismatches, _report(mismatches, len(judged.quoting))
