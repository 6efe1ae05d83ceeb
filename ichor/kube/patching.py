"""Status writes through the status subresource.

Status is written only through ``/status`` and only as the difference from what was read
(``ichor.kube.bodies.merge_patch``), so an unchanged status costs no write and no watch
event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from ichor.api import kinds
from ichor.kube.bodies import MERGE_PATCH
from ichor.kube.clients import REQUEST_TIMEOUT


async def patch_status(
    api: ApiClient,
    *,
    kind: kinds.Kind,
    name: str,
    namespace: str | None,
    status_patch: Mapping[str, Any],
) -> dict[str, Any]:
    """Merge-patch ``status`` of one of Ichor's objects through its status subresource."""
    objects = client.CustomObjectsApi(api)
    body = {"status": dict(status_patch)}
    plural = str(kinds.PLURALS[kind])
    if namespace is None:
        result: dict[str, Any] = await objects.patch_cluster_custom_object_status(
            kinds.GROUP,
            kinds.VERSION,
            plural,
            name,
            body,
            _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # missing from the stubs
            _request_timeout=REQUEST_TIMEOUT,
        )
    else:
        result = await objects.patch_namespaced_custom_object_status(
            kinds.GROUP,
            kinds.VERSION,
            namespace,
            plural,
            name,
            body,
            _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # missing from the stubs
            _request_timeout=REQUEST_TIMEOUT,
        )
    return result
