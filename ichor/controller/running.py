"""What every controller's wiring does alike, written once: a controller kept in kopf's
memo, made with its part of the operator's settings, stopped with its client.

Each wiring makes its controller at kopf's startup with the operator's client and its
part of the settings, keeps it in kopf's memo under its own key, and at kopf's cleanup
stops it and closes its client. A test runs a controller with other settings by putting
its part into the memo under the wiring's ``SETTINGS`` key before the start (``part``).
Its watches of Ichor's kinds are registered alike (``watch``). What is a wiring's own
stays there: which controller, which watches, which extra step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import kopf
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds

T = TypeVar("T")

#: The memo key of the ``TenantSettings`` a test may pass in (every controller that reads
#: for a TalosCluster takes the same ones).
TENANT_SETTINGS = "ichor_tenant_settings"
#: The memo key of the TalosCluster controller's health gate: the cluster's own health
#: checks, which the executor runs between the nodes of a Talos operation (it cannot
#: import the controller above it, so the running one hands it over).
HEALTH_GATE = "ichor_health_gate"


class Running(Protocol):
    """A controller as its wiring keeps it: its client, and a stop."""

    api: ApiClient

    async def stop(self) -> None: ...


R = TypeVar("R", bound=Running)


def part(memo: kopf.Memo, key: str, default: T) -> T:
    """The settings part a test put into the memo under ``key`` (one of ``default``'s
    type), else ``default``: the operator's."""
    given = memo.get(key)
    return given if isinstance(given, type(default)) else default


async def stop(memo: kopf.Memo, key: str, kind: type[R]) -> R | None:
    """Stop the ``kind`` kept under ``key`` and close its client; it, or None when the
    memo holds none (its start never ran, or failed)."""
    found = memo.get(key)
    if not isinstance(found, kind):
        return None
    await found.stop()
    await found.api.close()
    return found


def watch(
    registry: kopf.OperatorRegistry,
    plural: kinds.Plural,
    handler: Callable[..., Awaitable[Any]],
    *,
    id: str,
) -> None:
    """Hand ``handler`` the raw watch events of ``plural`` (an Ichor kind) under ``id``: a
    low-level ``on.event`` handler, which writes nothing to the object (no finalizer, no
    progress annotation)."""
    kopf.on.event(kinds.GROUP, kinds.VERSION, plural, id=id, registry=registry)(handler)
