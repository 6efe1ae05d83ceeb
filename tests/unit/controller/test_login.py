"""kopf logs in from the service account at the address the kubelet gives, not by DNS.

kopf's own service-account login names ``https://kubernetes.default.svc``, which only the
cluster's DNS resolves; the operator's API clients use ``KUBERNETES_SERVICE_HOST``/``_PORT``
(as client-go does), and kopf must reach the same server the same way.
"""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from ichor.controller.taloscluster import wiring as cluster_wiring
from ichor.settings import KubeSettings, in_cluster_server

ACCOUNT = kopf.ConnectionInfo(
    server="https://kubernetes.default.svc", token="t0ken", ca_path="/ca.crt", scheme="Bearer"
)


@pytest.mark.parametrize(
    ("host", "port", "server"),
    [
        ("10.96.0.1", "443", "https://10.96.0.1:443"),
        ("127.0.0.1", "36443", "https://127.0.0.1:36443"),
        ("fd00:10:96::1", "443", "https://[fd00:10:96::1]:443"),
    ],
)
def test_the_kubelets_address_is_the_server(host: str, port: str, server: str) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    assert in_cluster_server(environ) == server


@pytest.mark.parametrize(
    "environ",
    [{}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT": "443"}],
    ids=["none", "no-port", "no-host"],
)
def test_without_both_there_is_no_address(environ: dict[str, str]) -> None:
    assert in_cluster_server(environ) is None


def test_the_service_account_login_goes_to_that_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "login_with_service_account", lambda **_: ACCOUNT)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    info = cluster_wiring.login(kube=KubeSettings.from_env())
    assert info is not None
    assert info.server == "https://10.96.0.1:443"
    assert (info.token, info.ca_path, info.scheme) == ("t0ken", "/ca.crt", "Bearer")


def test_outside_a_pod_the_kubeconfig_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    fallback = kopf.ConnectionInfo(server="https://127.0.0.1:6443")
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(kopf, "login_with_service_account", lambda **_: None)

    def kubeconfig(**kwargs: Any) -> kopf.ConnectionInfo:
        calls.append(kwargs)
        return fallback

    monkeypatch.setattr(kopf, "login_with_kubeconfig", kubeconfig)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert cluster_wiring.login(kube=KubeSettings.from_env(), logger=None) is fallback
    assert calls == [{"logger": None}]


def test_a_service_account_without_the_address_keeps_kopfs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf, "login_with_service_account", lambda **_: ACCOUNT)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert cluster_wiring.login(kube=KubeSettings.from_env()) is ACCOUNT
