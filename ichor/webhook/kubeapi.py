"""The API calls the webhook makes: who the operator is, read a cluster, list its
operations, read the IchorInstallation (the site's policy), ask for the verb. It writes
nothing: a review never causes a write.

Behind the small ``Backend`` protocol, so the handlers are tested with a fake; async, with
a short timeout on every call. The verb (and ``get`` on a Secret a TalosCluster names) is
asked with a SubjectAccessReview built from the request's userInfo, so the answer is the
requester's, never the service account's.

More in docs/design/notes.md, "ichor/webhook/kubeapi.py".
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, TypedDict, cast

from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.kube import clients, errors, identity, objects
from ichor.settings import KubeSettings
from ichor.webhook import decisions
from ichor.webhook.access_cache import AccessCache
from ichor.webhook.reviews import NamespacedName, Requester

#: Seconds any one API call of the webhook may take (the configuration allows 5 in all).
CALL_TIMEOUT = 2.0


class ApiUnavailable(RuntimeError):
    """An API call of the webhook failed; the write cannot be decided."""


#: The failures of an API call that leave a write undecided: any (``errors.FAILED``; an
#: aiohttp ``ServerDisconnectedError`` or ``ClientPayloadError`` is no OSError).
FAILURES = errors.FAILED


def _unavailable(what: str, error: BaseException) -> ApiUnavailable:
    """The one mapping of a failed call to the webhook's error: ``<what> failed: <why>``."""
    why = error.reason if isinstance(error, ApiException) else repr(error)
    return ApiUnavailable(f"{what} failed: {why}")


class Backend(Protocol):
    async def own_identity(self) -> identity.Identity:
        """The identity the operator's own requests carry (raises ``ApiUnavailable``)."""

    async def read_cluster(self, ref: NamespacedName) -> Mapping[str, Any] | None:
        """The TalosCluster object, or None when it does not exist."""

    async def list_operations(self, namespace: str) -> list[Mapping[str, Any]]:
        """The TalosOperations stored in ``namespace``."""

    async def holds_override(self, requester: Requester, ref: NamespacedName) -> bool:
        """Whether the requester holds the override verb for that cluster."""

    async def read_installation(self) -> Mapping[str, Any] | None:
        """The IchorInstallation (its ``spec.policy`` is the site's), None when absent."""

    async def may_read_secret(self, requester: Requester, ref: NamespacedName) -> bool:
        """Whether the requester may ``get`` that Secret (a Secret a TalosCluster names)."""


class ResourceAttributes(TypedDict):
    group: str
    resource: str
    verb: str
    namespace: str
    name: str


class SubjectAccessReviewSpec(TypedDict):
    user: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]
    resourceAttributes: ResourceAttributes


class SubjectAccessReview(TypedDict):
    apiVersion: str
    kind: str
    spec: SubjectAccessReviewSpec


def access_review(
    requester: Requester,
    ref: NamespacedName,
    *,
    group: str = decisions.GROUP,
    resource: str = decisions.RESOURCE,
    verb: str = decisions.VERB,
) -> SubjectAccessReview:
    """The SubjectAccessReview asking whether the requester holds ``verb`` on ``ref``: by
    default the override verb on the cluster; ``get`` on a Secret for a Secret reference."""
    return SubjectAccessReview(
        apiVersion="authorization.k8s.io/v1",
        kind="SubjectAccessReview",
        spec=SubjectAccessReviewSpec(
            user=requester.username,
            uid=requester.uid,
            groups=list(requester.groups),
            extra={key: list(values) for key, values in requester.extra},
            resourceAttributes=ResourceAttributes(
                group=group,
                resource=resource,
                verb=verb,
                namespace=ref.namespace,
                name=ref.name,
            ),
        ),
    )


