"""Reads of Ichor's objects: one keyword-only function, a missing object is None.

The writes are ``ichor.kube.patching``'s; both raise the typed errors of
``ichor.kube.errors`` for any other answer.
"""

from __future__ import annotations

from typing import Any, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.kube import errors
from ichor.kube.clients import REQUEST_TIMEOUT


async def get(
    api: ApiClient, *, kind: kinds.Kind, name: str, namespace: str | None
) -> dict[str, Any] | None:
    """The object (``namespace`` None: a cluster-scoped kind), or None when it does not
    exist."""
    objects = client.CustomObjectsApi(api)
    plural = kinds.PLURALS[kind]
    try:
        if namespace is None:
            body = await objects.get_cluster_custom_object(
                kinds.GROUP, kinds.VERSION, plural, name, _request_timeout=REQUEST_TIMEOUT
            )
        else:
            body = await objects.get_namespaced_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                namespace,
                plural,
                name,
                _request_timeout=REQUEST_TIMEOUT,
            )
    except ApiException as error:
        if error.status == 404:
            return None
        raise errors.typed(error) from error
    return cast(dict[str, Any], body)
