"""No confused deputy: a TalosCluster that names a Secret (kubeconfigSecretRef,
talosconfigSecretRef) is admitted only for a user who may ``get`` that Secret, asked of
the API server as the review's user, on a create and on every change of a reference."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ichor.settings import KubeSettings
from ichor.webhook import decisions, judgement, kubeapi
from ichor.webhook.access_cache import AccessCache
from ichor.webhook.reviews import NamespacedName, Requester
from tests.unit.webhook.fakes import FakeBackend, stamped, taloscluster, userinfo

MALLORY = Requester("mallory", "u-1", ("ops",), (("scopes", ("a",)),))
ADMIN_SECRET = NamespacedName("team-a", "admin-kubeconfig")


def cluster(**refs: Any) -> dict[str, Any]:
    body = taloscluster()
    body["spec"].update(refs)
    return body


def kube_ref(name: str = "admin-kubeconfig", key: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name}
    if key is not None:
        ref["key"] = key
    return {"kubeconfigSecretRef": ref}


async def answer(
    new: dict[str, Any],
    *,
    old: dict[str, Any] | None = None,
    backend: FakeBackend,
    user: str = "mallory",
    dryrun: bool = False,
) -> decisions.Answer:
    operation = "UPDATE" if old is not None else "CREATE"
    stored = await stamped(
        new, old=old, userinfo=userinfo(user), operation=operation, backend=backend
    )
    return await judgement.cluster_answer(
        new=stored,
        old=old,
        userinfo=userinfo(user),
        operation=operation,
        dryrun=dryrun,
        backend=backend,
    )


@pytest.mark.parametrize("dryrun", [False, True], ids=["write", "dry-run"])
@pytest.mark.parametrize("field", ["kubeconfigSecretRef", "talosconfigSecretRef"])
async def test_a_create_naming_a_secret_the_user_may_not_read_is_refused(
    field: str, dryrun: bool
) -> None:
    backend = FakeBackend(secret_readers={str(ADMIN_SECRET): {"admin"}})
    refused = await answer(
        cluster(**{field: {"name": "admin-kubeconfig"}}), backend=backend, dryrun=dryrun
    )
    assert not refused.allowed
    assert refused.code == 403
    assert refused.message == (
        f"TalosCluster team-a/prod is refused: spec.{field} names Secret "
        "team-a/admin-kubeconfig, which user 'mallory' may not read; the operator reads "
        "that Secret for the cluster and mounts it into its Jobs, so it is used only for a "
        "user who could read it: check with `kubectl auth can-i get "
        "secret/admin-kubeconfig -n team-a`, and get `get` on it or name a Secret you may "
        "read."
    )
    # asked as the review's user, whole: the same identity the API server authenticated
    assert backend.secret_reviews[-1] == (MALLORY, ADMIN_SECRET)
    # a user who may read it is admitted
    allowed = await answer(
        cluster(**{field: {"name": "admin-kubeconfig"}}), backend=backend, user="admin"
    )
    assert allowed.allowed, allowed.message


async def test_both_references_are_asked_and_either_refuses() -> None:
    backend = FakeBackend(secret_readers={"team-a/k": {"mallory"}, "team-a/t": {"someone-else"}})
    body = cluster(kubeconfigSecretRef={"name": "k"}, talosconfigSecretRef={"name": "t"})
    refused = await answer(body, backend=backend)
    assert not refused.allowed
    assert "spec.talosconfigSecretRef names Secret team-a/t" in refused.message
    asked = {ref.name for _, ref in backend.secret_reviews}
    assert asked == {"k", "t"}


@pytest.mark.parametrize(
    ("before", "after", "asked"),
    [
        (kube_ref("mine"), kube_ref("admin-kubeconfig"), True),  # another Secret
        (kube_ref("admin-kubeconfig"), kube_ref("admin-kubeconfig", key="other"), True),
        ({}, kube_ref("admin-kubeconfig"), True),  # a reference added
        (kube_ref("admin-kubeconfig"), kube_ref("admin-kubeconfig"), False),  # unchanged
        (kube_ref("admin-kubeconfig"), {}, False),  # removed: nothing is read any more
    ],
)
async def test_an_update_is_judged_again_only_when_a_reference_changes(
    before: dict[str, Any], after: dict[str, Any], asked: bool
) -> None:
    backend = FakeBackend(secret_readers={str(ADMIN_SECRET): set(), "team-a/mine": {"mallory"}})
    old = cluster(**before)
    new = cluster(**after)
    new["spec"]["kubernetesVersion"] = "v1.36.7"
    result = await answer(new, old=old, backend=backend)
    assert result.allowed is not asked, result.message
    assert bool(backend.secret_reviews) is asked


async def test_the_operators_follow_up_write_asks_nothing_about_the_secret() -> None:
    """The executor moves the spec after an operation; the references stay as they are,
    so its write never depends on a SubjectAccessReview of the Secret."""
    operator = "system:serviceaccount:ichor-system:ichor"
    backend = FakeBackend(secret_readers={str(ADMIN_SECRET): set()}, operator=operator)
    old = cluster(**kube_ref())
    new = copy.deepcopy(old)
    new["spec"]["kubernetesVersion"] = "v1.36.7"
    result = await answer(new, old=old, backend=backend, user=operator)
    assert result.allowed, result.message
    assert backend.secret_reviews == []


async def test_a_forged_review_is_judged_as_the_user_it_names() -> None:
    """The review's userInfo is the only identity there is (the API server is the only
    caller): a review naming the admin is judged as the admin, one naming mallory as
    mallory, whoever posted it."""
    backend = FakeBackend(secret_readers={str(ADMIN_SECRET): {"admin"}})
    assert (await answer(cluster(**kube_ref()), backend=backend, user="admin")).allowed
    assert not (await answer(cluster(**kube_ref()), backend=backend, user="mallory")).allowed
    assert {who.username for who, _ in backend.secret_reviews} == {"admin", "mallory"}


async def test_an_unanswered_review_is_retried_not_admitted() -> None:
    backend = FakeBackend(fail=False)
    body = cluster(**kube_ref())

    class Failing(FakeBackend):
        async def may_read_secret(self, requester: Requester, ref: NamespacedName) -> bool:
            raise kubeapi.ApiUnavailable("the SubjectAccessReview failed: test")

    result = await answer(body, backend=Failing())
    assert not result.allowed
    assert result.code == decisions.Code.UNAVAILABLE
    assert (await answer(body, backend=backend)).allowed


def test_the_secret_review_asks_get_on_that_secret_for_the_whole_identity() -> None:
    review: Any = kubeapi.access_review(
        MALLORY, ADMIN_SECRET, group="", resource="secrets", verb="get"
    )
    assert review["spec"] == {
        "user": "mallory",
        "uid": "u-1",
        "groups": ["ops"],
        "extra": {"scopes": ["a"]},
        "resourceAttributes": {
            "group": "",
            "resource": "secrets",
            "verb": "get",
            "namespace": "team-a",
            "name": "admin-kubeconfig",
        },
    }


async def test_a_secret_answer_never_serves_the_override_or_the_reverse() -> None:
    """A Secret named like the cluster: the two answers are kept apart."""

    class Scripted(kubeapi.KubeBackend):
        def __init__(self) -> None:
            super().__init__(kube=KubeSettings(), answers=AccessCache())
            self.sent: list[str] = []

        async def _access_review(self, requester: Requester, ref: NamespacedName) -> bool:
            self.sent.append("override")
            return False

        async def _secret_review(self, requester: Requester, ref: NamespacedName) -> bool:
            self.sent.append("secret")
            return True

    backend = Scripted()
    same = NamespacedName("team-a", "prod")
    assert await backend.may_read_secret(MALLORY, same)
    assert not await backend.holds_override(MALLORY, same)
    assert await backend.may_read_secret(MALLORY, same)
    assert backend.sent == ["secret", "override"]
