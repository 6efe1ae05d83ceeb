"""Forged reviews do not grow kopf's memory.

kopf keeps a memory per ``metadata.uid`` of the object of every UPDATE review it
dispatches (``ResourceMemories``, shared with the controllers), and forgets one only
when a watch sees that object deleted: a uid no watch ever sees stays forever. The
endpoint hands kopf one constant uid, so twenty thousand forged UPDATEs, each naming a
uid of its own, leave one entry; the handlers never read the object's uid.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
import uuid
from typing import Any

from ichor.webhook import intake, server
from tests.fixtures.fuzzing import figure
from tests.unit.webhook.realkopf import real_kopf

FORGED = 2_000
SPEC = {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"}


def forged_update(uid: str, *, path_kind: str = "TalosCluster") -> bytes:
    obj = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": path_kind,
        "metadata": {"name": f"x-{uid[:8]}", "namespace": "kube-system", "uid": uid},
        "spec": SPEC,
    }
    review: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": path_kind},
            "resource": {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"},
            "operation": "UPDATE",
            "userInfo": {"username": "system:admin", "groups": ["system:masters"]},
            "object": obj,
            "oldObject": obj,
        },
    }
    return json.dumps(review).encode()


async def test_forged_updates_leave_kopf_one_memory_not_one_per_uid() -> None:
    kopf = real_kopf()
    tracemalloc.start()
    try:
        for path in (intake.CLUSTER_STAMP, intake.CLUSTER_HANDLER):
            answer = await server.respond(
                kopf.fn, payload=forged_update(str(uuid.uuid4())), webhook=path
            )
            assert answer["response"]["allowed"] is True  # an unchanged spec: admitted
        warm, _ = tracemalloc.get_traced_memory()
        for _ in range(FORGED):
            answer = await server.respond(
                kopf.fn, payload=forged_update(str(uuid.uuid4())), webhook=intake.CLUSTER_HANDLER
            )
            assert answer["response"]["allowed"] is True
        grown = tracemalloc.get_traced_memory()[0] - warm
    finally:
        tracemalloc.stop()
    kept = len(list(kopf.memories.iter_all_memories()))
    figure(
        f"webhook: {FORGED:,} forged UPDATE reviews, each naming its own uid: kopf keeps "
        f"{kept} memories, Python heap grew {grown / 2**20:.1f} MiB"
    )
    assert kept <= 1
    assert grown < 2**20


async def test_the_handlers_judge_as_before_with_the_constant_uid() -> None:
    """The uid kopf gets is not the object's, and no judgement reads it: an incompatible
    change of a cluster is refused, a compatible one admitted, whatever uid it names."""
    kopf = real_kopf()
    bad = json.loads(forged_update(str(uuid.uuid4())))
    bad["request"]["object"]["spec"] = dict(SPEC, kubernetesVersion="v1.31.0")
    bad["request"]["userInfo"] = {"username": "nadia"}
    answer = await server.respond(
        kopf.fn, payload=json.dumps(bad).encode(), webhook=intake.CLUSTER_HANDLER
    )
    assert answer["response"]["allowed"] is False


LARGE_REVIEWS = 6


def _largest_create(unit: str) -> bytes:
    """A CREATE review of a cluster as close to ``MAX_REVIEW_BYTES`` as ``unit`` (one
    character) allows, its bulk one annotation: admitted, and judged through kopf."""
    review = json.loads(forged_update(str(uuid.uuid4())))
    review["request"]["operation"] = "CREATE"
    del review["request"]["oldObject"]
    empty = len(json.dumps(review, ensure_ascii=False).encode())
    room = (intake.MAX_REVIEW_BYTES - empty - 64) // len(unit.encode())
    review["request"]["object"]["metadata"]["annotations"] = {"pad": unit * room}
    return json.dumps(review, ensure_ascii=False).encode()


async def test_an_answered_review_gives_its_memory_back_without_a_garbage_collection() -> None:
    """The budget counts a review's memory free once it is answered. kopf's views of the
    object (its Body and Meta refer to each other) are freed only by a garbage collection,
    which in an operator of many objects runs seldom: six largest reviews kept 48 MiB
    until one did, and a fleet's operator under repeated storms passed the chart's limit.
    Answered, with the collector off, a review holds nothing."""
    kopf = real_kopf()
    bodies = [_largest_create("x"), _largest_create("\U0001f600")]
    gc.disable()
    tracemalloc.start()
    try:
        kept = []
        for i in range(LARGE_REVIEWS):
            before = tracemalloc.get_traced_memory()[0]
            answer = await server.respond(
                kopf.fn, payload=bodies[i % 2], webhook=intake.CLUSTER_HANDLER
            )
            assert answer["response"]["allowed"] is True, answer
            kept.append(tracemalloc.get_traced_memory()[0] - before)
    finally:
        tracemalloc.stop()
        gc.enable()
    figure(
        f"webhook: {LARGE_REVIEWS} answered reviews of {intake.MAX_REVIEW_BYTES / 2**20:.0f} "
        f"MiB, collector off: each kept {max(kept) / 2**20:.2f} MiB at most"
    )
    assert max(kept) < 2**20, [f"{k / 2**20:.1f} MiB" for k in kept]