class KubeBackend:
    """The real backend: one kubernetes.aio client per event loop that uses it.

    It reaches the API server as ``kubeconfig`` (a file) says, else as the operator does
    (``kube``: in-cluster credentials in a Pod, else ``KUBECONFIG``/``~/.kube/config``);
    one of them is needed. A client belongs to the loop it was made in (its connection
    pool does), hence one per loop.
    """

    def __init__(
        self,
        *,
        kubeconfig: Path | None = None,
        kube: KubeSettings | None = None,
        answers: AccessCache | None = None,
    ) -> None:
        source = kubeconfig if kubeconfig is not None else kube
        if source is None:
            raise TypeError("KubeBackend needs the operator's kube settings or a kubeconfig")
        self._source: Path | KubeSettings = source
        #: SubjectAccessReview answers, kept a few seconds per requester, verb and cluster.
        self._answers = answers if answers is not None else AccessCache()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, client.ApiClient] = (
            weakref.WeakKeyDictionary()
        )
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        #: Asked once; an answer never changes while the credentials do not.
        self._identity: identity.Identity | None = None

    async def _api(self) -> client.ApiClient:
        loop = asyncio.get_running_loop()
        found = self._clients.get(loop)
        if found is not None:
            return found
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            found = self._clients.get(loop)
            if found is None:
                found = await self._connect()
                self._clients[loop] = found
        return found

    async def _connect(self) -> client.ApiClient:
        if isinstance(self._source, Path):
            return await clients.own_client(self._source)
        return await clients.operator_client(kube=self._source)

    async def close(self) -> None:
        """Close the client of the running loop (kopf's cleanup calls this)."""
        found = self._clients.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found.close()

    async def own_identity(self) -> identity.Identity:
        """The SelfSubjectReview of this backend's credentials, which are the operator's."""
        if self._identity is None:
            try:
                self._identity = await identity.who_am_i(await self._api())
            except identity.IdentityUnknown as error:
                raise ApiUnavailable(f"the operator's own identity is unknown: {error}") from None
        return self._identity

    async def read_cluster(self, ref: NamespacedName) -> Mapping[str, Any] | None:
        try:
            return await objects.get(
                await self._api(),
                kind=kinds.Kind.TALOS_CLUSTER,
                name=ref.name,
                namespace=ref.namespace,
                request_timeout=CALL_TIMEOUT,
            )
        except FAILURES as error:
            raise _unavailable(f"reading TalosCluster {ref}", error) from None

    async def list_operations(self, namespace: str) -> list[Mapping[str, Any]]:
        try:
            return list(
                await objects.list_all(
                    await self._api(),
                    kind=kinds.Kind.TALOS_OPERATION,
                    namespace=namespace,
                    request_timeout=CALL_TIMEOUT,
                )
            )
        except FAILURES as error:
            raise _unavailable(f"listing the TalosOperations of {namespace}", error) from None

    async def holds_override(self, requester: Requester, ref: NamespacedName) -> bool:
        kept = self._answers.get(requester, verb=decisions.VERB, ref=ref)
        if kept is not None:
            return kept
        allowed = await self._access_review(requester, ref)
        self._answers.put(requester, verb=decisions.VERB, ref=ref, allowed=allowed)
        return allowed

    async def read_installation(self) -> Mapping[str, Any] | None:
        try:
            return await objects.get(
                await self._api(),
                kind=kinds.Kind.ICHOR_INSTALLATION,
                name=kinds.INSTALLATION_NAME,
                namespace=None,
                request_timeout=CALL_TIMEOUT,
            )
        except FAILURES as error:
            raise _unavailable("reading the IchorInstallation (the site's policy)", error) from None

    async def may_read_secret(self, requester: Requester, ref: NamespacedName) -> bool:
        # kept apart from the override's answers: the verb names the resource too
        verb = f"{decisions.SECRET_VERB} {decisions.SECRET_RESOURCE}"
        kept = self._answers.get(requester, verb=verb, ref=ref)
        if kept is not None:
            return kept
        allowed = await self._secret_review(requester, ref)
        self._answers.put(requester, verb=verb, ref=ref, allowed=allowed)
        return allowed

    async def _access_review(self, requester: Requester, ref: NamespacedName) -> bool:
        """The API server's answer for the override verb (raises ``ApiUnavailable``;
        nothing is kept then)."""
        return await self._ask(
            access_review(requester, ref),
            what=f"the SubjectAccessReview for the verb `{decisions.VERB}`",
        )

    async def _secret_review(self, requester: Requester, ref: NamespacedName) -> bool:
        """The API server's answer for ``get`` on Secret ``ref``."""
        body = access_review(
            requester,
            ref,
            group="",
            resource=decisions.SECRET_RESOURCE,
            verb=decisions.SECRET_VERB,
        )
        return await self._ask(body, what=f"the SubjectAccessReview for `get` on Secret {ref}")

    async def _ask(self, body: SubjectAccessReview, *, what: str) -> bool:
        api = client.AuthorizationV1Api(await self._api())
        try:
            review = await api.create_subject_access_review(
                body=cast(Any, body), _request_timeout=CALL_TIMEOUT
            )
        except FAILURES as error:
            raise _unavailable(what, error) from None
        return bool(review.status is not None and review.status.allowed)
