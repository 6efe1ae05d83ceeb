"""``read_secret_key`` and ``events.emit`` read the API server's answer as JSON, not into
the client's models, so they check its status themselves: every answer a real API server
gives is the error it was before (or the value)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from ichor.kube import bodies, clients, events
from tests.harness import controlplane

pytestmark = pytest.mark.component


async def _namespace(api: Any) -> str:
    name = f"secret-read-{uuid.uuid4().hex[:6]}"
    core: Any = client.CoreV1Api(api)
    await core.create_namespace({"metadata": {"name": name}})
    return name


def _secret(name: str, namespace: str) -> Any:
    return {"apiVersion": "v1", "kind": "Secret", "name": name, "namespace": namespace}


async def test_every_answer_is_the_value_or_a_clear_error(
    kube_api: Any, control_plane: controlplane.ControlPlane
) -> None:
    namespace = await _namespace(kube_api)
    text = b"apiVersion: v1\nkind: Config\n" + bytes(range(256))
    data = {"kubeconfig": base64.b64encode(text).decode()}
    core: Any = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_secret(
        namespace, {"metadata": {"name": "good"}, "data": data}
    )
    value = await clients.read_secret_key(
        kube_api, namespace=namespace, name="good", key="kubeconfig"
    )
    assert value.value == text
    assert value.resource_version == created.metadata.resource_version

    with pytest.raises(
        clients.KubeconfigError, match=rf"Secret {namespace}/good has no key 'other'"
    ):
        await clients.read_secret_key(kube_api, namespace=namespace, name="good", key="other")
    await core.create_namespaced_secret(namespace, {"metadata": {"name": "empty"}})
    with pytest.raises(clients.KubeconfigError, match="has no key 'kubeconfig'"):
        await clients.read_secret_key(kube_api, namespace=namespace, name="empty", key="kubeconfig")
    with pytest.raises(clients.KubeconfigError, match=rf"Secret {namespace}/gone does not exist"):
        await clients.read_secret_key(kube_api, namespace=namespace, name="gone", key="kubeconfig")

    stranger = control_plane.user_kubeconfig(f"stranger-{uuid.uuid4().hex[:6]}")
    api = await clients.client_from_kubeconfig(stranger.read_bytes(), origin="the test")
    try:
        with pytest.raises(clients.KubeconfigError, match="may not be read by the operator"):
            await clients.read_secret_key(api, namespace=namespace, name="good", key="kubeconfig")
        # an Event the stranger may not post is the API's error, with its status and text
        involved: Any = {
            "apiVersion": "v1",
            "kind": "Secret",
            "name": "good",
            "namespace": namespace,
        }
        with pytest.raises(ApiException) as refused:
            await events.emit(
                api, involved, type_=bodies.EventType.NORMAL, reason="Test", message="m"
            )
        assert refused.value.status == 403
        assert "forbidden" in str(refused.value.body)
    finally:
        await api.close()

    # a namespace that does not exist: the Event's 404 is raised, not swallowed
    involved = _secret("x", "no-such-ns")
    with pytest.raises(ApiException) as missing:
        await events.emit(
            kube_api, involved, type_=bodies.EventType.NORMAL, reason="T", message="m"
        )
    assert missing.value.status == 404
    # and one the admin may post is posted
    involved = _secret("good", namespace)
    await events.emit(
        kube_api, involved, type_=bodies.EventType.WARNING, reason="Seen", message="m"
    )
    listed = await core.list_namespaced_event(namespace)
    assert [(e.reason, e.type) for e in listed.items] == [("Seen", "Warning")]
