"""The tag lister against the real registry: every page, every tag, the token dance, and
each fault ending in its typed error within its bound."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from ichor.registry import (
    AccessRefused,
    Cause,
    Credentials,
    GarbageResponse,
    Limits,
    ListingError,
    ListingTimedOut,
    RegistryFailing,
    RegistryUnreachable,
    RepositoryNotFound,
    TagLister,
    TooManyTags,
)
from tests.harness import faultproxy
from tests.harness import registry as test_registry
from tests.harness.faultproxy import Fault, FaultKind

pytestmark = pytest.mark.component

# Short bounds so a fault ends in seconds; the retry backoff starts at 50 ms.
FAST = Limits(
    page_size=100,
    total_timeout=10.0,
    request_timeout=3.0,
    max_retries=2,
    backoff_base=0.05,
    backoff_cap=0.2,
)


@pytest.fixture
async def lister() -> AsyncIterator[TagLister]:
    async with TagLister(limits=FAST) as fresh:
        yield fresh


async def test_every_page_is_listed_and_every_tag_kept_as_listed(
    registry: test_registry.LocalRegistry,
    installer: tuple[str, list[str]],
    lister: TagLister,
) -> None:
    name, seeded = installer
    tags = await lister.list_tags(registry.reference(name))
    assert tags == sorted(seeded)
    assert len(tags) == 2500
    assert {"v1.14.3", "1.14.3", "v1.3.0-alpha.11", "v2.0.0-rc.19"} <= set(tags)


async def test_the_pages_follow_the_link_header_through_one_token(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    lister: TagLister,
) -> None:
    name, seeded = installer
    tags = await lister.list_tags(fault_proxy.reference(name))
    assert tags == sorted(seeded)
    # 25 full pages of 100, the empty page the last Link leads to, and the first 401
    assert fault_proxy.requests == 27
    assert lister.token_requests == 1


async def test_a_cached_token_serves_the_next_listing(
    registry: test_registry.LocalRegistry,
    installer: tuple[str, list[str]],
    lister: TagLister,
) -> None:
    name, _ = installer
    issued = registry.tokens.issued
    await lister.list_tags(registry.reference(name))
    await lister.list_tags(registry.reference(name))
    assert lister.token_requests == 1
    assert registry.tokens.issued == issued + 1


@pytest.mark.parametrize(("stale", "outcome"), [(1, "listed"), (None, "refused")])
async def test_a_token_the_registry_stops_taking_is_fetched_again_once(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    lister: TagLister,
    stale: int | None,
    outcome: str,
) -> None:
    name, seeded = installer
    await lister.list_tags(fault_proxy.reference(name))  # a token in the cache
    fault_proxy.set_faults(Fault(kind=FaultKind.CHALLENGE, times=stale))
    if outcome == "listed":
        assert await lister.list_tags(fault_proxy.reference(name)) == sorted(seeded)
        assert lister.token_requests == 2
    else:
        with pytest.raises(AccessRefused, match="refused the anonymous token"):
            await lister.list_tags(fault_proxy.reference(name))
        assert lister.token_requests == 2


async def test_a_repository_that_does_not_exist_fails_in_one_round_trip(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    lister: TagLister,
) -> None:
    reference = fault_proxy.reference("test/no-such-repository")
    start = time.monotonic()
    with pytest.raises(RepositoryNotFound) as caught:
        await lister.list_tags(reference)
    assert time.monotonic() - start < 2
    assert fault_proxy.requests == 2  # the 401 and the 404: no retry
    assert str(caught.value).startswith(f"cannot list tags of {reference}: ")
    assert "no such repository" in str(caught.value)
    assert caught.value.cause is Cause.NOT_FOUND


@pytest.mark.parametrize(
    ("credentials", "expected"),
    [
        (None, AccessRefused),
        (Credentials(username=test_registry.SEED_USER, password="not-the-password"), AccessRefused),
        ("seed", None),
    ],
)
async def test_a_private_mirror_lists_only_with_its_credentials(
    registry: test_registry.LocalRegistry,
    private_repository: tuple[str, list[str]],
    lister: TagLister,
    credentials: Credentials | str | None,
    expected: type[ListingError] | None,
) -> None:
    name, seeded = private_repository
    if credentials == "seed":
        user, password = registry.seed_credentials
        credentials = Credentials(username=user, password=password)
    assert not isinstance(credentials, str)
    if expected is None:
        tags = await lister.list_tags(registry.reference(name), credentials=credentials)
        assert tags == sorted(seeded)
        return
    with pytest.raises(expected) as caught:
        await lister.list_tags(registry.reference(name), credentials=credentials)
    assert name in str(caught.value)
    if credentials is not None:
        assert "refused the credentials" in str(caught.value)
        assert credentials.password not in str(caught.value)


async def test_a_stopped_registry_is_unreachable_at_once(
    running_registry: test_registry.LocalRegistry,
    installer: tuple[str, list[str]],
    lister: TagLister,
) -> None:
    name, _ = installer
    running_registry.stop()
    start = time.monotonic()
    with pytest.raises(RegistryUnreachable, match="unreachable") as caught:
        await lister.list_tags(running_registry.reference(name))
    assert time.monotonic() - start < 2
    assert caught.value.cause is Cause.UNREACHABLE
    running_registry.start()
    assert len(await lister.list_tags(running_registry.reference(name))) == 2500


async def test_429_with_retry_after_is_waited_out(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    lister: TagLister,
) -> None:
    name, seeded = installer
    fault_proxy.set_faults(faultproxy.status(429, retry_after="1", times=2))
    start = time.monotonic()
    assert await lister.list_tags(fault_proxy.reference(name)) == sorted(seeded)
    assert 2 <= time.monotonic() - start < 6


@pytest.mark.parametrize(
    ("fault", "message", "bound"),
    [
        (faultproxy.status(429, retry_after="1"), "429 Too Many Requests.*after 2 retries", 4),
        (
            faultproxy.status(429, retry_after="120"),
            "retry in 120 s, beyond the listing's bound",
            1,
        ),
        (faultproxy.status(500), "500 Internal Server Error.*after 2 retries", 2),
        (faultproxy.status(503), "503 Service Unavailable.*after 2 retries", 2),
    ],
)
async def test_a_registry_that_keeps_failing_ends_in_registry_failing(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    lister: TagLister,
    fault: Fault,
    message: str,
    bound: float,
) -> None:
    name, _ = installer
    fault_proxy.set_faults(fault)
    start = time.monotonic()
    with pytest.raises(RegistryFailing, match=message):
        await lister.list_tags(fault_proxy.reference(name))
    assert time.monotonic() - start < bound


async def test_500s_that_pass_are_retried_with_backoff(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    lister: TagLister,
) -> None:
    name, seeded = installer
    fault_proxy.set_faults(faultproxy.status(502, times=2))
    assert await lister.list_tags(fault_proxy.reference(name)) == sorted(seeded)


@pytest.mark.parametrize(("status", "expected"), [(401, AccessRefused), (403, AccessRefused)])
async def test_refusals_are_never_retried(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    lister: TagLister,
    status: int,
    expected: type[ListingError],
) -> None:
    name, _ = installer
    fault_proxy.set_faults(faultproxy.status(status))
    with pytest.raises(expected):
        await lister.list_tags(fault_proxy.reference(name))
    assert fault_proxy.requests == 1


@pytest.mark.parametrize(
    ("fault", "expected", "message"),
    [
        (Fault(kind=FaultKind.CUT_CONNECTION, times=1), GarbageResponse, "cut its answer short"),
        (
            Fault(kind=FaultKind.HALF_BODY, times=1),
            GarbageResponse,
            "page 1: the answer is not JSON",
        ),
        (Fault(kind=FaultKind.NOT_JSON, times=1), GarbageResponse, "not JSON .*'<html>"),
        (Fault(kind=FaultKind.LINK_LOOP), GarbageResponse, "Link header loops back"),
        (Fault(kind=FaultKind.ENDLESS, tags=1000), TooManyTags, "more than 5000 tags"),
        (Fault(kind=FaultKind.ENDLESS, tags=1), TooManyTags, "more than 50 pages"),
        (Fault(kind=FaultKind.HUGE, tags=200_000), TooManyTags, "over the cap of 1048576 bytes"),
        (Fault(kind=FaultKind.SLOW, delay=5), ListingTimedOut, "did not answer within 3 s"),
    ],
    ids=lambda value: value.kind.value if isinstance(value, Fault) else None,
)
async def test_a_garbled_or_runaway_answer_ends_in_its_typed_error(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    fault: Fault,
    expected: type[ListingError],
    message: str,
) -> None:
    name, _ = installer
    fault_proxy.set_faults(fault)
    limits = Limits(
        page_size=100,
        total_timeout=10,
        request_timeout=3,
        max_pages=50,
        max_tags=5000,
        max_body_bytes=1024 * 1024,
        max_retries=2,
        backoff_base=0.05,
    )
    start = time.monotonic()
    async with TagLister(limits=limits) as lister:
        with pytest.raises(expected, match=message) as caught:
            await lister.list_tags(fault_proxy.reference(name))
    assert time.monotonic() - start < 5
    assert str(caught.value).startswith(f"cannot list tags of {fault_proxy.reference(name)}: ")


async def test_a_listing_slower_than_its_bound_times_out(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
) -> None:
    name, _ = installer
    fault_proxy.set_faults(Fault(kind=FaultKind.SLOW, delay=0.3))
    start = time.monotonic()
    async with TagLister(limits=Limits(page_size=100, total_timeout=1.5)) as lister:
        with pytest.raises(ListingTimedOut, match=r"within its bound of 1\.5 s"):
            await lister.list_tags(fault_proxy.reference(name))
    assert time.monotonic() - start < 2.5


async def test_more_tags_than_the_cap_are_refused_not_cut(
    registry: test_registry.LocalRegistry, installer: tuple[str, list[str]]
) -> None:
    name, _ = installer
    async with TagLister(limits=Limits(page_size=100, max_tags=1000)) as lister:
        with pytest.raises(TooManyTags, match=r"more than 1000 tags \(the cap\) after 11 pages"):
            await lister.list_tags(registry.reference(name))


@pytest.mark.parametrize(
    ("credentials", "message", "requests"),
    [
        (None, "asks for a user and password and none were given", 1),
        (Credentials(username="mirror", password="secret"), "and refused the ones given", 2),
    ],
)
async def test_a_registry_asking_for_basic_auth_gets_the_credentials_once(
    installer: tuple[str, list[str]],
    fault_proxy: faultproxy.FaultProxy,
    lister: TagLister,
    credentials: Credentials | None,
    message: str,
    requests: int,
) -> None:
    name, _ = installer
    basic = {"WWW-Authenticate": 'Basic realm="mirror"'}
    fault_proxy.set_faults(Fault(kind=FaultKind.STATUS, status=401, headers=basic))
    with pytest.raises(AccessRefused, match=message):
        await lister.list_tags(fault_proxy.reference(name), credentials=credentials)
    assert fault_proxy.requests == requests
