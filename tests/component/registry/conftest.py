"""Seeded repositories and the fault proxy shared by the registry component tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness import faultproxy
from tests.harness import registry as test_registry

INSTALLER = "test/installer-base"
PRIVATE = "private/mirror/kubelet"


def release_tags() -> list[str]:
    """2,500 tags like ghcr.io's: v-prefixed finals, the same without v, pre-releases."""
    finals = [f"1.{minor}.{patch}" for minor in range(20) for patch in range(50)]
    pre = [
        f"v1.{minor}.0-{kind}.{n}"
        for minor in range(20)
        for kind in ("alpha", "beta")
        for n in range(12)
    ]
    pre += [f"v2.0.0-rc.{n}" for n in range(20)]
    tags = [f"v{tag}" for tag in finals] + finals + pre
    assert len(tags) == 2500
    return tags


@pytest.fixture(scope="session")
def installer(registry: test_registry.LocalRegistry) -> tuple[str, list[str]]:
    """``test/installer-base`` seeded with the 2,500 release tags (once per session)."""
    tags = release_tags()
    registry.seed(INSTALLER, tags)
    return INSTALLER, tags


@pytest.fixture(scope="session")
def private_repository(registry: test_registry.LocalRegistry) -> tuple[str, list[str]]:
    """A repository the token server grants only to the seeding credentials."""
    tags = ["v1.37.2", "v1.36.6", "1.36.6"]
    registry.seed(PRIVATE, tags)
    return PRIVATE, tags


@pytest.fixture(scope="session")
def fault_proxy_session(registry: test_registry.LocalRegistry) -> Iterator[faultproxy.FaultProxy]:
    with faultproxy.FaultProxy(upstream=registry.url) as proxy:
        yield proxy


@pytest.fixture
def fault_proxy(
    fault_proxy_session: faultproxy.FaultProxy,
) -> Iterator[faultproxy.FaultProxy]:
    """The proxy in front of the registry, with no fault until the test sets some."""
    fault_proxy_session.set_faults()
    yield fault_proxy_session
    fault_proxy_session.set_faults()
