"""No sequence of writes by a user without the override verb runs a Kubernetes step that
the cluster's observed, managed Cilium refuses.

A cluster starts managed (``spec.cni.preset: cilium``) with a Cilium observed. A user
without the verb then writes what they may: the preset alone, the preset and Kubernetes
in one update, Kubernetes alone, TalosOperations (with or without ``override: true``),
in any order and any number of times, including flipping the preset back. Each
TalosCluster write is judged by the webhook's decisions as that user, each operation by
the webhook's plan and then by the executor at execution; what is admitted is stored.

Whatever the sequence, every Kubernetes version the cluster is moved to (by a spec write
or by an operation the executor runs) is one the Cilium that was observed runs: the
rule's "managed and observed" (docs/design/decisions.md) is decided by the spec, so the
spec's preset must not be a way around the table. The reproduction (a Cilium of the first
minor past the table, unknown: flip to unmanaged, run a Kubernetes operation, flip back)
is an explicit example, with the other sequences tried by hand.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ichor.api import records
from ichor.api.talosoperation import OperationType
from ichor.controller.talosoperation import lifecycle
from ichor.release import compat
from ichor.webhook import decisions, reviews
from ichor.webhook.reviews import NamespacedName, OperationSpec, Requester
from tests.support import table

MALLORY = Requester(username="mallory", groups=("dev",))
REF = NamespacedName("team-a", "prod")

# Talos v1.14.3 runs Kubernetes 1.33 to 1.37; Cilium 1.20 runs 1.33 to 1.36, 1.19 runs
# 1.32 to 1.35, and the first minor past the table is in no table.
UNKNOWN_CILIUM = table.unknown_cilium()
CILIUMS = ["1.20.4", "1.19.10", UNKNOWN_CILIUM]
STARTS = ["v1.35.4", "v1.36.6"]
TARGETS = ["v1.35.9", "v1.36.6", "v1.36.9", "v1.37.0", "v1.37.2", "v1.32.0"]
PRESETS = ["cilium", "unmanaged"]


def _body(kubernetes: str, cilium: str) -> dict[str, Any]:
    return {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {"name": "prod", "namespace": "team-a", "uid": "uid-1"},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": kubernetes,
            "versionContract": "v1.14",
            "cni": {"preset": "cilium"},
        },
        "status": {"cni": {"detected": "cilium", "detectedVersion": cilium}},
    }


@dataclass
class World:
    """The stored cluster, and every Kubernetes version it was moved to."""

    cilium: str
    stored: dict[str, Any]
    moves: list[tuple[str, str]] = field(default_factory=list)

    def update(self, *, preset: str | None = None, kubernetes: str | None = None) -> bool:
        """A TalosCluster update by the user; True when the webhook admits it."""
        new = copy.deepcopy(self.stored)
        if preset is not None:
            new["spec"]["cni"]["preset"] = preset
        if kubernetes is not None:
            new["spec"]["kubernetesVersion"] = kubernetes
        verdict = decisions.review_cluster(
            new=reviews.cluster_versions(new), old=reviews.cluster_versions(self.stored)
        )
        holds = None
        if decisions.needs_access_review(verdict, override_requested=bool(verdict.overridable)):
            holds = False  # the user does not hold the verb
        answer = decisions.answer_cluster(
            verdict, requester=MALLORY, cluster=REF, holds_verb=holds, operation="UPDATE"
        )
        if not answer.allowed:
            return False
        if new["spec"]["kubernetesVersion"] != self.stored["spec"]["kubernetesVersion"]:
            self.moves.append(("spec write", new["spec"]["kubernetesVersion"]))
        self.stored = new
        return True

    def operation(self, target: str, *, override: bool) -> bool:
        """A kubernetes TalosOperation by the user: the plan, then the executor; True when
        its Job would run (the spec then follows the target, as the executor writes it)."""
        spec = OperationSpec(
            namespace="team-a",
            name="k8s",
            cluster="prod",
            type=OperationType.KUBERNETES,
            version=target,
            override=override,
            cni_image_version=None,
        )
        verdict = decisions.review_operation(
            spec=spec, cluster=reviews.cluster_versions(self.stored)
        )
        holds = (
            False if decisions.needs_access_review(verdict, override_requested=override) else None
        )
        answer = decisions.answer_operation(verdict, spec=spec, requester=MALLORY, holds_verb=holds)
        if not answer.allowed:
            return False
        meta: dict[str, Any] = {"name": "k8s", "namespace": "team-a", "uid": "u"}
        if override:  # the webhook stamps only what it admitted under override
            meta["annotations"] = {records.OVERRIDE_BY: MALLORY.username}
        op = lifecycle.Operation.from_body(
            {
                "metadata": meta,
                "spec": {
                    "clusterRef": {"name": "prod"},
                    "type": "kubernetes",
                    "version": target,
                    "override": override,
                },
            }
        )
        state = lifecycle.ClusterState.from_body(self.stored)
        decision = lifecycle.decide(
            lifecycle.judge_execution(op, state), override=op.override_admitted
        )
        if not decision.runs:
            return False
        self.moves.append(("operation", target))
        self.stored["spec"]["kubernetesVersion"] = target
        return True


Write = tuple[str, str | None, str | None, bool]
writes = st.one_of(
    st.tuples(st.just("preset"), st.sampled_from(PRESETS), st.none(), st.just(False)),
    st.tuples(st.just("both"), st.sampled_from(PRESETS), st.sampled_from(TARGETS), st.just(False)),
    st.tuples(st.just("kubernetes"), st.none(), st.sampled_from(TARGETS), st.just(False)),
    st.tuples(st.just("operation"), st.none(), st.sampled_from(TARGETS), st.booleans()),
)

#: The brief's sequences, on an unknown Cilium and on a Cilium 1.20.4 that does not
#: run Kubernetes 1.37.
FLIP_ALONE: list[Write] = [
    ("preset", "unmanaged", None, False),
    ("kubernetes", None, "v1.37.0", False),
]
FLIP_AND_MOVE: list[Write] = [("both", "unmanaged", "v1.37.0", False)]
FLIP_THEN_OPERATION: list[Write] = [
    ("preset", "unmanaged", None, False),
    ("operation", None, "v1.37.0", False),
    ("preset", "cilium", None, False),
]
FLIP_BACK: list[Write] = [
    ("preset", "unmanaged", None, False),
    ("preset", "cilium", None, False),
    ("both", "unmanaged", "v1.37.2", False),
    ("operation", None, "v1.37.2", True),
]


@settings(
    database=None, deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.sampled_from(CILIUMS), st.sampled_from(STARTS), st.lists(writes, max_size=6))
@example(UNKNOWN_CILIUM, "v1.36.6", FLIP_ALONE)
@example(UNKNOWN_CILIUM, "v1.36.6", FLIP_AND_MOVE)
@example(UNKNOWN_CILIUM, "v1.36.6", FLIP_THEN_OPERATION)
@example(UNKNOWN_CILIUM, "v1.36.6", FLIP_BACK)
@example("1.20.4", "v1.36.6", FLIP_THEN_OPERATION)
@example("1.20.4", "v1.36.6", FLIP_BACK)
def test_no_sequence_of_writes_without_the_verb_passes_the_observed_cilium(
    cilium: str, start: str, sequence: list[Write]
) -> None:
    world = World(cilium=cilium, stored=_body(start, cilium))
    for kind, preset, target, override in sequence:
        if kind == "operation":
            assert target is not None
            world.operation(target, override=override)
        else:
            admitted = world.update(preset=preset, kubernetes=target)
            if kind == "preset" and admitted:
                event(f"preset flip to {preset} admitted")
    for how, kubernetes in world.moves:
        event(f"kubernetes moved by {how}")
        refusal = compat.cilium_kubernetes_error(cilium=cilium, kubernetes=kubernetes)
        assert refusal is None, (cilium, start, sequence, how, kubernetes, refusal)
