"""JSON merge patches (RFC 7386) and status writes through the status subresource.

Status is written only through ``/status`` and only as the difference from what was read,
so an unchanged status costs no write and no watch event. A merge patch cannot say
"remove this list element", so lists are replaced whole, which is what conditions need.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from ichor.api import kinds
from ichor.kube.clients import REQUEST_TIMEOUT

MERGE_PATCH = "application/merge-patch+json"


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``old`` into ``new`` (keys of ``old`` absent from
    ``new`` become ``None``); empty when they are equal."""
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            inner = merge_patch(before, value)
            if inner:
                patch[key] = inner
        elif key not in old or before != value:
            patch[key] = value
    return patch


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
