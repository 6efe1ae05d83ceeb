"""List every tag of an OCI repository, anonymously and within bounds, for the release check.

``GET /v2/<name>/tags/list`` and its ``Link`` pages, every tag kept as listed; ghcr.io's
anonymous bearer flow, a token cached per registry, scope and user. Bounded: a total time,
caps on pages, tags and page size, a few retries (429 and 5xx only), and a ``Link`` that
loops or leaves the registry is an error. Every failure is a ``ListingError`` naming the
repository and the cause.

More in docs/design/notes.md, "ichor/registry/lister.py".
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

import aiohttp
from multidict import CIMultiDictProxy
from yarl import URL

from ichor.registry import headers as header_parsing
from ichor.registry import references
from ichor.registry.errors import (
    AccessRefused,
    GarbageResponse,
    ListingError,
    ListingTimedOut,
    RegistryFailing,
    RegistryUnreachable,
    RepositoryNotFound,
    TooManyTags,
)
from ichor.registry.limits import Limits
from ichor.registry.references import Repository

USER_AGENT: Final = "ichor-tag-lister/0.1"
ERROR_EXCERPT: Final = 200
TOKEN_CACHE_SIZE: Final = 256
DEFAULT_TOKEN_LIFETIME_S: Final = 60  # distribution token spec: the default expires_in


@dataclass(frozen=True)
class Credentials:
    """User and password for a private mirror (the release check reads them from a Secret)."""

    username: str
    password: str = field(repr=False)

    def basic(self) -> str:
        """The ``Authorization`` value for HTTP basic (RFC 7617, UTF-8)."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


