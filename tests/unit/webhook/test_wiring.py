"""The webhook's wiring keeps its API backend in kopf's memo, as the controllers keep theirs."""

from __future__ import annotations

import logging
from typing import Any

import kopf
import pytest

from ichor.settings import KubeSettings
from ichor.webhook import handlers, kubeapi, wiring
from tests.unit.webhook.fakes import FakeBackend


def _start(registry: kopf.OperatorRegistry) -> Any:
    (start,) = [
        h.fn for h in registry._activities.get_all_handlers() if str(h.id) == "webhook-start"
    ]  # no public listing in kopf
    return start


async def test_the_start_keeps_a_backend_it_finds_in_the_memo() -> None:
    registry = kopf.OperatorRegistry()
    wiring.register_handlers(registry, kube=KubeSettings.from_env())
    fake = FakeBackend(operator="op")
    memo = kopf.Memo({handlers.BACKEND: fake})
    await _start(registry)(memo=memo, logger=logging.getLogger("test"))
    assert handlers.backend_of(memo) is fake


async def test_the_start_puts_the_operators_backend_into_an_empty_memo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = kopf.OperatorRegistry()
    wiring.register_handlers(registry, kube=KubeSettings.from_env())
    memo = kopf.Memo()

    async def unknown(self: kubeapi.KubeBackend) -> None:
        raise kubeapi.ApiUnavailable("no API server in a unit test")

    monkeypatch.setattr(kubeapi.KubeBackend, "own_identity", unknown)
    await _start(registry)(memo=memo, logger=logging.getLogger("test"))
    assert isinstance(handlers.backend_of(memo), kubeapi.KubeBackend)
