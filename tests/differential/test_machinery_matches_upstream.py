"""The Python port of Talos machinery answers exactly as upstream machinery does.

One oracle process (upstream ``pkg/machinery/compatibility`` at the version pinned in
tests/oracle/go.mod, built by ``make oracle``) judges tens of thousands of generated
(host, target) and (kubernetes, talos) pairs in one batch; the port judges the same
pairs. Rule results must agree in verdict and in every character of the message. Inputs
that do not parse must be rejected by both, with blang/semver's own reason (the port
reproduces those messages, so they are compared too). A missing oracle fails with
"run `make oracle`"; nothing here is skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import pytest

from ichor.release import machinery, versions
from ichor.release.versions import VersionError
from tests.differential import cases, oracle

# (kind, text): ok / refused (the rule's message) / parse_error (blang's reason) / raised.
Verdict = tuple[str, str]


@dataclass(frozen=True)
class Judged:
    """The oracle's answers to the whole batch, split back by question."""

    info: oracle.Info
    upgrades: list[tuple[tuple[str, str], oracle.Answer]]
    kubernetes: list[tuple[tuple[str, str], oracle.Answer]]
    parses: list[tuple[str, oracle.Answer]]


@pytest.fixture(scope="module")
def judged() -> Judged:
    upgrades = cases.upgrade_pairs()
    kubernetes = cases.kubernetes_pairs()
    vocabulary = cases.vocabulary()
    requests: list[oracle.Request] = []
    requests += [{"op": "upgrade", "host": h, "target": t} for h, t in upgrades]
    requests += [{"op": "k8s", "kubernetes": k, "talos": t} for k, t in kubernetes]
    requests += [{"op": "parse", "version": v} for v in vocabulary]
    rest = oracle.ask(requests)
    n_up, n_k8s = len(upgrades), len(kubernetes)
    return Judged(
        info=oracle.info(),
        upgrades=list(zip(upgrades, rest[:n_up], strict=True)),
        kubernetes=list(zip(kubernetes, rest[n_up : n_up + n_k8s], strict=True)),
        parses=list(zip(vocabulary, rest[n_up + n_k8s :], strict=True)),
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


def test_the_port_knows_the_same_talos_minors_as_upstream(judged: Judged) -> None:
    port = [f"{a}.{b}" for a, b in machinery.known_talos_minors()]
    assert judged.info["upgrade_minors"] == port
    assert judged.info["kubernetes_minors"] == port


def test_upgradeable_from_gives_upstreams_verdict_and_words(judged: Judged) -> None:
    mismatches = []
    for (host, target), answer in judged.upgrades:
        want = _upstream(answer, order=("target", "host"))
        got = _port(partial(machinery.upgradeable_from, target=target, host=host))
        if got != want:
            mismatches.append(f"  host={host!r} target={target!r}: port {got}, upstream {want}")
    assert not mismatches, _report(mismatches, len(judged.upgrades))


def test_kubernetes_supported_with_gives_upstreams_verdict_and_words(judged: Judged) -> None:
    mismatches = []
    for (k8s, talos), answer in judged.kubernetes:
        want = _upstream(answer, order=("kubernetes", "talos"))
        got = _port(partial(machinery.kubernetes_supported_with, kubernetes=k8s, talos=talos))
        if got != want:
            mismatches.append(f"  kubernetes={k8s!r} talos={talos!r}: port {got}, upstream {want}")
    assert not mismatches, _report(mismatches, len(judged.kubernetes))


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
    answers = [a for _, a in getattr(judged, questions)]
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
