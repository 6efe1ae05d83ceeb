"""API clients: the operator's own cluster, and a workload cluster from a kubeconfig Secret.

A TalosCluster names its workload cluster by a Secret holding a kubeconfig; without one,
the workload cluster is the cluster the operator runs in. This module turns either into a
``kubernetes_asyncio`` ApiClient and says plainly why it cannot (``KubeconfigError``). It
does not cache or retry: callers decide how often to read a Secret again.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.api_client import ApiClient

from ichor.kube import errors
from ichor.settings import KubeSettings

#: Seconds any single call to an API server may take before it counts as unreachable.
REQUEST_TIMEOUT = 10.0
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class KubeconfigError(Exception):
    """A kubeconfig Secret is missing, lacks its key, or holds no usable kubeconfig."""


async def operator_client(*, kube: KubeSettings) -> ApiClient:
    """A client of the cluster the operator runs in: in-cluster credentials inside a Pod,
    else the kubeconfig ``kube`` names (or ``~/.kube/config``)."""
    configuration = client.Configuration()
    if kube.in_pod:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        # Name the file now: the client's default is fixed when it is imported.
        await config.load_kube_config(
            config_file=kube.kubeconfig, client_configuration=configuration
        )
    return ApiClient(configuration=configuration)


async def client_from_kubeconfig(
    kubeconfig: bytes | str, *, origin: str, idle_seconds: float | None = None
) -> ApiClient:
    """A client built from the text of a kubeconfig; ``origin`` names it in errors.
    ``idle_seconds``: how long an idle connection is kept (None: aiohttp's 15 s)."""
    try:
        # libyaml's safe loader when PyYAML has it: the same documents, parsed in C (a
        # kubeconfig with embedded certificates took a few ms in Python, per cluster)
        loaded: Any = yaml.load(kubeconfig, Loader=SAFE_LOADER)
    except yaml.YAMLError as error:
        raise KubeconfigError(f"{origin} is not YAML: {error}") from error
    if not isinstance(loaded, dict) or not loaded.get("clusters"):
        raise KubeconfigError(f"{origin} is not a kubeconfig (it names no cluster)")
    configuration = client.Configuration()
    try:
        await config.load_kube_config_from_dict(loaded, client_configuration=configuration)
    except (config.ConfigException, KeyError, TypeError, ValueError) as error:
        raise KubeconfigError(f"{origin} is not a usable kubeconfig: {error}") from error
    api = ApiClient(configuration=configuration)
    if idle_seconds is not None:
        keep_idle_connections(api, seconds=idle_seconds)
    return api


def keep_idle_connections(api: ApiClient, *, seconds: float) -> None:
    """Close the connections of ``api`` once idle for ``seconds``.

    kubernetes_asyncio builds its aiohttp connector itself and takes no keep-alive, so it
    is set on the connector it built; an aiohttp without that attribute is refused here
    rather than silently keeping every connection.
    """
    connector = api.rest_client.pool_manager.connector
    if not isinstance(connector, aiohttp.TCPConnector) or not hasattr(
        connector, "_keepalive_timeout"
    ):
        raise TypeError(f"cannot set the keep-alive of {type(connector).__name__}")
    connector._keepalive_timeout = seconds


async def read_within(stream: aiohttp.StreamReader, *, limit: int) -> bytes | None:
    """The whole body of ``stream``, or None once it grows past ``limit`` (the rest is left
    unread): for a body another party sends, a workload's answer or a review posted to the
    webhook, whose declared length may be absent or untrue."""
    body = bytearray()
    while chunk := await stream.readany():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


@dataclass(frozen=True)
class SecretValue:
    value: bytes
    #: Lets a caller keep what it built from the value until the Secret changes.
    resource_version: str


async def read_secret_key(api: ApiClient, *, namespace: str, name: str, key: str) -> SecretValue:
    """The decoded value of ``key`` in Secret ``namespace/name``.

    Read as JSON, not into the client's V1Secret model: every observation of every cluster
    reads its Secret, and building the model cost more than the request.
    """
    where = f"Secret {namespace}/{name}"
    response: Any = await client.CoreV1Api(api).read_namespaced_secret(
        name, namespace, _request_timeout=REQUEST_TIMEOUT, _preload_content=False
    )
    try:
        raw = await response.read()
    finally:
        response.release()
    if response.status == 404:
        raise KubeconfigError(f"{where} does not exist")
    if response.status == 403:
        raise KubeconfigError(f"{where} may not be read by the operator")
    if not 200 <= response.status <= 299:
        raise errors.answered(response.status, response.reason, raw)
    try:
        secret: Any = json.loads(raw)
    except ValueError as error:
        raise KubeconfigError(f"{where} was answered with something other than JSON") from error
    data: Any = secret.get("data") if isinstance(secret, dict) else None
    data = data if isinstance(data, dict) else {}
    if key not in data:
        raise KubeconfigError(f"{where} has no key {key!r}")
    try:
        value = base64.b64decode(str(data[key]), validate=True)
    except (binascii.Error, ValueError) as error:
        raise KubeconfigError(f"key {key!r} of {where} is not base64") from error
    metadata = secret.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return SecretValue(value=value, resource_version=str(version or ""))
