"""Writes to Ichor's objects: the status through its subresource, and the metadata
(finalizers, annotations), each a JSON merge patch and, where the caller read the object
first, on condition that it did not move since.

One keyword-only function per write, as kopf's ``patching.py`` has; each raises the
typed errors of ``ichor.kube.errors`` (a failed precondition is ``errors.Conflict``, a
deleted object ``errors.NotFound``). Status is written only through ``/status`` and only
as the difference from what was read (``ichor.kube.bodies.merge_patch``), so an unchanged
status costs no write and no watch event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds
from ichor.kube import errors
from ichor.kube.bodies import MERGE_PATCH
from ichor.kube.clients import REQUEST_TIMEOUT


def _guarded(body: Mapping[str, Any], resource_version: str | None) -> dict[str, Any]:
    """``body`` with the resourceVersion precondition, when there is one."""
    guarded = dict(body)
    if resource_version:
        guarded["metadata"] = {**guarded.get("metadata", {}), "resourceVersion": resource_version}
    return guarded


async def _merge_patch(method: Any, *arguments: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The one merge-patch call of the writes here: ``method`` (a ``CustomObjectsApi``
    patch, which each write names itself, so what it may patch is read from the code) with
    ``arguments`` (group, version, [namespace,] plural, name) and ``body``."""
    result = await errors.mapped(
        method(
            *arguments,
            body,
            _content_type=MERGE_PATCH,  # missing from the stubs
            _request_timeout=REQUEST_TIMEOUT,
        )
    )
    return cast(dict[str, Any], result)


async def patch_status(
    api: ApiClient,
    *,
    kind: kinds.Kind,
    name: str,
    namespace: str | None,
    status_patch: Mapping[str, Any],
    resource_version: str | None = None,
) -> dict[str, Any]:
    """Merge-patch ``status`` of one of Ichor's objects through its status subresource
    (``namespace`` None: a cluster-scoped kind's); with ``resource_version``, only if the
    object is still at that version (else ``errors.Conflict``). Returns the object as
    written."""
    objects = client.CustomObjectsApi(api)
    body = _guarded({"status": dict(status_patch)}, resource_version)
    plural = str(kinds.PLURALS[kind])
    if namespace is None:
        return await _merge_patch(
            objects.patch_cluster_custom_object_status,
            kinds.GROUP, kinds.VERSION, plural, name,
            body=body,
        )  # fmt: skip
    return await _merge_patch(
        objects.patch_namespaced_custom_object_status,
        kinds.GROUP, kinds.VERSION, namespace, plural, name,
        body=body,
    )  # fmt: skip


async def patch_object(
    api: ApiClient,
    *,
    kind: kinds.Kind,
    name: str,
    namespace: str | None,
    patch: Mapping[str, Any],
    resource_version: str | None,
) -> dict[str, Any]:
    """Merge-patch one of Ichor's objects (its metadata or spec, never its status;
    ``namespace`` None: a cluster-scoped kind's); with ``resource_version``, only if the
    object is still at that version (else ``errors.Conflict``). Returns the object as
    written."""
    objects = client.CustomObjectsApi(api)
    if namespace is None:
        return await _merge_patch(
            objects.patch_cluster_custom_object,
            kinds.GROUP, kinds.VERSION, str(kinds.PLURALS[kind]), name,
            body=_guarded(patch, resource_version),
        )  # fmt: skip
    return await _merge_patch(
        objects.patch_namespaced_custom_object,
        kinds.GROUP, kinds.VERSION, namespace, str(kinds.PLURALS[kind]), name,
        body=_guarded(patch, resource_version),
    )  # fmt: skip


async def set_finalizer(
    api: ApiClient,
    *,
    kind: kinds.Kind,
    name: str,
    namespace: str,
    finalizers: Sequence[str],
    finalizer: str,
    present: bool,
    resource_version: str,
) -> dict[str, Any] | None:
    """Add (``present``) or remove ``finalizer`` on the object read with ``finalizers`` at
    ``resource_version``; None when it already is as asked (no write)."""
    if (finalizer in finalizers) == present:
        return None
    others = [f for f in finalizers if f != finalizer]
    return await patch_object(
        api,
        kind=kind,
        name=name,
        namespace=namespace,
        patch={"metadata": {"finalizers": [*others, finalizer] if present else others}},
        resource_version=resource_version,
    )
