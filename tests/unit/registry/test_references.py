"""A reference names one repository on one registry; the scheme is https unless loopback."""

from __future__ import annotations

import pytest

from ichor.registry import Cause, InvalidReference, references


@pytest.mark.parametrize(
    ("text", "scheme", "host", "name"),
    [
        ("ghcr.io/siderolabs/installer-base", "https", "ghcr.io", "siderolabs/installer-base"),
        ("https://ghcr.io/siderolabs/kubelet", "https", "ghcr.io", "siderolabs/kubelet"),
        (
            "mirror.example.com:5000/siderolabs/kubelet",
            "https",
            "mirror.example.com:5000",
            "siderolabs/kubelet",
        ),
        ("http://127.0.0.1:5000/test/talos", "http", "127.0.0.1:5000", "test/talos"),
        ("http://localhost:5000/a", "http", "localhost:5000", "a"),
        ("http://[::1]:5000/a__b/c-d.e", "http", "[::1]:5000", "a__b/c-d.e"),
        ("127.0.0.1:5000/a", "https", "127.0.0.1:5000", "a"),
        ("GHCR.io/siderolabs/kubelet/", "https", "ghcr.io", "siderolabs/kubelet"),
    ],
)
def test_a_reference_gives_scheme_host_and_name(
    text: str, scheme: str, host: str, name: str
) -> None:
    repository = references.parse(text)
    assert (repository.scheme, repository.host, repository.name) == (scheme, host, name)
    assert repository.tags_url == f"{scheme}://{host}/v2/{name}/tags/list"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("siderolabs/installer", "registry host"),
        ("ghcr.io", "names no repository"),
        ("ghcr.io/", "names no repository"),
        ("ghcr.io/siderolabs/installer:v1.14.3", "tag or digest"),
        ("ghcr.io/siderolabs/installer@sha256:abc", "tag or digest"),
        ("ghcr.io/SideroLabs/installer", "not a repository name"),
        ("ghcr.io/a//b", "not a repository name"),
        ("http://ghcr.io/siderolabs/kubelet", "only on a loopback host"),
        ("http://10.0.0.1:5000/a", "only on a loopback host"),
        ("oci://ghcr.io/a", "only https://"),
    ],
)
def test_a_wrong_reference_is_refused_before_any_request(text: str, why: str) -> None:
    with pytest.raises(InvalidReference, match=why) as caught:
        references.parse(text)
    assert caught.value.cause is Cause.INVALID_REFERENCE
    assert str(caught.value).startswith(f"cannot list tags of {text}:")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1:1", True),
        ("127.9.9.9", True),
        ("[::1]:5", True),
        ("localhost", True),
        ("ghcr.io", False),
        ("10.0.0.1:5000", False),
        ("[2001:db8::1]:5", False),
    ],
)
def test_loopback_hosts_are_recognised(host: str, loopback: bool) -> None:
    assert references.is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("host", "internal"),
    [
        ("localhost:5000", True),
        ("10.1.2.3", True),
        ("192.168.0.1:443", True),
        ("169.254.169.254", True),
        ("[fd00:ec2::254]", True),
        ("ghcr.io", False),
        ("140.82.112.33", False),
        ("metadata.internal", False),
    ],
)
def test_internal_addresses_are_told_from_public_ones(host: str, internal: bool) -> None:
    assert references.is_internal(host) is internal
