"""The named steps of ``references.parse``: the scheme, then the repository name."""

from __future__ import annotations

import pytest

from ichor.registry import references
from ichor.registry.errors import InvalidReference


def test_scheme() -> None:
    assert references._scheme("r", "ghcr.io/a") == ("https", "ghcr.io/a")
    assert references._scheme("r", "HTTPS://ghcr.io/a") == ("https", "ghcr.io/a")
    assert references._scheme("r", "Http://127.0.0.1:5000/a") == ("http", "127.0.0.1:5000/a")
    with pytest.raises(InvalidReference, match="not a repository"):
        references._scheme("r", "oci://ghcr.io/a")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("siderolabs/installer:v1.14.3", "holds a tag or digest"),
        ("siderolabs/installer@sha256:00", "holds a tag or digest"),
        ("Siderolabs/installer", "is not a repository name"),
        ("a//b", "is not a repository name"),
        ("a" * (references.MAX_NAME_LENGTH + 1), "is not a repository name"),
    ],
)
def test_check_name_refuses(name: str, why: str) -> None:
    with pytest.raises(InvalidReference, match=why):
        references._check_name("r", name)


def test_check_name_accepts() -> None:
    references._check_name("r", "siderolabs/installer-base")
    references._check_name("r", "a.b/c_d/e-f")
