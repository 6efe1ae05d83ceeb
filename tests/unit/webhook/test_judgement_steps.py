"""The named steps of ``judge_cluster`` and ``judge_operation`` (``ichor.webhook.judgement``),
each on its own: a change to one step fails the test that names it. A backend that
fails on any call proves a step made no read."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ichor.api import kinds
from ichor.api.talosoperation import OperationType
from ichor.release.policy import NO_POLICY, SitePolicy
from ichor.release.refusals import Rule, Verdict, refuse
from ichor.webhook import decisions, judgement, kubeapi, reviews
from ichor.webhook.judgement import Judged
from tests.unit.webhook.fakes import FakeBackend, taloscluster, talosoperation, userinfo

REF = reviews.NamespacedName("team-a", "prod")
PAIR = refuse(Rule.TALOS_KUBERNETES, "the pair is refused.")
NEVER = refuse(Rule.FORM, "the form is refused.")
ALLOWED = decisions.Answer(allowed=True)


def write(*, old: dict[str, Any] | None = None, new: dict[str, Any] | None = None) -> Any:
    read = judgement._read_cluster_write(
        new=new if new is not None else taloscluster(),
        old=old,
        userinfo=userinfo(),
        operation="CREATE" if old is None else "UPDATE",
    )
    assert isinstance(read, judgement._ClusterWrite)
    return read


def failing() -> FakeBackend:
    return FakeBackend(fail=True)


def test__unvalidated_refuses_an_operation_not_listed() -> None:
    assert judgement._unvalidated("CREATE", ("CREATE", "UPDATE")) is None
    refused = judgement._unvalidated("DELETE", ("UPDATE",))
    assert refused is not None
    assert refused.answer.code == decisions.Code.BAD_REQUEST
    assert "operation 'DELETE' is not validated here" in refused.answer.message
    assert judgement._unvalidated("CREATE", ("UPDATE",)) is not None


def test__without_old_refuses_only_an_update_without_its_old_object() -> None:
    refused = judgement._without_old("UPDATE", None)
    assert refused is not None
    assert refused.answer.message.endswith("an UPDATE review carries no oldObject")
    assert judgement._without_old("UPDATE", {}) is None
    assert judgement._without_old("CREATE", None) is None


def test__failed_says_undecided_and_logs_only_a_bug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        unavailable = judgement._failed(
            kubeapi.ApiUnavailable("no answer"), what="TalosCluster", logger=judgement._log
        )
        assert not caplog.records
        try:
            raise RuntimeError("secret detail")
        except RuntimeError as error:
            bug = judgement._failed(error, what="TalosCluster", logger=judgement._log)
    assert unavailable.code == bug.code == decisions.Code.UNAVAILABLE
    assert "(no answer)" in unavailable.message
    assert "(internal error RuntimeError)" in bug.message
    assert "secret detail" not in bug.message
    (logged,) = caplog.records
    assert logged.getMessage() == "TalosCluster admission failed"
    assert logged.exc_info is not None


def test__read_cluster_write_reads_the_old_object_of_an_update_only() -> None:
    created = write()
    assert created.before is None
    assert created.who.username == "alice"
    updated = write(old=taloscluster(talos="v1.14.2"))
    assert updated.before is not None
    assert updated.before.talos == "v1.14.2"
    bad = judgement._read_cluster_write(
        new={"spec": "x"}, old=None, userinfo=userinfo(), operation="CREATE"
    )
    assert isinstance(bad, Judged)
    assert bad.answer.code == decisions.Code.BAD_REQUEST
    unlisted = judgement._read_cluster_write(
        new=taloscluster(), old=None, userinfo=userinfo(), operation="DELETE"
    )
    assert isinstance(unlisted, Judged)
    assert "not validated here" in unlisted.answer.message


async def test__health_check_refusal_judges_only_a_cluster_with_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[object] = []
    judged = decisions.health_check_refusal

    def recorded(*given: Any) -> Any:
        asked.append(given)
        return judged(*given)

    monkeypatch.setattr(decisions, "health_check_refusal", recorded)
    assert await judgement._health_check_refusal(write()) is None
    assert asked == []  # no checks: nothing parsed, no thread
    body = taloscluster()
    body["spec"]["autoPatch"] = {
        "healthChecks": [
            {"name": "bad", "apiVersion": "v1", "resource": "configmaps", "expression": "(("}
        ]
    }
    refused = await judgement._health_check_refusal(write(new=body))
    assert refused is not None
    assert not refused.allowed
    assert 'health check "bad"' in refused.message
    assert len(asked) == 1


async def test__cluster_site_policy_is_read_on_a_create_or_a_moved_version_only() -> None:
    unreadable = {"metadata": {"name": "ichor"}, "spec": {"policy": "garbage"}}
    backend = FakeBackend(installation=unreadable)
    same = write(old=taloscluster())
    assert await judgement._cluster_site_policy(backend, same) is NO_POLICY
    assert backend.installation_reads == 0
    for moved in (
        write(),
        write(old=taloscluster(talos="v1.14.2")),
        write(old=taloscluster(kubernetes="v1.36.5")),
    ):
        policy = await judgement._cluster_site_policy(backend, moved)
        assert policy.unreadable is not None
    assert backend.installation_reads == 3


async def test__carried_is_looked_up_for_the_operators_overridable_update_only() -> None:
    update = write(old=taloscluster(talos="v1.14.2"))
    overridable = Verdict(overridable=(PAIR,))
    # none of these reads: the failing backend would raise
    assert await judgement._carried(failing(), write(), overridable, operator=True) is None
    assert await judgement._carried(failing(), update, overridable, operator=False) is None
    assert await judgement._carried(failing(), update, Verdict(), operator=True) is None
    blocked = Verdict(blocking=NEVER, overridable=(PAIR,))
    assert await judgement._carried(failing(), update, blocked, operator=True) is None
    with pytest.raises(kubeapi.ApiUnavailable):
        await judgement._carried(failing(), update, overridable, operator=True)
    assert await judgement._carried(FakeBackend(), update, overridable, operator=True) is None


async def test__cluster_holds_asks_the_verb_only_when_no_operation_carries_it() -> None:
    overridable = Verdict(overridable=(PAIR,))
    carried = reviews.StoredOperation(
        name="up", cluster="prod", type=OperationType.TALOS, version="v1.14.4", override=True,
        job_succeeded=True,
    )  # fmt: skip
    assert await judgement._cluster_holds(failing(), write(), overridable, carried=carried) is None
    assert await judgement._cluster_holds(failing(), write(), Verdict(), carried=None) is None
    blocked = Verdict(blocking=NEVER)
    assert await judgement._cluster_holds(failing(), write(), blocked, carried=None) is None
    backend = FakeBackend(holders={"alice"})
    assert await judgement._cluster_holds(backend, write(), overridable, carried=None) is True
    assert backend.reviews == [(write().who, REF)]
    other = FakeBackend(holders={"olivia"})
    assert await judgement._cluster_holds(other, write(), overridable, carried=None) is False


def test__with_cluster_warnings_adds_the_sites_on_a_create_only() -> None:
    refusing = SitePolicy(unreadable="unreadable for the test")
    created = judgement._with_cluster_warnings(ALLOWED, write(), site=refusing)
    assert created.warnings
    assert all("created as it is" in w for w in created.warnings)
    updated = judgement._with_cluster_warnings(ALLOWED, write(old=taloscluster()), site=refusing)
    assert updated is ALLOWED
    declarative = taloscluster()
    declarative["spec"].update(upgradeStrategy="Declarative", autoPatch={"enabled": True})
    noted = judgement._with_cluster_warnings(
        ALLOWED, write(old=taloscluster(), new=declarative), site=NO_POLICY
    )
    assert noted.warnings == decisions.cluster_warnings(write(new=declarative).cluster)
    assert noted.warnings


def _unmanaged(kubernetes: str) -> dict[str, Any]:
    body = taloscluster(kubernetes=kubernetes, cilium="1.20.4")
    body["spec"]["cni"] = {"preset": "unmanaged"}
    return body


def test__with_write_trace_traces_a_persons_write_not_the_operators() -> None:
    past = write(old=_unmanaged("v1.36.6"), new=_unmanaged("v1.37.2"))
    traced = judgement._with_write_trace(ALLOWED, past, operator=False, operation="UPDATE")
    assert traced.traced is not None
    assert traced.traced.user == "alice"
    own = judgement._with_write_trace(ALLOWED, past, operator=True, operation="UPDATE")
    assert own is ALLOWED
    within = write(old=_unmanaged("v1.36.6"), new=_unmanaged("v1.36.7"))
    assert judgement._with_write_trace(ALLOWED, within, operator=False, operation="UPDATE") is (
        ALLOWED
    )


def test__read_operation_write_reads_the_spec_or_refuses() -> None:
    read = judgement._read_operation_write(
        new=talosoperation("talos", "v1.14.4"), old=None, userinfo=userinfo(), operation="CREATE"
    )
    assert isinstance(read, judgement._OperationWrite)
    assert read.spec.cluster_ref == REF
    assert read.who.username == "alice"
    for new, old, operation in (
        (talosoperation("talos", "v1.14.4"), None, "UPDATE"),
        (talosoperation("talos", "v1.14.4"), None, "DELETE"),
        ({"spec": []}, None, "CREATE"),
    ):
        refused = judgement._read_operation_write(
            new=new, old=old, userinfo=userinfo(), operation=operation
        )
        assert isinstance(refused, Judged)
        assert refused.answer.code == decisions.Code.BAD_REQUEST


def _plan(*, operation: dict[str, Any] | None = None) -> judgement._OperationWrite:
    read = judgement._read_operation_write(
        new=operation or talosoperation("talos", "v1.14.4"),
        old=None,
        userinfo=userinfo(),
        operation="CREATE",
    )
    assert isinstance(read, judgement._OperationWrite)
    return read


async def test__plan_answer_refuses_a_missing_or_unreadable_cluster() -> None:
    new = talosoperation("talos", "v1.14.4")
    missing = await judgement._plan_answer(_plan(), new=new, backend=FakeBackend(), max_queued=None)
    assert isinstance(missing, Judged)
    assert missing.answer.reason == "ClusterNotFound"
    broken = FakeBackend(clusters={REF: {"spec": {"talosVersion": 7}}})
    unreadable = await judgement._plan_answer(_plan(), new=new, backend=broken, max_queued=None)
    assert isinstance(unreadable, Judged)
    assert unreadable.answer.code == decisions.Code.UNAVAILABLE


async def test__plan_answer_counts_the_queue_only_with_a_cap() -> None:
    new = talosoperation("talos", "v1.14.4")
    queued = dict(new, metadata={"name": "q", "namespace": "team-a"}, status={"phase": "Pending"})
    backend = FakeBackend(clusters={REF: taloscluster()}, operations=[queued])
    capped = await judgement._plan_answer(_plan(), new=new, backend=backend, max_queued=1)
    assert isinstance(capped, decisions.Answer)
    assert capped.reason == "QueueFull"
    free = await judgement._plan_answer(_plan(), new=new, backend=backend, max_queued=None)
    assert isinstance(free, decisions.Answer)
    assert free.allowed
    roomy = await judgement._plan_answer(_plan(), new=new, backend=backend, max_queued=2)
    assert isinstance(roomy, decisions.Answer)
    assert roomy.allowed


async def test__plan_answer_traces_an_allowed_plan_only() -> None:
    cluster = _unmanaged("v1.36.6")
    new = talosoperation("kubernetes", "v1.37.2")
    backend = FakeBackend(clusters={REF: cluster})
    plan = _plan(operation=new)
    traced = await judgement._plan_answer(plan, new=new, backend=backend, max_queued=None)
    assert isinstance(traced, decisions.Answer)
    assert traced.allowed
    assert traced.traced is not None
    queued = dict(new, metadata={"name": "q", "namespace": "team-a"}, status={"phase": "Pending"})
    full = FakeBackend(clusters={REF: cluster}, operations=[queued])
    refused = await judgement._plan_answer(plan, new=new, backend=full, max_queued=1)
    assert isinstance(refused, decisions.Answer)
    assert not refused.allowed
    assert refused.traced is None


def test__with_image_warnings_speaks_of_an_allowed_talos_upgrade_only() -> None:
    one_node = taloscluster()
    one_node["status"] = {"nodes": {"count": 1}}
    talos = _plan().spec
    shown = judgement._with_image_warnings(ALLOWED, talos, cluster=one_node)
    assert shown.warnings == decisions.image_plan_warnings(one_node, version="v1.14.4")
    assert shown.warnings
    refused = decisions.Answer(allowed=False, message="no")
    assert judgement._with_image_warnings(refused, talos, cluster=one_node) is refused
    kubernetes = _plan(operation=talosoperation("kubernetes", "v1.37.2")).spec
    assert judgement._with_image_warnings(ALLOWED, kubernetes, cluster=one_node) is ALLOWED
    unversioned = _plan(operation=talosoperation("talos")).spec
    assert judgement._with_image_warnings(ALLOWED, unversioned, cluster=one_node) is ALLOWED


def test__read_review_reads_in_order_and_refuses_the_first_unreadable() -> None:
    read: list[str] = []

    def reader(who: reviews.Requester) -> str:
        read.append(who.username)
        return "object"

    assert (
        judgement._read_review(reader, old={}, userinfo=userinfo(), operation="UPDATE") == "object"
    )
    assert read == ["alice"]
    unlisted = judgement._read_review(
        reader, old={}, userinfo=userinfo(), operation="CREATE", validated=("UPDATE",)
    )
    assert isinstance(unlisted, Judged)
    assert "not validated here" in unlisted.answer.message
    assert read == ["alice"]  # nothing read after a refused operation
    nobody = judgement._read_review(reader, old={}, userinfo="nobody", operation="CREATE")
    assert isinstance(nobody, Judged)
    assert nobody.answer.code == decisions.Code.BAD_REQUEST
    no_old = judgement._read_review(reader, old=None, userinfo=userinfo(), operation="UPDATE")
    assert isinstance(no_old, Judged)
    assert no_old.answer.message.endswith("an UPDATE review carries no oldObject")

    def malformed(who: reviews.Requester) -> str:
        raise reviews.MalformedReview("object.spec is not an object")

    refused = judgement._read_review(malformed, old=None, userinfo=userinfo(), operation="UPDATE")
    assert isinstance(refused, Judged)
    assert refused.answer.message.endswith("object.spec is not an object")  # before the old


async def test__validating_checks_the_judgement_against_the_stamp_it_carries() -> None:
    judged: list[dict[str, Any]] = []

    async def judge(**given: Any) -> Judged:
        judged.append(given)
        return Judged(ALLOWED)

    answer = judgement._validating(judge, kinds.Kind.TALOS_CLUSTER)
    body = taloscluster()
    backend = FakeBackend()
    said = await answer(
        new=body, old=None, userinfo=userinfo(), operation="CREATE", dryrun=False, backend=backend
    )
    assert said is ALLOWED  # no stamp to check: the judgement's answer
    (given,) = judged
    assert given["new"] is body
    assert given["backend"] is backend
    assert given["logger"] is judgement._log
