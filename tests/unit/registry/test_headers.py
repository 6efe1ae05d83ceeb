"""The header parsers read what real registries send and nothing they do not."""

from __future__ import annotations

import email.utils

import pytest

from ichor.registry import headers


@pytest.mark.parametrize(
    ("value", "scheme", "params"),
    [
        (
            'Bearer realm="https://ghcr.io/token",service="ghcr.io",'
            'scope="repository:siderolabs/kubelet:pull"',
            "bearer",
            {
                "realm": "https://ghcr.io/token",
                "service": "ghcr.io",
                "scope": "repository:siderolabs/kubelet:pull",
            },
        ),
        (
            'Bearer realm="http://127.0.0.1:1/token", scope="repository:a/b:pull,push",'
            'error="insufficient_scope"',
            "bearer",
            {
                "realm": "http://127.0.0.1:1/token",
                "scope": "repository:a/b:pull,push",
                "error": "insufficient_scope",
            },
        ),
        ('Basic realm="Registry Realm"', "basic", {"realm": "Registry Realm"}),
        ('bearer REALM="x", Service=y', "bearer", {"realm": "x", "service": "y"}),
        ('Bearer realm="a \\"quoted\\" realm"', "bearer", {"realm": 'a "quoted" realm'}),
    ],
)
def test_a_challenge_keeps_its_parameters_whole(
    value: str, scheme: str, params: dict[str, str]
) -> None:
    (challenge,) = headers.parse_challenges(value)
    assert challenge.scheme == scheme
    assert challenge.params == params


def test_several_challenges_are_each_read() -> None:
    found = headers.parse_challenges('Basic realm="r", Bearer realm="https://t/token",service="s"')
    assert [c.scheme for c in found] == ["basic", "bearer"]
    assert found[1].realm == "https://t/token"


@pytest.mark.parametrize("value", ["", "   ", ",,"])
def test_an_empty_challenge_header_gives_no_challenge(value: str) -> None:
    assert headers.parse_challenges(value) == []


@pytest.mark.parametrize(
    ("value", "target"),
    [
        (
            '</v2/a/b/tags/list?last=v1.0.9&n=100>; rel="next"',
            "/v2/a/b/tags/list?last=v1.0.9&n=100",
        ),
        (
            "<https://r.example/v2/x/tags/list?last=z>; rel=next",
            "https://r.example/v2/x/tags/list?last=z",
        ),
        ('<https://r/a>; rel="prev", <https://r/b>; rel="next"', "https://r/b"),
        ('<https://r/b>; title="x"; rel="last next"', "https://r/b"),
    ],
)
def test_the_next_link_is_found_as_given(value: str, target: str) -> None:
    assert headers.next_link(value) == target


@pytest.mark.parametrize("value", ['<https://r/a>; rel="prev"', "garbage", "<https://r/a>"])
def test_a_link_without_next_gives_none(value: str) -> None:
    assert headers.next_link(value) is None


NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        (" 0 ", 0.0),
        (email.utils.formatdate(NOW + 7, usegmt=True), 7.0),
        (email.utils.formatdate(NOW - 60, usegmt=True), 0.0),
        (None, None),
        ("soon", None),
        ("-1", None),
        ("1.5", None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(value: str | None, seconds: float | None) -> None:
    assert headers.retry_after(value, now=NOW) == seconds
