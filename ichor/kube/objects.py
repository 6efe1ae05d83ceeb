"""Reads, lists and creates of Ichor's objects: one keyword-only function per verb.

A missing object is None for ``get``; the patches are ``ichor.kube.patching``'s. Every
call raises the typed errors of ``ichor.kube.errors`` for any other answer, and takes
``request_timeout`` (the webhook's calls are shorter than the controllers').
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.kube import errors
from ichor.kube.clients import REQUEST_TIMEOUT


async def get(
    api: ApiClient,
    *,
    kind: kinds.Kind,
    name: str,
    namespace: str | None,
    request_timeout: float = REQUEST_TIMEOUT,
) -> dict[str, Any] | None:
    """The object (``namespace`` None: a cluster-scoped kind), or None when it does not
    exist."""
    objects = client.CustomObjectsApi(api)
    plural = kinds.PLURALS[kind]
    try:
        if namespace is None:
            body = await objects.get_cluster_custom_object(
                kinds.GROUP, kinds.VERSION, plural, name, _request_timeout=request_timeout
            )
        else:
            body = await objects.get_namespaced_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                namespace,
                plural,
                name,
                _request_timeout=request_timeout,
            )
    except ApiException as error:
        if error.status == 404:
            return None
        raise errors.typed(error) from error
    return cast(dict[str, Any], body)


async def get_installation(api: ApiClient) -> dict[str, Any] | None:
    """The IchorInstallation, the cluster's one (``kinds.INSTALLATION_NAME``), or None."""
    return await get(
        api, kind=kinds.Kind.ICHOR_INSTALLATION, name=kinds.INSTALLATION_NAME, namespace=None
    )


async def create(
    api: ApiClient,
    *,
    kind: kinds.Kind,
    namespace: str,
    body: Mapping[str, Any],
    request_timeout: float = REQUEST_TIMEOUT,
) -> dict[str, Any]:
    """Create a namespaced object of Ichor's; returns it as stored. An object of that name
    is ``errors.Conflict``; any other refusal an ``errors.ApiError`` with ``refused`` set
    (its status and the API server's message: a webhook's denial is its sentence)."""
    objects = client.CustomObjectsApi(api)
    created = await errors.mapped(
        objects.create_namespaced_custom_object(
            kinds.GROUP,
            kinds.VERSION,
            namespace,
            kinds.PLURALS[kind],
            dict(body),
            _request_timeout=request_timeout,
        )
    )
    return cast(dict[str, Any], created)


async def list_all(
    api: ApiClient,
    *,
    kind: kinds.Kind,
    namespace: str | None,
    label_selector: str = "",
    request_timeout: float = REQUEST_TIMEOUT,
) -> list[dict[str, Any]]:
    """Every object of ``kind`` in ``namespace`` (None: in all namespaces) that
    ``label_selector`` selects (empty: all), in one request (Ichor's kinds are few per
    namespace; nothing pages them). An item that is not an object is left out."""
    objects = client.CustomObjectsApi(api)
    plural = kinds.PLURALS[kind]
    if namespace is None:
        listed = await errors.mapped(
            objects.list_cluster_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                plural,
                label_selector=label_selector,
                _request_timeout=request_timeout,
            )
        )
    else:
        listed = await errors.mapped(
            objects.list_namespaced_custom_object(
                kinds.GROUP,
                kinds.VERSION,
                namespace,
                plural,
                label_selector=label_selector,
                _request_timeout=request_timeout,
            )
        )
    items = listed.get("items") if isinstance(listed, Mapping) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
