"""A tags/list page is JSON with a list of strings; anything else is named for what it is."""

from __future__ import annotations

import base64
import json

import pytest

from ichor.registry import Credentials, credentials_from_docker_config
from ichor.registry.lister import parse_tag_page


@pytest.mark.parametrize(
    ("body", "tags"),
    [
        (
            b'{"name":"a","tags":["v1.14.3","1.14.3","v1.15.0-alpha.0"]}',
            ["v1.14.3", "1.14.3", "v1.15.0-alpha.0"],
        ),
        (b'{"name":"a","tags":[]}', []),
        (b'{"name":"a","tags":null}', []),
    ],
)
def test_a_page_keeps_every_tag_as_listed(body: bytes, tags: list[str]) -> None:
    assert parse_tag_page(body) == tags


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"<html>502</html>", "not JSON"),
        (b'{"name":"a","tags":["v1', "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b'["v1"]', "no tags list"),
        (b'{"name":"a"}', "no tags list"),
        (b'{"tags":"v1"}', "not a list of strings"),
        (b'{"tags":[1,2]}', "not a list of strings"),
    ],
)
def test_a_page_that_is_not_a_tag_list_is_refused(body: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_tag_page(body)


def _config(entry: dict[str, str], key: str = "mirror.example.com") -> str:
    return json.dumps({"auths": {key: entry}})


@pytest.mark.parametrize(
    "config",
    [
        _config({"username": "u", "password": "p:w"}),
        _config({"auth": base64.b64encode(b"u:p:w").decode()}),
        _config(
            {"auth": base64.b64encode(b"u:p:w").decode()}, key="https://mirror.example.com/v1/"
        ),
    ],
)
def test_mirror_credentials_come_from_a_docker_config_secret(config: str) -> None:
    found = credentials_from_docker_config(config, host="mirror.example.com")
    assert found == Credentials(username="u", password="p:w")
    assert "p:w" not in repr(found)


def test_a_docker_config_without_the_host_gives_no_credentials() -> None:
    assert credentials_from_docker_config(_config({"auth": "eDp5"}), host="ghcr.io") is None


@pytest.mark.parametrize("config", ["{}", "nope", '{"auths": {"h": {"auth": "***"}}}'])
def test_a_value_that_is_not_a_docker_config_is_refused(config: str) -> None:
    with pytest.raises(ValueError, match=r"dockerconfigjson|base64"):
        credentials_from_docker_config(config, host="h")
