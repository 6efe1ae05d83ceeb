"""Generated AdmissionReview bodies: no exception escapes, every answer says yes or why not,
and a known-incompatible spec is refused whatever review carries it (kopf itself, with the
webhook's real handlers, decides there). Counts are printed at the end (``tally``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ichor.api import kinds
from ichor.webhook import decisions, handlers, intake, judgement, server
from tests.fixtures.fuzzing import tally
from tests.unit.webhook.fakes import FakeBackend
from tests.unit.webhook.realkopf import real_kopf

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
versions = st.one_of(
    st.sampled_from(
        ["v1.14.3", "v1.36.6", "v1.31.9", "v1.32.0", "v1.15.0", "v1.13.2", "v1.35.4", "v1.14"]
    ),
    st.from_regex(
        r"v?[0-9]{1,3}(\.[0-9]{1,3}){0,3}(-[a-z0-9.]{1,6})?(\+[a-z0-9]{1,4})?", fullmatch=True
    ),
    json_values,
)
contracts = st.one_of(st.sampled_from(["v1.14", "v1.13", "v1.15"]), versions)
metadata = st.one_of(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["prod", "", "x"]), "namespace": st.sampled_from(["team-a", ""])},
        optional={"uid": st.text(max_size=8)},
    ),
    json_values,
)
cni_status = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "cni": st.fixed_dictionaries(
                {
                    "detected": st.one_of(st.sampled_from(["cilium", "flannel", ""]), json_values),
                    "detectedVersion": st.one_of(
                        st.sampled_from(["1.19.10", "1.20.4", "1.18.16", "1.99.0"]), versions
                    ),
                }
            )
        }
    ),
    json_values,
)
clusters = st.one_of(
    st.fixed_dictionaries(
        {
            "metadata": metadata,
            "spec": st.fixed_dictionaries(
                {
                    "talosVersion": versions,
                    "kubernetesVersion": versions,
                    "versionContract": contracts,
                },
                optional={"cni": st.one_of(st.just({"preset": "cilium"}), json_values)},
            ),
        },
        optional={"status": cni_status},
    ),
    json_values,
)
operations = st.one_of(
    st.fixed_dictionaries(
        {
            "metadata": metadata,
            "spec": st.fixed_dictionaries(
                {
                    "clusterRef": st.one_of(st.just({"name": "prod"}), json_values),
                    "type": st.one_of(st.sampled_from(["talos", "kubernetes", "cni"]), json_values),
                },
                optional={
                    "version": versions,
                    "override": st.one_of(st.booleans(), json_values),
                    "cni": st.one_of(st.just({"imageVersion": "1.20.5"}), json_values),
                },
            ),
        }
    ),
    json_values,
)
userinfos = st.one_of(
    st.fixed_dictionaries(
        {"username": st.sampled_from(["alice", "bob", ""])},
        optional={
            "uid": st.text(max_size=4),
            "groups": st.lists(st.text(max_size=6), max_size=3),
            "extra": st.dictionaries(st.text(max_size=4), st.lists(st.text(max_size=4))),
        },
    ),
    json_values,
)
verbs = st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", None, 7])


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


def assert_answer(answer: decisions.Answer) -> None:
    assert isinstance(answer, decisions.Answer)
    if not answer.allowed:
        assert answer.message.strip()
        assert answer.code in (400, 403, 503)
        assert "Traceback" not in answer.message


@FUZZ
@given(
    new=clusters,
    old=st.one_of(st.none(), clusters),
    userinfo=userinfos,
    operation=verbs,
    dryrun=st.booleans(),
    holder=st.booleans(),
    fail=st.booleans(),
)
def test_cluster_reviews_always_get_an_answer(
    runner: asyncio.Runner,
    new: Any,
    old: Any,
    userinfo: Any,
    operation: Any,
    dryrun: bool,
    holder: bool,
    fail: bool,
) -> None:
    with tally("webhook: TalosCluster judgements"):
        backend = FakeBackend(holders={"alice"} if holder else set(), fail=fail)
        answer = runner.run(
            judgement.cluster_answer(
                new=new, old=old, userinfo=userinfo, operation=operation, dryrun=dryrun,
                backend=backend,
            )
        )  # fmt: skip
        assert_answer(answer)
        assert "internal error" not in answer.message  # every failure is one the code expects
        if dryrun:
            assert backend.events == []


@FUZZ
@given(
    new=operations,
    cluster=clusters,
    userinfo=userinfos,
    operation=verbs,
    dryrun=st.booleans(),
    holder=st.booleans(),
    fail=st.booleans(),
)
def test_operation_reviews_always_get_an_answer(
    runner: asyncio.Runner,
    new: Any,
    cluster: Any,
    userinfo: Any,
    operation: Any,
    dryrun: bool,
    holder: bool,
    fail: bool,
) -> None:
    from ichor.webhook.reviews import NamespacedName

    with tally("webhook: TalosOperation judgements"):
        backend = FakeBackend(
            clusters={
                NamespacedName("team-a", "prod"): cluster,
                NamespacedName("", "prod"): cluster,
            },
            holders={"alice"} if holder else set(),
            fail=fail,
        )
        answer = runner.run(
            judgement.operation_answer(
                new=new, userinfo=userinfo, operation=operation, dryrun=dryrun, backend=backend
            )
        )
        assert_answer(answer)
        assert "internal error" not in answer.message  # every failure is one the code expects
        if dryrun:
            assert backend.events == []


@FUZZ
@given(new=clusters, old=st.one_of(st.none(), clusters), userinfo=userinfos, operation=verbs)
def test_the_kopf_handler_raises_nothing_but_an_admission_error(
    runner: asyncio.Runner, new: Any, old: Any, userinfo: Any, operation: Any
) -> None:
    with tally("webhook: the kopf handler"):
        memo = kopf.Memo({handlers.BACKEND: FakeBackend()})
        warnings: list[str] = []
        refused: kopf.AdmissionError | None = None
        try:
            runner.run(
                handlers.validate_taloscluster(
                    memo=memo,
                    new=new,
                    old=old,
                    userinfo=userinfo,
                    operation=operation,
                    warnings=warnings,
                )
            )
        except kopf.AdmissionError as error:
            refused = error
        if refused is not None:
            assert str(refused).strip()
        assert all(isinstance(w, str) and w for w in warnings)


reviews = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]),
        "kind": st.sampled_from(["AdmissionReview", "Other"]),
        "request": st.one_of(
            st.fixed_dictionaries(
                {
                    "uid": st.sampled_from(["u-1", ""]),
                    "resource": st.one_of(
                        st.just(
                            {
                                "group": "ichor.dev",
                                "version": "v1alpha1",
                                "resource": "talosclusters",
                            }
                        ),
                        json_values,
                    ),
                    "operation": verbs,
                    "userInfo": userinfos,
                    "object": clusters,
                },
                optional={
                    "oldObject": clusters,
                    "dryRun": st.booleans(),
                    "subResource": json_values,
                },
            ),
            json_values,
        ),
    }
)
payloads = st.one_of(
    st.binary(max_size=64),
    json_values.map(lambda v: json.dumps(v).encode()),
    reviews.map(lambda v: json.dumps(v).encode()),
)
outcomes = st.one_of(
    st.sampled_from([ValueError("boom"), KeyError("request"), kopf.AdmissionError("no", code=403)]),
    json_values,
    st.fixed_dictionaries(
        {
            "response": st.fixed_dictionaries(
                {"allowed": st.booleans()}, optional={"status": json_values}
            )
        }
    ),
)


@FUZZ
@given(
    payload=payloads,
    outcome=outcomes,
    webhook=st.sampled_from(["taloscluster", "talosoperation", "", "x"]),
)
def test_the_server_answers_every_request_with_a_review(
    runner: asyncio.Runner, payload: bytes, outcome: Any, webhook: str
) -> None:
    async def fn(request: Any, **_: Any) -> Any:
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    with tally("webhook: the server's answer to generated bodies"):
        answer = runner.run(server.respond(fn, payload=payload, webhook=webhook))
        assert answer["apiVersion"] == "admission.k8s.io/v1"
        assert answer["kind"] == "AdmissionReview"
        body = answer["response"]
        assert isinstance(body["allowed"], bool)
        assert isinstance(body["uid"], str)
        if not body["allowed"]:
            assert isinstance(body["status"]["message"], str)
            assert body["status"]["message"]
        # the stand-in is kopf with no handler: nothing it allows is allowed
        assert body["allowed"] is False
        json.dumps(answer)


# --- the oracle: an incompatible pair is refused whatever the review around it -----------

#: Talos v1.14.3 does not run Kubernetes v1.31.0 (every build refuses the pair); nobody
#: in these reviews holds the override verb.
INCOMPATIBLE = {
    "talosVersion": "v1.14.3",
    "kubernetesVersion": "v1.31.0",
    "versionContract": "v1.14",
}
COMPATIBLE = {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"}
OPERATOR = FakeBackend().operator
#: Every path of the endpoint (the cluster's own, which judge this object, drawn most
#: often), and some it does not have.
PATHS = (
    [intake.CLUSTER_HANDLER] * 6
    + [intake.CLUSTER_STAMP, intake.STATUS_HANDLERS[kinds.Kind.TALOS_CLUSTER]] * 2
    + [claim.path for claim in intake.CLAIMS]
    + ["", "x", "taloscluster/x", "-status"]
)


def _cluster_object(spec: dict[str, Any], metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "ichor.dev/v1alpha1", "kind": "TalosCluster", "metadata": metadata,
            "spec": dict(spec)}  # fmt: skip


envelope_metadata: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["prod", "x"]), "namespace": st.sampled_from(["team-a", ""])},
        optional={"uid": st.one_of(st.uuids().map(str), st.sampled_from(["", "u"]))},
    ),
    st.just({}),
)
envelope_users = st.one_of(
    st.fixed_dictionaries(
        {"username": st.sampled_from(["nadia", "", "system:admin", "kube-apiserver", OPERATOR])},
        optional={
            "groups": st.lists(
                st.sampled_from(["system:masters", "system:authenticated", "ichor-admins"]),
                max_size=3,
            ),
            "uid": st.text(max_size=4),
        },
    ),
    json_values,
)
envelope_resource = st.one_of(
    st.just({"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"}),
    st.just({"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"}),
    st.just({"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"}),
    st.sampled_from(
        [
            {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosoperations"},
            {"group": "ichor.dev", "version": "v1", "resource": "talosclusters"},
            {"group": "", "version": "v1alpha1", "resource": "talosclusters"},
        ]
    ),
)
envelope_kind = st.one_of(
    st.just({"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"}),
    st.just({"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"}),
    st.just({"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"}),
    st.just({"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosOperation"}),
)
envelopes = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["admission.k8s.io/v1"] * 4 + ["admission.k8s.io/v1beta1"]),
        "kind": st.just("AdmissionReview"),
        "request": st.fixed_dictionaries(
            {
                "uid": st.one_of(st.uuids().map(str), st.sampled_from(["u-1", ""])),
                "kind": envelope_kind,
                "resource": envelope_resource,
                "operation": st.sampled_from(
                    ["CREATE", "CREATE", "UPDATE", "UPDATE", "DELETE", "CONNECT", "create", ""]
                ),
                "userInfo": envelope_users,
                "object": envelope_metadata.map(lambda m: _cluster_object(INCOMPATIBLE, m)),
            },
            optional={
                "oldObject": envelope_metadata.map(lambda m: _cluster_object(COMPATIBLE, m)),
                "subResource": st.one_of(
                    st.sampled_from(["", "", "", "status", "status", "scale", "STATUS"]),
                    json_values,
                ),
                "dryRun": st.one_of(st.booleans(), json_values),
                "requestKind": envelope_kind,
                "requestResource": envelope_resource,
                "requestSubResource": st.sampled_from(["", "status"]),
                "namespace": st.sampled_from(["team-a", "kube-system", ""]),
                "name": st.sampled_from(["prod", "other"]),
                "options": json_values,
            },
        ),
    }
)


def refuses_the_pair(path: str, review: dict[str, Any], body: dict[str, Any]) -> None:
    """The oracle, which knows nothing of intake: an incompatible pair nobody may override
    is never admitted. Only two answers may say allowed: the mutating half (it refuses no
    rule, and then writes no record: the validating half refuses), and a status write by
    the operator's own identity (status is the operator's, whatever it holds)."""
    if not body["allowed"]:
        assert body["status"]["message"].strip()
        return
    user = review["request"].get("userInfo")
    username = user.get("username") if isinstance(user, dict) else None
    if path.endswith("-records"):
        assert "patch" not in body, body
    elif path.endswith("-status"):
        assert username == OPERATOR, (path, review)
    else:
        raise AssertionError(f"an incompatible pair was admitted at /{path}: {review}")


#: The review that was admitted before this oracle existed: ``"subResource": ""``.
EMPTY_SUBRESOURCE = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u-1",
        "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
        "resource": {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"},
        "operation": "CREATE",
        "userInfo": {"username": "nadia"},
        "object": _cluster_object(INCOMPATIBLE, {"name": "prod", "namespace": "team-a"}),
        "subResource": "",
    },
}


@settings(FUZZ, max_examples=400)
@example(review=EMPTY_SUBRESOURCE, path=intake.CLUSTER_HANDLER)
@given(review=envelopes, path=st.sampled_from(PATHS))
def test_an_incompatible_pair_is_refused_whatever_the_review_around_it(
    runner: asyncio.Runner, review: dict[str, Any], path: str
) -> None:
    with tally("webhook: incompatible pair in generated envelopes through kopf (escape: admitted)"):
        kopf_ = real_kopf(FakeBackend(holders=set()))
        answer = runner.run(
            server.respond(kopf_.fn, payload=json.dumps(review).encode(), webhook=path)
        )
        refuses_the_pair(path, review, answer["response"])


# --- the oracle: a Cilium seen whose release cannot be read is never passed ---------------
#
# The status shows Cilium detected and no release (an image pinned by digest only, no
# Helm release naming its chart). Whatever the rest of the review says, whoever asks, and
# whether or not they hold the override verb (here everyone does, the operator too), a
# write the Cilium rule judges is never admitted: a Kubernetes step of a managed cluster
# (a TalosCluster write moving kubernetesVersion, a kubernetes or cni TalosOperation), or
# a flip of spec.cni.preset. This oracle knows only the fields, not the code's reading.

#: Every user the generated reviews name holds the verb.
EVERYONE = frozenset(
    {"nadia", "alice", "bob", "root", "", "system:admin", "kube-apiserver", OPERATOR}
)
_MANAGED = (None, "cilium")  # spec.cni.preset absent means cilium (the CRD's default)

unreadable_cni = st.fixed_dictionaries(
    {"detected": st.sampled_from(["cilium", "Cilium", " cilium "])},
    optional={
        "detectedVersion": st.sampled_from(["", " ", "\t"]),
        "unreadable": st.one_of(st.text(max_size=40), json_values),
        "imageOverride": st.sampled_from(["1.20.5", "1.19.1", "1.99.0"]),
    },
)
unreadable_status = st.fixed_dictionaries(
    {"cni": unreadable_cni},
    optional={
        "talosVersion": st.sampled_from(["v1.14.3", "v1.13.2"]),
        "kubernetesVersion": st.sampled_from(["v1.36.6", "v1.35.4"]),
        "nodes": json_values,
    },
)
spec_kubernetes = st.sampled_from(
    ["v1.32.0", "v1.33.1", "v1.35.4", "v1.36.6", "v1.36.7", "v1.37.2"]
)
presets = st.sampled_from([None, "cilium", "unmanaged"])


def _spec(talos: str, kubernetes: str, preset: str | None, declarative: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "talosVersion": talos,
        "kubernetesVersion": kubernetes,
        "versionContract": "v1.14",
    }
    if preset is not None:
        spec["cni"] = {"preset": preset}
    if declarative:
        spec["upgradeStrategy"] = "Declarative"
    return spec


@st.composite
def unreadable_writes(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """(object, oldObject, operation) of a TalosCluster write over an unreadable Cilium."""
    meta = {"name": "prod", "namespace": "team-a"}
    talos = draw(st.sampled_from(["v1.14.3", "v1.14.0", "v1.13.2"]))
    declarative = draw(st.booleans())
    new = {
        "metadata": dict(meta),
        "spec": _spec(talos, draw(spec_kubernetes), draw(presets), declarative),
        "status": draw(unreadable_status),
    }
    if draw(st.booleans()):
        return new, None, "CREATE"
    old = {
        "metadata": dict(meta),
        "spec": _spec(talos, draw(spec_kubernetes), draw(presets), declarative),
        "status": new["status"],
    }
    return new, old, "UPDATE"


def judged_by_the_cilium_rule(new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """Whether the write is one the Cilium rule judges (the oracle's own reading)."""
    new_preset = (new["spec"].get("cni") or {}).get("preset")
    if old is None:
        return new_preset in _MANAGED
    old_preset = (old["spec"].get("cni") or {}).get("preset")
    flips = (new_preset in _MANAGED) != (old_preset in _MANAGED)
    moves = new["spec"]["kubernetesVersion"] != old["spec"]["kubernetesVersion"]
    managed = new_preset in _MANAGED or old_preset in _MANAGED
    return flips or (moves and managed)


@FUZZ
@given(write=unreadable_writes(), user=envelope_users, dryrun=st.booleans(), adoption=st.booleans())
def test_a_cilium_whose_release_cannot_be_read_is_never_passed_by_a_cluster_write(
    runner: asyncio.Runner,
    write: tuple[dict[str, Any], dict[str, Any] | None, str],
    user: Any,
    dryrun: bool,
    adoption: bool,
) -> None:
    new, old, operation = write
    if adoption:
        new["metadata"]["annotations"] = {"ichor.dev/adoption": "true"}
    with tally("webhook: unreadable Cilium in TalosCluster writes (escape: admitted)"):
        backend = FakeBackend(holders=set(EVERYONE))
        answer = runner.run(
            judgement.cluster_answer(
                new=new, old=old, userinfo=user, operation=operation, dryrun=dryrun,
                backend=backend,
            )
        )  # fmt: skip
        assert_answer(answer)
        if judged_by_the_cilium_rule(new, old):
            assert not answer.allowed, (new, old, user, answer)


@st.composite
def unreadable_operations(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """(TalosOperation, TalosCluster it names) where a rule would read what cannot be read:
    a managed cluster's unreadable Cilium under a kubernetes or cni operation, or a
    Declarative cluster's unreadable Nodes under any operation."""
    nodes = draw(st.booleans())
    declarative = nodes or draw(st.booleans())
    status = draw(unreadable_status)
    if nodes:
        status["nodes"] = {
            "count": 2,
            "unreadable": draw(
                st.one_of(
                    st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=3),
                    st.just(['Node n2 runs osImage "Ubuntu", not "Talos (vX.Y.Z)"']),
                )
            ),
        }
        kind = draw(st.sampled_from(["talos", "kubernetes", "cni"]))
        preset = draw(presets)
    else:
        kind = draw(st.sampled_from(["kubernetes", "cni"]))
        preset = draw(st.sampled_from(_MANAGED))
    cluster = {
        "metadata": {"name": "prod", "namespace": "team-a"},
        "spec": _spec("v1.14.3", "v1.36.6", preset, declarative),
        "status": status,
    }
    spec: dict[str, Any] = {
        "clusterRef": {"name": "prod"},
        "type": kind,
        "override": draw(st.booleans()),
    }
    if kind != "cni":
        spec["version"] = draw(st.one_of(spec_kubernetes, st.sampled_from(["v1.14.4", "v1.15.0"])))
    body = {"metadata": {"name": "up", "namespace": "team-a"}, "spec": spec}
    return body, cluster


@FUZZ
@given(pair=unreadable_operations(), user=envelope_users, dryrun=st.booleans())
def test_a_release_that_cannot_be_read_is_never_passed_by_an_operation(
    runner: asyncio.Runner, pair: tuple[dict[str, Any], dict[str, Any]], user: Any, dryrun: bool
) -> None:
    from ichor.webhook.reviews import NamespacedName

    body, cluster = pair
    with tally("webhook: unreadable release under TalosOperation plans (escape: admitted)"):
        backend = FakeBackend(
            clusters={NamespacedName("team-a", "prod"): cluster}, holders=set(EVERYONE)
        )
        answer = runner.run(
            judgement.operation_answer(
                new=body, userinfo=user, operation="CREATE", dryrun=dryrun, backend=backend
            )
        )
        assert_answer(answer)
        assert not answer.allowed, (body, cluster, user, answer)


def unreadable_envelope(review: dict[str, Any]) -> dict[str, Any]:
    """A generated envelope (``envelopes``) carrying a Kubernetes step over an unreadable
    Cilium instead of the incompatible pair: the same escapes are looked for."""
    request = review["request"]
    request["object"]["spec"] = dict(COMPATIBLE, kubernetesVersion="v1.36.7")
    request["object"]["status"] = {"cni": {"detected": "cilium"}}
    return review


@settings(FUZZ, max_examples=300)
@given(review=envelopes.map(unreadable_envelope), path=st.sampled_from(PATHS))
def test_an_unreadable_cilium_is_refused_whatever_the_review_around_it(
    runner: asyncio.Runner, review: dict[str, Any], path: str
) -> None:
    with tally("webhook: unreadable Cilium in generated envelopes through kopf (escape: admitted)"):
        kopf_ = real_kopf(FakeBackend(holders=set(EVERYONE)))
        answer = runner.run(
            server.respond(kopf_.fn, payload=json.dumps(review).encode(), webhook=path)
        )
        refuses_the_pair(path, review, answer["response"])
