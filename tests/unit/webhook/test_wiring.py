"""The webhook's wiring keeps its API backend in kopf's memo, as the controllers keep theirs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import kopf
import pytest

from ichor.settings import KubeSettings, Settings
from ichor.webhook import handlers, intake, kubeapi, server, wiring
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


def test_each_path_has_one_handler_of_its_half_kind_operations_and_subresource() -> None:
    """The registrations ``intake.CLAIMS`` drives, written out: a path registered twice,
    in the wrong half, or for another kind, operation or subresource fails here."""
    registry = kopf.OperatorRegistry()
    wiring.register_handlers(registry, kube=KubeSettings.from_env())
    found = sorted(
        (
            str(h.id),
            str(h.reason),
            h.selector.any_name if h.selector is not None else None,
            tuple(h.operations or ()),
            h.subresource,
        )
        for h in registry._webhooks.get_all_handlers()  # no public listing in kopf
    )
    both, update = ("CREATE", "UPDATE"), ("UPDATE",)
    assert found == [
        ("ichorinstallation", "validating", "ichorinstallations", update, None),
        ("ichorinstallation-records", "mutating", "ichorinstallations", update, None),
        ("ichorinstallation-status", "validating", "ichorinstallations", update, "status"),
        ("taloscluster", "validating", "talosclusters", both, None),
        ("taloscluster-records", "mutating", "talosclusters", both, None),
        ("taloscluster-status", "validating", "talosclusters", update, "status"),
        ("talosoperation", "validating", "talosoperations", both, None),
        ("talosoperation-records", "mutating", "talosoperations", both, None),
        ("talosoperation-status", "validating", "talosoperations", update, "status"),
    ]


def test_each_path_is_served_by_its_own_handler() -> None:
    registry = kopf.OperatorRegistry()
    wiring.register_handlers(registry, kube=KubeSettings.from_env())
    served = {str(h.id): h.fn for h in registry._webhooks.get_all_handlers()}
    assert served[intake.CLUSTER_HANDLER] is handlers.validate_taloscluster
    assert served[intake.OPERATION_HANDLER] is handlers.validate_talosoperation
    assert served[intake.INSTALLATION_HANDLER] is handlers.validate_ichorinstallation
    assert served[intake.CLUSTER_STAMP] is handlers.stamp_taloscluster
    assert served[intake.OPERATION_STAMP] is handlers.stamp_talosoperation
    assert served[intake.INSTALLATION_STAMP] is handlers.stamp_ichorinstallation


async def test_the_operators_start_points_kopf_at_the_endpoint_its_settings_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ICHOR_WEBHOOK_CERT", str(tmp_path / "tls.crt"))
    monkeypatch.setenv("ICHOR_WEBHOOK_KEY", str(tmp_path / "tls.key"))
    monkeypatch.setenv("ICHOR_WEBHOOK_CLIENT_CA", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("ICHOR_WEBHOOK_CLIENT_NAMES", "kube-apiserver")
    monkeypatch.setenv("ICHOR_WEBHOOK_PORT", "19443")
    monkeypatch.setenv("ICHOR_WEBHOOK_ADDR", "0.0.0.0")
    registry = kopf.OperatorRegistry()
    wiring.register(registry, settings=Settings.from_env())
    found: list[Any] = [
        h.fn for h in registry._activities.get_all_handlers() if str(h.id) == "webhook-configure"
    ]
    (configure,) = found
    settings = kopf.OperatorSettings()
    await configure(settings=settings)
    endpoint = settings.admission.server
    assert isinstance(endpoint, server.AdmissionServer)
    assert (endpoint.port, endpoint.addr, endpoint.host) == (19443, "0.0.0.0", "127.0.0.1")
    assert (endpoint.certfile, endpoint.pkeyfile) == (tmp_path / "tls.crt", tmp_path / "tls.key")
    assert endpoint.client_ca == tmp_path / "ca.crt"
    assert endpoint.client_names == frozenset({"kube-apiserver"})
    assert settings.admission.managed is None
