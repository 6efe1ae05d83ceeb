"""The SubjectAccessReview answers the webhook keeps: never another user's, never stale.

Through ``KubeBackend.holds_override`` with the API call replaced by a script that counts
the reviews sent and answers what the "API server" holds now.
"""

from __future__ import annotations

import dataclasses

import pytest

from ichor.settings import KubeSettings
from ichor.webhook import decisions, kubeapi
from ichor.webhook.access_cache import AccessCache
from ichor.webhook.reviews import NamespacedName, Requester

ALICE = Requester(username="alice", uid="a-1", groups=("admins", "system:authenticated"))
CLUSTER = NamespacedName(namespace="fleet", name="prod")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Scripted(kubeapi.KubeBackend):
    """The real holds_override; the review itself answers from ``granted``."""

    def __init__(self, cache: AccessCache) -> None:
        super().__init__(kube=KubeSettings(), answers=cache)
        self.granted: set[tuple[Requester, NamespacedName]] = set()
        self.sent: list[tuple[Requester, NamespacedName]] = []
        self.unavailable = False

    async def _access_review(self, requester: Requester, ref: NamespacedName) -> bool:
        self.sent.append((requester, ref))
        if self.unavailable:
            raise kubeapi.ApiUnavailable("the SubjectAccessReview failed: test")
        return (requester, ref) in self.granted


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def backend(clock: Clock) -> Scripted:
    return Scripted(AccessCache(ttl=5.0, size=8, clock=clock))


async def test_a_repeated_question_within_the_ttl_is_answered_from_memory(
    backend: Scripted, clock: Clock
) -> None:
    backend.granted.add((ALICE, CLUSTER))
    assert await backend.holds_override(ALICE, CLUSTER)
    clock.now += 4.9
    assert await backend.holds_override(ALICE, CLUSTER)
    assert len(backend.sent) == 1


@pytest.mark.parametrize(
    "other",
    [
        dataclasses.replace(ALICE, username="mallory"),
        dataclasses.replace(ALICE, username="Alice"),
        dataclasses.replace(ALICE, uid="a-2"),  # same name, another account (recreated)
        dataclasses.replace(ALICE, uid=""),
        dataclasses.replace(ALICE, groups=("system:authenticated",)),
        dataclasses.replace(ALICE, groups=("admins", "system:authenticated", "extra")),
        dataclasses.replace(ALICE, extra=(("scopes", ("read",)),)),
        Requester(username="alice"),
    ],
    ids=["user", "case", "uid", "no-uid", "fewer-groups", "more-groups", "extra", "bare"],
)
async def test_a_cached_allow_never_serves_another_requester(
    backend: Scripted, other: Requester
) -> None:
    backend.granted.add((ALICE, CLUSTER))
    assert await backend.holds_override(ALICE, CLUSTER)
    assert not await backend.holds_override(other, CLUSTER)
    assert backend.sent == [(ALICE, CLUSTER), (other, CLUSTER)]
    # and the other requester's denial does not replace alice's allow either
    assert await backend.holds_override(ALICE, CLUSTER)
    assert len(backend.sent) == 2


@pytest.mark.parametrize(
    "elsewhere",
    [
        NamespacedName(namespace="fleet", name="staging"),
        NamespacedName(namespace="other", name="prod"),
    ],
    ids=["name", "namespace"],
)
async def test_a_cached_allow_never_serves_another_cluster(
    backend: Scripted, elsewhere: NamespacedName
) -> None:
    backend.granted.add((ALICE, CLUSTER))
    assert await backend.holds_override(ALICE, CLUSTER)
    assert not await backend.holds_override(ALICE, elsewhere)
    assert len(backend.sent) == 2


async def test_a_cached_allow_never_outlives_its_ttl(backend: Scripted, clock: Clock) -> None:
    backend.granted.add((ALICE, CLUSTER))
    assert await backend.holds_override(ALICE, CLUSTER)
    backend.granted.clear()  # the verb is revoked
    clock.now += 5.0  # exactly the ttl: gone
    assert not await backend.holds_override(ALICE, CLUSTER)
    assert len(backend.sent) == 2
    # a denial is kept as long, then asked again: a grant is seen
    backend.granted.add((ALICE, CLUSTER))
    clock.now += 4.0
    assert not await backend.holds_override(ALICE, CLUSTER)
    clock.now += 1.0
    assert await backend.holds_override(ALICE, CLUSTER)
    assert len(backend.sent) == 3


async def test_a_failed_review_is_not_kept(backend: Scripted) -> None:
    backend.granted.add((ALICE, CLUSTER))
    backend.unavailable = True
    with pytest.raises(kubeapi.ApiUnavailable):
        await backend.holds_override(ALICE, CLUSTER)
    backend.unavailable = False
    assert await backend.holds_override(ALICE, CLUSTER)
    assert len(backend.sent) == 2


async def test_the_memory_is_bounded_and_forgets_the_oldest(
    backend: Scripted, clock: Clock
) -> None:
    users = [Requester(username=f"user-{n}") for n in range(100)]
    for user in users:
        backend.granted.add((user, CLUSTER))
        assert await backend.holds_override(user, CLUSTER)
        assert len(backend._answers) <= 8
    assert len(backend.sent) == 100
    assert await backend.holds_override(users[-1], CLUSTER)  # recent: kept
    assert len(backend.sent) == 100
    assert await backend.holds_override(users[0], CLUSTER)  # oldest: asked again
    assert len(backend.sent) == 101


def test_the_cache_keys_the_verb_too() -> None:
    cache = AccessCache(clock=Clock())
    cache.put(ALICE, verb=decisions.VERB, ref=CLUSTER, allowed=True)
    assert cache.get(ALICE, verb=decisions.VERB, ref=CLUSTER) is True
    assert cache.get(ALICE, verb="delete", ref=CLUSTER) is None


def test_a_zero_ttl_or_size_keeps_nothing_and_negative_is_refused() -> None:
    for cache in (AccessCache(ttl=0, clock=Clock()), AccessCache(size=0, clock=Clock())):
        cache.put(ALICE, verb=decisions.VERB, ref=CLUSTER, allowed=True)
        assert cache.get(ALICE, verb=decisions.VERB, ref=CLUSTER) is None
        assert len(cache) == 0
    with pytest.raises(ValueError, match="must not be negative"):
        AccessCache(ttl=-1)
