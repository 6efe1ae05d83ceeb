"""The operations' Jobs (the ``batch/v1`` API) and their Pods: one keyword-only function
per verb, each raising the typed errors of ``ichor.kube.errors``.

A missing Job is None for ``get_job`` (as ``objects.get``); an existing one is
``errors.Conflict`` for ``create_job``, a gone one ``errors.NotFound`` for ``delete_job``.
Everything is returned as plain JSON (dicts), never the client's models: the pure
decisions (``ichor.controller.talosoperation.lifecycle``) read the Job as it is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.kube import errors
from ichor.kube.clients import REQUEST_TIMEOUT


def _raw(api: ApiClient, model: Any) -> dict[str, Any]:
    return cast(dict[str, Any], api.sanitize_for_serialization(model))


async def create_job(api: ApiClient, *, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Create the Job ``body``; returns it as stored (``errors.Conflict``: a Job of that
    name exists)."""
    created = await errors.mapped(
        client.BatchV1Api(api).create_namespaced_job(
            namespace, cast(Any, body), _request_timeout=REQUEST_TIMEOUT
        )
    )
    return _raw(api, created)


async def get_job(api: ApiClient, *, namespace: str, name: str) -> dict[str, Any] | None:
    """The Job, or None when it does not exist."""
    try:
        job = await client.BatchV1Api(api).read_namespaced_job(
            name, namespace, _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise errors.typed(error) from error
    return _raw(api, job)


async def delete_job(api: ApiClient, *, namespace: str, name: str) -> None:
    """Delete the Job and, in the background, its Pods (``errors.NotFound``: it is gone)."""
    await errors.mapped(
        client.BatchV1Api(api).delete_namespaced_job(
            name, namespace, propagation_policy="Background", _request_timeout=REQUEST_TIMEOUT
        )
    )


async def job_pods(api: ApiClient, *, namespace: str, job: str) -> list[dict[str, Any]]:
    """The Pods the Job ``job`` made (by the ``job-name`` label Kubernetes sets)."""
    listed = await errors.mapped(
        client.CoreV1Api(api).list_namespaced_pod(
            namespace, label_selector=f"job-name={job}", _request_timeout=REQUEST_TIMEOUT
        )
    )
    return list(_raw(api, listed).get("items") or [])


async def pod_log(
    api: ApiClient, *, namespace: str, pod: str, container: str, limit_bytes: int
) -> str:
    """The log of one container of a Pod, at most ``limit_bytes`` of it (its start): a
    Job's output, read back as the bytes the kubelet kept. Read raw: the client would
    otherwise parse a log that happens to be one JSON document and hand back its repr."""
    response: Any = await errors.mapped(
        client.CoreV1Api(api).read_namespaced_pod_log_without_preload_content(
            pod,
            namespace,
            container=container,
            limit_bytes=limit_bytes,
            _request_timeout=REQUEST_TIMEOUT,
        )
    )
    try:
        if not 200 <= response.status <= 299:
            # raw, the client checks no status: the same typed error as every other call
            raise errors.typed(ApiException(status=response.status, reason=response.reason))
        data = await read_up_to(response.content, limit_bytes)
    finally:
        response.release()
    return data.decode("utf-8", errors="replace")


async def read_up_to(stream: Any, limit: int) -> bytes:
    """The first ``limit`` bytes of ``stream`` (an aiohttp StreamReader), or all of it when
    shorter: one ``read(n)`` returns only what has arrived, often one chunk of the log."""
    body = bytearray()
    while len(body) < limit:
        chunk = await stream.read(limit - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)
