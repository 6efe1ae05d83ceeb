"""The named steps of ``TagLister._fetch_token``: whether a realm may be asked, and what
its answer gives."""

from __future__ import annotations

import json

import pytest
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ichor.registry import lister, references
from ichor.registry.errors import AccessRefused, GarbageResponse
from ichor.registry.headers import Challenge
from ichor.registry.limits import Limits


def listing(
    reference: str = "ghcr.io/siderolabs/installer", *, user: bool = False
) -> lister._Listing:
    return lister._Listing(
        repository=references.parse(reference),
        credentials=lister.Credentials("u", "p") if user else None,
        limits=Limits(),
        deadline=0.0,
    )


def realm(url: str) -> Challenge:
    return Challenge(scheme="bearer", params={"realm": url})


def test_token_realm_is_a_url_the_listing_may_follow() -> None:
    assert lister._token_realm(listing(), realm("https://ghcr.io/token")) == URL(
        "https://ghcr.io/token"
    )
    local = listing("http://127.0.0.1:5000/test/talos", user=True)
    assert lister._token_realm(local, realm("http://127.0.0.1:5001/token")).port == 5001


@pytest.mark.parametrize("url", ["", "ftp://ghcr.io/token", "https://", "not a url"])
def test_token_realm_that_is_no_url_is_garbage(url: str) -> None:
    with pytest.raises(GarbageResponse, match="is not a URL"):
        lister._token_realm(listing(), Challenge(scheme="bearer", params={"realm": url}))


def test_token_realm_internal_for_an_internet_registry_is_refused() -> None:
    with pytest.raises(AccessRefused, match="is an internal address"):
        lister._token_realm(listing(), realm("http://169.254.169.254/token"))


def test_token_realm_in_plain_http_gets_no_credentials() -> None:
    with pytest.raises(AccessRefused, match="plain http: credentials are not sent"):
        lister._token_realm(listing(user=True), realm("http://auth.example.com/token"))
    assert lister._token_realm(listing(), realm("http://auth.example.com/token")).host == (
        "auth.example.com"
    )


def reply(status: int, body: object) -> lister._Reply:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return lister._Reply(
        status=status,
        reason="",
        url=URL("https://ghcr.io/token"),
        headers=CIMultiDictProxy(CIMultiDict()),
        body=raw,
    )


REALM = URL("https://ghcr.io/token")


def test_token_answer_reads_the_token_and_its_lifetime() -> None:
    assert lister._token_answer(listing(), REALM, reply(200, {"token": "t", "expires_in": 60})) == (
        "t",
        60,
    )
    assert lister._token_answer(listing(), REALM, reply(200, {"access_token": "a"})) == (
        "a",
        lister.DEFAULT_TOKEN_LIFETIME_S,
    )


@pytest.mark.parametrize(
    ("status", "body", "error", "why"),
    [
        (401, b"", AccessRefused, "refused an anonymous token"),
        (500, b"", GarbageResponse, "answered 500"),
        (200, b"[]", GarbageResponse, "answered without a token"),
        (200, {"token": ""}, GarbageResponse, "answered without a token"),
        (200, {"token": "t", "expires_in": "soon"}, GarbageResponse, "without a token"),
    ],
)
def test_token_answer_refuses(status: int, body: object, error: type[Exception], why: str) -> None:
    with pytest.raises(error, match=why):
        lister._token_answer(listing(), REALM, reply(status, body))


def test_token_answer_names_the_credentials_it_refused() -> None:
    with pytest.raises(AccessRefused, match="refused the credentials"):
        lister._token_answer(listing(user=True), REALM, reply(403, b""))
