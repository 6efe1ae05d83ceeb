"""The test registry is real: token auth like ghcr.io, and tag lists paged with Link.

These talk HTTP directly (no lister), so they prove the environment, not our client.
"""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp
import pytest
from yarl import URL

from ichor.registry import headers
from tests.harness import binaries
from tests.harness import registry as test_registry

pytestmark = pytest.mark.component


async def test_an_anonymous_pull_goes_401_then_token_then_200(
    registry: test_registry.LocalRegistry, installer: tuple[str, list[str]]
) -> None:
    name, _ = installer
    async with aiohttp.ClientSession(trust_env=False) as http:
        async with http.get(f"{registry.url}/v2/{name}/tags/list") as first:
            assert first.status == 401
            (challenge,) = headers.parse_challenges(first.headers["WWW-Authenticate"])
        assert challenge.scheme == "bearer"
        assert challenge.realm == registry.tokens.realm
        assert challenge.params["service"] == test_registry.SERVICE
        assert challenge.params["scope"] == f"repository:{name}:pull"
        params = {"service": challenge.params["service"], "scope": challenge.params["scope"]}
        async with http.get(registry.tokens.realm, params=params) as answer:
            assert answer.status == 200
            token = (await answer.json())["token"]
        bearer = {"Authorization": f"Bearer {token}"}
        async with http.get(f"{registry.url}/v2/{name}/tags/list", headers=bearer) as listed:
            assert listed.status == 200
            assert (await listed.json())["name"] == name


@pytest.mark.parametrize(
    ("token", "error"),
    [("not-a-jwt", "invalid_token"), (None, None)],
)
async def test_a_bad_or_missing_token_is_challenged(
    registry: test_registry.LocalRegistry,
    installer: tuple[str, list[str]],
    token: str | None,
    error: str | None,
) -> None:
    name, _ = installer
    sent = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession(trust_env=False) as http,
        http.get(f"{registry.url}/v2/{name}/tags/list", headers=sent) as answer,
    ):
        assert answer.status == 401
        (challenge,) = headers.parse_challenges(answer.headers["WWW-Authenticate"])
        assert challenge.params.get("error") == error


async def test_an_anonymous_token_does_not_push(
    registry: test_registry.LocalRegistry, installer: tuple[str, list[str]]
) -> None:
    name, _ = installer
    async with aiohttp.ClientSession(trust_env=False) as http:
        params = {"service": test_registry.SERVICE, "scope": f"repository:{name}:pull,push"}
        async with http.get(registry.tokens.realm, params=params) as answer:
            token = (await answer.json())["token"]
        async with http.post(
            f"{registry.url}/v2/{name}/blobs/uploads/",
            headers={"Authorization": f"Bearer {token}"},
        ) as upload:
            assert upload.status == 401
            assert "insufficient_scope" in upload.headers["WWW-Authenticate"]


@pytest.mark.parametrize("page", [100, 999])
async def test_tags_come_in_pages_through_the_link_header(
    registry: test_registry.LocalRegistry, installer: tuple[str, list[str]], page: int
) -> None:
    name, seeded = installer
    async with aiohttp.ClientSession(trust_env=False) as http:
        params = {"service": test_registry.SERVICE, "scope": f"repository:{name}:pull"}
        async with http.get(registry.tokens.realm, params=params) as answer:
            bearer = {"Authorization": f"Bearer {(await answer.json())['token']}"}
        url: URL | None = URL(f"{registry.url}/v2/{name}/tags/list").with_query(n=str(page))
        listed: list[str] = []
        pages = 0
        while url is not None:
            async with http.get(url, headers=bearer) as response:
                assert response.status == 200
                body = await response.json()
                assert len(body["tags"]) <= page
                listed += body["tags"]
                pages += 1
                link = response.headers.get("Link")
                target = headers.next_link(link) if link else None
                url = response.url.join(URL(target)) if target else None
    # a full last page still carries a Link, to one empty page (distribution's behaviour)
    assert len(seeded) // page <= pages - 1 <= len(seeded) // page
    assert listed == sorted(seeded)
    assert "v1.14.3" in listed
    assert "1.14.3" in listed


def test_a_registry_not_built_fails_naming_make_testenv(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ICHOR_TESTENV", str(tmp_path))
    with pytest.raises(binaries.MissingBinaryError, match=r"registry is not built.*make testenv"):
        test_registry.LocalRegistry(workdir=tmp_path / "registry")


def test_stop_makes_the_registry_unreachable_and_start_brings_back_its_tags(
    running_registry: test_registry.LocalRegistry, installer: tuple[str, list[str]]
) -> None:
    port = running_registry.port
    running_registry.stop()
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection(("127.0.0.1", port), timeout=1),
    ):
        pass
    running_registry.start()
    assert running_registry.port == port
    running_registry.seed("test/after-restart", ["v1.0.0"])