def credentials_from_docker_config(config: bytes | str, *, host: str) -> Credentials | None:
    """The credentials for ``host`` in a ``.dockerconfigjson`` Secret value, if any.

    Reads ``auths.<host>.username``/``password`` or ``auth`` (base64 ``user:password``);
    ``https://`` before the host is tolerated. Returns None when the host is absent.
    Raises ValueError for a value that is not such a document.
    """
    try:
        document = json.loads(config)
        auths: dict[str, Any] = document["auths"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"not a .dockerconfigjson document ({error})") from None
    for key, entry in auths.items():
        bare = key.removeprefix("https://").removeprefix("http://").split("/", 1)[0]
        if bare.lower() != host.lower() or not isinstance(entry, dict):
            continue
        if entry.get("username") and entry.get("password") is not None:
            return Credentials(username=str(entry["username"]), password=str(entry["password"]))
        if entry.get("auth"):
            try:
                decoded = base64.b64decode(entry["auth"], validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                decoded = ""
            user, colon, password = decoded.partition(":")
            if not (user and colon):
                raise ValueError(f"auths.{key}.auth is not base64 of user:password")
            return Credentials(username=user, password=password)
    return None


@dataclass(frozen=True)
class _Reply:
    """What the lister keeps of one HTTP answer: never more than one body."""

    status: int
    reason: str
    url: URL
    headers: CIMultiDictProxy[str]
    body: bytes


@dataclass
class _Token:
    value: str
    expires_at: float


@dataclass
class _Listing:
    """The state of one listing: what it names, its bounds and its deadline."""

    repository: Repository
    credentials: Credentials | None
    limits: Limits
    deadline: float
    basic: bool = False

    @property
    def name(self) -> str:
        return str(self.repository)

    @property
    def cache_key(self) -> tuple[str, str, str]:
        user = self.credentials.username if self.credentials else ""
        return (self.repository.origin, self.repository.pull_scope, user)


def _excerpt(body: bytes) -> str:
    """The registry's own error (``CODE: message``) or the start of the body, short."""
    try:
        document = json.loads(body)
        errors = document.get("errors") if isinstance(document, dict) else None
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            first = errors[0]
            text = f"{first.get('code', '')}: {first.get('message', '')}".strip(": ")
            return text[:ERROR_EXCERPT]
    except ValueError:
        pass
    text = body[:ERROR_EXCERPT].decode("utf-8", errors="replace").strip()
    return " ".join(text.split())


def _status(reply: _Reply) -> str:
    excerpt = _excerpt(reply.body)
    return f"{reply.status} {reply.reason}" + (f", {excerpt}" if excerpt else "")


def parse_tag_page(body: bytes) -> list[str]:
    """The tags of one ``tags/list`` answer; ValueError saying what is wrong with it."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        start = body[:40].decode("utf-8", errors="replace")
        raise ValueError(f"the answer is not JSON (starts {start!r})") from None
    if not isinstance(document, dict) or "tags" not in document:
        raise ValueError("the answer is JSON but has no tags list")
    tags = document["tags"]
    if tags is None:  # distribution 2.x sends null for a repository without tags
        return []
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise ValueError("the answer's tags are not a list of strings")
    return tags


class TagLister:
    """Lists tags; holds one HTTP session and the token cache, shared by its listings.

    Use as ``async with TagLister() as lister: await lister.list_tags(reference)``. A
    session passed in is used as is (its proxy and TLS settings) and not closed here.
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self._session = session
        self._own_session = session is None
        self._tokens: OrderedDict[tuple[str, str, str], _Token] = OrderedDict()
        self.token_requests = 0

    async def __aenter__(self) -> TagLister:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
        self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=8, ttl_dns_cache=300),
                headers={"User-Agent": USER_AGENT},
                trust_env=False,
            )
            self._own_session = True
        return self._session

    async def list_tags(
        self,
        reference: str | Repository,
        *,
        credentials: Credentials | None = None,
        limits: Limits | None = None,
    ) -> list[str]:
        """Every tag of the repository, in the registry's order; raises ListingError."""
        repository = reference if isinstance(reference, Repository) else references.parse(reference)
        bounds = limits or self.limits
        loop = asyncio.get_running_loop()
        listing = _Listing(
            repository=repository,
            credentials=credentials,
            limits=bounds,
            deadline=loop.time() + bounds.total_timeout,
        )
        try:
            async with asyncio.timeout(bounds.total_timeout):
                return await self._list(listing)
        except TimeoutError:
            raise ListingTimedOut(
                listing.name,
                f"the listing did not finish within its bound of {bounds.total_timeout:g} s",
            ) from None

    async def _list(self, listing: _Listing) -> list[str]:
        limits = listing.limits
        url: URL | None = URL(listing.repository.tags_url).with_query(n=str(limits.page_size))
        origin = URL(listing.repository.origin).origin()
        visited: set[str] = set()
        tags: list[str] = []
        while url is not None:
            if str(url) in visited:
                raise GarbageResponse(
                    listing.name,
                    f"the registry's Link header loops back to a page already read "
                    f"({url.path_qs}) after {len(visited)} pages",
                )
            if len(visited) >= limits.max_pages:
                raise TooManyTags(
                    listing.name,
                    f"more than {limits.max_pages} pages of tags (the cap; "
                    f"{len(tags)} tags so far)",
                )
            visited.add(str(url))
            reply = await self._page(listing, url)
            try:
                page = parse_tag_page(reply.body)
            except ValueError as error:
                raise GarbageResponse(listing.name, f"page {len(visited)}: {error}") from None
            if len(tags) + len(page) > limits.max_tags:
                raise TooManyTags(
                    listing.name,
                    f"more than {limits.max_tags} tags (the cap) after {len(visited)} pages",
                )
            tags.extend(page)
            link = reply.headers.get("Link")
            target = header_parsing.next_link(link) if link else None
            if link and target is None and "next" in link:
                raise GarbageResponse(listing.name, f"unreadable Link header {link[:120]!r}")
            if target is None:
                url = None
                continue
            try:
                url = reply.url.join(URL(target))
            except ValueError:
                raise GarbageResponse(
                    listing.name, f"unreadable Link target {target[:120]!r}"
                ) from None
            if url.origin() != origin:
                raise GarbageResponse(
                    listing.name,
                    f"the Link header leads away from the registry (to {url.origin()})",
                )
        return tags

    # -- one page, with authentication ---------------------------------------------

    def _auth_header(self, listing: _Listing) -> dict[str, str]:
        key = listing.cache_key
        token = self._tokens.get(key)
        if token is not None:
            if token.expires_at > time.monotonic():
                return {"Authorization": f"Bearer {token.value}"}
            del self._tokens[key]
        if listing.basic and listing.credentials is not None:
            return {"Authorization": listing.credentials.basic()}
        return {}

    async def _page(self, listing: _Listing, url: URL) -> _Reply:
        refreshed = False
        while True:
            headers = {"Accept": "application/json", **self._auth_header(listing)}
            reply = await self._request(listing, url, headers=headers, what="the registry")
            if reply.status == 200:
                return reply
            if reply.status == 401:
                await self._answer_challenge(listing, reply, refreshed=refreshed)
                refreshed = True
                continue
            raise self._refusal(listing, reply)

    def _refusal(self, listing: _Listing, reply: _Reply) -> ListingError:
        if reply.status == 404:
            return RepositoryNotFound(
                listing.name, f"the registry has no such repository ({_status(reply)})"
            )
        if reply.status == 403:
            return AccessRefused(
                listing.name,
                f"the registry refused access ({_status(reply)}); a private repository "
                "needs credentials",
            )
        return GarbageResponse(listing.name, f"unexpected answer {_status(reply)}")

    async def _answer_challenge(self, listing: _Listing, reply: _Reply, *, refreshed: bool) -> None:
        """Act on a 401: fetch a (new) token, or switch to basic; raise when already done."""
        challenges = header_parsing.parse_challenges(reply.headers.get("WWW-Authenticate", ""))
        bearer = next((c for c in challenges if c.scheme == "bearer" and c.realm), None)
        if bearer is not None:
            self._tokens.pop(listing.cache_key, None)
            if refreshed:
                detail = bearer.params.get("error", "")
                who = (
                    "the token of the mirror's credentials"
                    if listing.credentials
                    else ("the anonymous token")
                )
                raise AccessRefused(
                    listing.name,
                    f"the registry refused {who}"
                    + (f" ({detail})" if detail else f" ({_status(reply)})")
                    + (
                        ""
                        if listing.credentials
                        else "; the repository is private or does not exist here: "
                        "a private mirror needs credentials"
                    ),
                )
            await self._fetch_token(listing, bearer)
            return
        basic = any(c.scheme == "basic" for c in challenges)
        if basic and listing.credentials is not None and not listing.basic:
            listing.basic = True
            return
        if basic:
            raise AccessRefused(
                listing.name,
                "the registry asks for a user and password"
                + (
                    " and refused the ones given" if listing.credentials else " and none were given"
                ),
            )
        raise AccessRefused(
            listing.name, f"401 without a bearer or basic challenge ({_status(reply)})"
        )

    async def _fetch_token(self, listing: _Listing, challenge: header_parsing.Challenge) -> None:
        """One token from the challenge's realm, cached: the realm checked, then asked
        (with the credentials, if any), then its answer read."""
        realm = _token_realm(listing, challenge)
        query: dict[str, str] = {}
        if "service" in challenge.params:
            query["service"] = challenge.params["service"]
        query["scope"] = challenge.params.get("scope", listing.repository.pull_scope)
        headers = {"Accept": "application/json"}
        if listing.credentials is not None:
            headers["Authorization"] = listing.credentials.basic()
        self.token_requests += 1
        reply = await self._request(
            listing, realm.update_query(query), headers=headers, what="the token realm"
        )
        value, lifetime = _token_answer(listing, realm, reply)
        self._tokens[listing.cache_key] = _Token(
            value=value, expires_at=time.monotonic() + max(lifetime - 10, 5)
        )
        while len(self._tokens) > TOKEN_CACHE_SIZE:
            self._tokens.popitem(last=False)

    # -- one request, with retries -------------------------------------------------

    async def _request(
        self, listing: _Listing, url: URL, *, headers: dict[str, str], what: str
    ) -> _Reply:
        """GET with retries on 429/5xx and dropped connections; other answers returned."""
        limits = listing.limits
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            failure: str
            wait: float | None = None
            try:
                reply = await self._once(listing, url, headers=headers, what=what)
            except _Dropped as dropped:
                failure = f"{what} dropped the connection ({dropped})"
            else:
                if reply.status != 429 and reply.status < 500:
                    return reply
                failure = f"{what} answered {_status(reply)}"
                wait = header_parsing.retry_after(reply.headers.get("Retry-After"), now=time.time())
            attempt += 1
            if attempt > limits.max_retries:
                raise RegistryFailing(
                    listing.name, f"{failure}, still after {limits.max_retries} retries"
                )
            if wait is None:
                ceiling = min(limits.backoff_cap, limits.backoff_base * 2 ** (attempt - 1))
                wait = random.uniform(ceiling / 2, ceiling)
            remaining = listing.deadline - loop.time()
            if wait >= remaining:
                raise RegistryFailing(
                    listing.name,
                    f"{failure} and asks to retry in {wait:.3g} s, beyond the listing's "
                    f"bound ({max(remaining, 0):.3g} s left of {limits.total_timeout:g} s)",
                )
            await asyncio.sleep(wait)

    async def _once(
        self, listing: _Listing, url: URL, *, headers: dict[str, str], what: str
    ) -> _Reply:
        limits = listing.limits
        timeout = aiohttp.ClientTimeout(total=limits.request_timeout)
        try:
            async with self._http().get(
                url, headers=headers, timeout=timeout, max_redirects=3
            ) as response:
                if response.status == 200:
                    body = await self._read_body(listing, response)
                else:  # an error answer: keep its start for the message, no more
                    body = await response.content.read(4096)
                return _Reply(
                    status=response.status,
                    reason=response.reason or "",
                    url=response.url,
                    headers=response.headers,
                    body=body,
                )
        except TimeoutError:
            raise ListingTimedOut(
                listing.name, f"{what} did not answer within {limits.request_timeout:g} s"
            ) from None
        except aiohttp.ClientPayloadError as error:
            raise GarbageResponse(
                listing.name, f"{what} cut its answer short ({_cause(error)})"
            ) from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
            if isinstance(error, aiohttp.ClientConnectorError):
                raise RegistryUnreachable(
                    listing.name, f"{what} is unreachable at {url.origin()} ({_cause(error)})"
                ) from None
            raise _Dropped(_cause(error)) from None
        except aiohttp.TooManyRedirects:
            raise GarbageResponse(listing.name, f"{what} redirects more than 3 times") from None
        except aiohttp.ClientError as error:
            raise RegistryUnreachable(
                listing.name, f"{what} at {url.origin()} failed: {_cause(error)}"
            ) from None

    async def _read_body(self, listing: _Listing, response: aiohttp.ClientResponse) -> bytes:
        cap = listing.limits.max_body_bytes
        if response.content_length is not None and response.content_length > cap:
            raise TooManyTags(
                listing.name,
                f"a page of {response.content_length} bytes is over the cap of {cap} bytes",
            )
        body = bytearray()
        async for chunk in response.content.iter_chunked(64 * 1024):
            body.extend(chunk)
            if len(body) > cap:
                raise TooManyTags(listing.name, f"a page is over the cap of {cap} bytes")
        return bytes(body)


