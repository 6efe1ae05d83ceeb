"""The adoption marker (``ichor.dev/adoption: "true"``, what ``ichor adopt`` sets) passes a
compatibility refusal for anyone who may create TalosClusters, and only that: on a
create, never on an update; never a refusal no override passes; never on a Declarative
spec, which is a desired state where an adoption stores what runs."""

from __future__ import annotations

import dataclasses

import pytest

from ichor.api import records
from ichor.release.refusals import Rule
from ichor.webhook import decisions
from ichor.webhook.reviews import ClusterObject, NamespacedName, Requester
from tests.support import table

REF = NamespacedName("team-a", "prod")
PAT = Requester(username="pat", groups=("dev",))
VERB_WORDS = "the RBAC verb `override` on `talosclusters` in API group `ichor.dev`"


def cluster(
    talos: str = "v1.14.3", kubernetes: str = "v1.31.5", *, declarative: bool = False
) -> ClusterObject:
    return ClusterObject(
        ref=REF, talos=talos, kubernetes=kubernetes, contract="v1.14", declarative=declarative
    )


def _answer(new: ClusterObject, old: ClusterObject | None, *, operation: str) -> decisions.Answer:
    verdict = decisions.review_cluster(new=new, old=old)
    holds = (
        False
        if decisions.needs_access_review(verdict, override_requested=bool(verdict.overridable))
        else None
    )
    return decisions.answer_cluster(
        verdict,
        requester=PAT,
        cluster=REF,
        holds_verb=holds,
        operation=operation,
        adoption=True,
        declarative=new.declarative,
    )


def test_an_adoption_create_passes_an_incompatible_pair_for_a_user_without_the_verb() -> None:
    """The baseline the other tests narrow: Talos v1.14.3 runs Kubernetes 1.33 to 1.37,
    the cluster runs v1.31.5, and it is adopted as it runs, with a warning and a record."""
    answer = _answer(cluster(), None, operation="CREATE")
    assert answer.allowed, answer.message
    assert answer.admitted is not None
    assert answer.admitted.kind is records.RecordKind.ADOPTION
    assert answer.admitted.user == "pat"
    assert answer.warnings
    assert answer.warnings[0].startswith("adopted as it runs (TalosKubernetes)")


def test_the_adoption_marker_on_an_update_is_judged_as_a_normal_update() -> None:
    """An update carrying the marker moves Kubernetes to v1.32.0, which Talos 1.14 does
    not run: refused for a user without the verb, exactly as without the marker."""
    old = cluster(kubernetes="v1.31.5")
    new = cluster(kubernetes="v1.32.0")
    answer = _answer(new, old, operation="UPDATE")
    assert not answer.allowed
    assert answer.code == decisions.Code.FORBIDDEN
    assert VERB_WORDS in answer.message
    assert "'pat' does not" in answer.message
    assert answer.admitted is None
    assert answer.record is None
    unmarked = decisions.answer_cluster(
        decisions.review_cluster(new=new, old=old),
        requester=PAT,
        cluster=REF,
        holds_verb=False,
        operation="UPDATE",
    )
    assert answer == unmarked


@pytest.mark.parametrize(
    ("talos", "kubernetes", "words"),
    [
        (table.unknown_talos(), "v1.33.2", f"Talos {table.unknown_talos()} is refused"),
        ("v1.14.3", table.unknown_kubernetes(), "no override passes"),
    ],
    ids=["unknown-talos", "unknown-kubernetes"],
)
def test_an_adoption_create_with_a_refusal_no_override_passes_is_refused(
    talos: str, kubernetes: str, words: str
) -> None:
    new = cluster(talos=talos, kubernetes=kubernetes)
    verdict = decisions.review_cluster(new=new, old=None)
    assert verdict.blocking is not None
    assert verdict.blocking.rule is Rule.UNKNOWN_VERSION
    answer = _answer(new, None, operation="CREATE")
    assert not answer.allowed
    assert answer.code == decisions.Code.FORBIDDEN
    assert words in answer.message
    assert answer.admitted is None
    assert not answer.warnings


@pytest.mark.parametrize("kubernetes", ["v1.31.5", "v1.36.6"], ids=["incompatible", "compatible"])
def test_an_adoption_of_a_declarative_spec_is_refused_with_the_way_to_adopt(
    kubernetes: str,
) -> None:
    """An adoption stores what runs; a Declarative spec is a desired state the operator
    moves the cluster to: the two cannot be one write, whatever the pair."""
    answer = _answer(cluster(kubernetes=kubernetes, declarative=True), None, operation="CREATE")
    assert not answer.allowed
    assert answer.code == decisions.Code.FORBIDDEN
    assert "upgradeStrategy: Declarative" in answer.message
    assert "adopt with upgradeStrategy Operations" in answer.message
    assert answer.admitted is None


def test_a_declarative_create_without_the_marker_is_judged_as_any_create() -> None:
    new = cluster(kubernetes="v1.36.6", declarative=True)
    verdict = decisions.review_cluster(new=new, old=None)
    answer = decisions.answer_cluster(
        verdict, requester=PAT, cluster=REF, holds_verb=None, operation="CREATE",
        declarative=True,
    )  # fmt: skip
    assert answer.allowed
    marked_update = decisions.answer_cluster(
        decisions.review_cluster(new=new, old=dataclasses.replace(new, kubernetes="v1.36.5")),
        requester=PAT,
        cluster=REF,
        holds_verb=None,
        operation="UPDATE",
        adoption=True,
        declarative=True,
    )
    assert marked_update.allowed, "the marker is read on a create only"
