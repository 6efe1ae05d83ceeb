"""The operator's identity, asked of the real API server with a SelfSubjectReview.

The webhook lets only this identity write the status of Ichor's kinds, so it must be the
username the API server puts in the reviews of the operator's own requests: asked with
the operator's credentials (here the chart's ServiceAccount as a client certificate),
allowed with no binding of ours (``system:basic-user``), and never a value a setting
could get wrong.
"""

from __future__ import annotations

import uuid

import pytest

from ichor.kube import clients, identity
from ichor.webhook import kubeapi
from tests.harness import controlplane

pytestmark = pytest.mark.component


async def test_a_service_account_learns_the_username_its_requests_carry(
    control_plane: controlplane.ControlPlane,
) -> None:
    namespace = f"ichor-system-{uuid.uuid4().hex[:6]}"
    account = f"system:serviceaccount:{namespace}:ichor"
    kubeconfig = control_plane.user_kubeconfig(
        account, groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    )
    api = await clients.client_from_kubeconfig(kubeconfig.read_bytes(), origin="the test")
    try:
        found = await identity.who_am_i(api)
    finally:
        await api.close()
    assert found.username == account
    assert f"system:serviceaccounts:{namespace}" in found.groups
    assert "system:authenticated" in found.groups


async def test_the_webhook_backend_asks_once_with_its_own_credentials(
    control_plane: controlplane.ControlPlane,
) -> None:
    """No role of ours is bound to this user: the default binding lets it ask."""
    user = f"nobody-{uuid.uuid4().hex[:6]}"
    backend = kubeapi.KubeBackend(kubeconfig=control_plane.user_kubeconfig(user))
    try:
        first = await backend.own_identity()
        again = await backend.own_identity()
    finally:
        await backend.close()
    assert first.username == user
    assert again is first


async def test_an_unreachable_api_server_is_no_identity(
    control_plane: controlplane.ControlPlane,
) -> None:
    closed = controlplane.free_port()
    text = control_plane.user_kubeconfig("someone").read_text()
    text = text.replace(control_plane.server, f"https://127.0.0.1:{closed}")
    api = await clients.client_from_kubeconfig(text, origin="the test")
    try:
        with pytest.raises(identity.IdentityUnknown, match="SelfSubjectReview failed"):
            await identity.who_am_i(api)
    finally:
        await api.close()
