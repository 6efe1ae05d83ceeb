"""API clients: the operator's own cluster, and a workload cluster from a kubeconfig Secret.

A TalosCluster names its workload cluster by a Secret holding a kubeconfig; without one,
the workload cluster is the cluster the operator runs in. This module turns either into a
``kubernetes.aio`` ApiClient and says plainly why it cannot (``KubeconfigError``). A
Secret's kubeconfig is never handed to the client library's loader: it is read by
``ichor.kube.credentials`` (inline credentials only) and the client is configured from
what that returns, so no other field of it can do anything (and, on Linux, its keys
never touch a disk). It does not cache or retry: callers decide how often to read a
Secret again.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes.aio import client, config
from kubernetes.aio.client.api_client import ApiClient

from ichor.kube import credentials, errors
from ichor.settings import CredentialSettings, KubeSettings

#: Seconds any single call to an API server may take before it counts as unreachable.
REQUEST_TIMEOUT = 10.0


class KubeconfigError(Exception):
    """A kubeconfig Secret is missing, lacks its key, or holds no usable kubeconfig."""


async def operator_client(*, kube: KubeSettings) -> ApiClient:
    """A client of the cluster the operator runs in: in-cluster credentials inside a Pod,
    else the kubeconfig ``kube`` names (or ``~/.kube/config``)."""
    configuration = client.Configuration()
    if kube.in_pod:
        config.load_incluster_config(client_configuration=configuration)
    else:
        # Name the file now: the client's default is fixed when it is imported.
        await config.load_kube_config(
            config_file=kube.kubeconfig, client_configuration=configuration
        )
    return ApiClient(configuration=configuration)


async def own_client(kubeconfig: Path) -> ApiClient:
    """A client of the operator's own kubeconfig file (its own credentials, as whoever
    runs the operator wrote them: a test, a person): read by the client library whole."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return ApiClient(configuration=configuration)


async def client_from_kubeconfig(
    kubeconfig: bytes | str,
    *,
    origin: str,
    idle_seconds: float | None = None,
    policy: CredentialSettings | None = None,
) -> ApiClient:
    """A client built from the text of a kubeconfig a user stored; ``origin`` names it in
    errors (``the kubeconfig in key 'kubeconfig' of Secret team-a/prod``). ``policy``: the
    operator's settings for what a Secret may set (None: neither proxy nor insecure TLS).
    ``idle_seconds``: how long an idle connection is kept (None: aiohttp's 15 s)."""
    try:
        found = credentials.read_kubeconfig(kubeconfig, what=origin, policy=policy)
    except credentials.Refused as error:
        raise KubeconfigError(str(error)) from None
    api = workload_client(found, origin=origin)
    if idle_seconds is not None:
        keep_idle_connections(api, seconds=idle_seconds)
    return api


def workload_client(found: credentials.Kubeconfig, *, origin: str) -> ApiClient:
    """A client configured from a kubeconfig's checked fields and nothing else.

    The client library loads certificates from files only, and reads them once, when the
    client is made: they are handed to it as files in memory (``_key_files``), closed
    once it has loaded them.
    """
    configuration = client.Configuration()
    configuration.host = found.server.rstrip("/")
    if found.token is not None:
        configuration.api_key["BearerToken"] = f"Bearer {found.token}"
    configuration.verify_ssl = not found.insecure
    configuration.tls_server_name = found.tls_server_name
    configuration.proxy = found.proxy_url
    with _key_files() as write:
        if found.ca_pem is not None:
            configuration.ssl_ca_cert = write("ca.crt", found.ca_pem)
        if found.client_cert_pem is not None and found.client_key_pem is not None:
            configuration.cert_file = write("client.crt", found.client_cert_pem)
            configuration.key_file = write("client.key", found.client_key_pem)
        try:
            api = ApiClient(configuration=configuration)
        except (ssl.SSLError, ValueError):
            _check_loadable(configuration, origin=origin)
            raise KubeconfigError(
                f"{origin} is refused: its certificates cannot be loaded"
            ) from None
    configuration.ssl_ca_cert = configuration.cert_file = configuration.key_file = None
    return api


@contextlib.contextmanager
def _key_files() -> Iterator[Callable[[str, bytes], str]]:
    """``write(name, content)`` gives a path OpenSSL reads ``content`` from, valid inside
    the block: an anonymous file in memory where the kernel has them (Linux's
    memfd_create: never on a disk, gone when closed), else a file in a private temporary
    folder, removed with it."""
    if hasattr(os, "memfd_create"):
        opened: list[int] = []

        def in_memory(name: str, content: bytes) -> str:
            descriptor = os.memfd_create(name, os.MFD_CLOEXEC)
            opened.append(descriptor)
            os.write(descriptor, content)
            return f"/proc/self/fd/{descriptor}"

        try:
            yield in_memory
        finally:
            for descriptor in opened:
                os.close(descriptor)
        return
    with tempfile.TemporaryDirectory(prefix="ichor-credentials-") as folder:

        def on_disk(name: str, content: bytes) -> str:
            path = Path(folder) / name
            path.touch(mode=0o600)
            path.write_bytes(content)
            return str(path)

        yield on_disk


def _check_loadable(configuration: client.Configuration, *, origin: str) -> None:
    """Which of a CA or a client key pair OpenSSL could not load, said in the project's
    words (its own text would go into the status otherwise)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if configuration.ssl_ca_cert:
        try:
            context.load_verify_locations(cafile=configuration.ssl_ca_cert)
        except (ssl.SSLError, ValueError):
            raise KubeconfigError(
                f"{origin} is refused: clusters[0].cluster.certificate-authority-data is not "
                "a certificate OpenSSL can load; store the CA's PEM file, base64-encoded"
            ) from None
    if configuration.cert_file:
        try:
            context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
        except (ssl.SSLError, ValueError):
            raise KubeconfigError(
                f"{origin} is refused: users[0].user.client-certificate-data and "
                "client-key-data are not a certificate and its key OpenSSL can load; store "
                "the PEM files, base64-encoded"
            ) from None


def keep_idle_connections(api: ApiClient, *, seconds: float) -> None:
    """Close the connections of ``api`` once idle for ``seconds``.

    The client builds its aiohttp session on the first request, with a connector that
    takes no keep-alive: the session is built here, by the client's own factory, and the
    keep-alive set on its connector; an aiohttp without that attribute is refused here
    rather than silently keeping every connection.
    """
    rest = api.rest_client
    if rest.pool_manager is None:
        rest.pool_manager = rest._create_pool_manager()
    connector = rest.pool_manager.connector
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
    response: Any = await client.CoreV1Api(api).read_namespaced_secret_without_preload_content(
        name, namespace, _request_timeout=REQUEST_TIMEOUT
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