class _Dropped(Exception):
    """A connection dropped mid-request: retried like a 5xx."""


def _cause(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return " ".join(text.split())[:ERROR_EXCERPT]


async def list_tags(
    reference: str | Repository,
    *,
    credentials: Credentials | None = None,
    limits: Limits | None = None,
) -> list[str]:
    """One listing with a session of its own (the bench and one-off callers use this)."""
    async with TagLister(limits=limits) as lister:
        return await lister.list_tags(reference, credentials=credentials)


def _token_realm(listing: _Listing, challenge: header_parsing.Challenge) -> URL:
    """The realm a challenge names, if it may be asked: a URL; internal only for a
    registry that is internal too; plain http with credentials only on loopback."""
    realm_text = challenge.realm or ""
    try:
        realm = URL(realm_text)
    except ValueError:
        realm = URL()
    if realm.scheme not in ("http", "https") or not realm.host:
        raise GarbageResponse(listing.name, f"the token realm {realm_text[:120]!r} is not a URL")
    if references.is_internal(realm.host) and not references.is_internal(listing.repository.host):
        # a registry on the internet does not get to point us at an internal address
        # (cloud metadata, cluster services); a mirror on an internal address may
        raise AccessRefused(
            listing.name,
            f"the token realm {realm.origin()} is an internal address and the registry "
            "is not: it is not followed",
        )
    if (
        realm.scheme == "http"
        and listing.credentials is not None
        and not references.is_loopback(realm.host)
    ):
        raise AccessRefused(
            listing.name,
            f"the token realm {realm} is plain http: credentials are not sent there",
        )
    return realm


def _token_answer(listing: _Listing, realm: URL, reply: _Reply) -> tuple[str, int]:
    """The token and its lifetime in seconds from the realm's answer, or the error."""
    if reply.status in (401, 403):
        raise AccessRefused(
            listing.name,
            f"the token realm {realm.origin()} refused "
            + ("the credentials" if listing.credentials else "an anonymous token")
            + f" ({_status(reply)})",
        )
    if reply.status != 200:
        raise GarbageResponse(
            listing.name, f"the token realm {realm.origin()} answered {_status(reply)}"
        )
    try:
        document = json.loads(reply.body)
        value = document.get("token") or document.get("access_token")
        lifetime = int(document.get("expires_in") or DEFAULT_TOKEN_LIFETIME_S)
    except (ValueError, TypeError, AttributeError):
        value, lifetime = None, 0
    if not isinstance(value, str) or not value:
        raise GarbageResponse(
            listing.name, f"the token realm {realm.origin()} answered without a token"
        )
    return value, lifetime
