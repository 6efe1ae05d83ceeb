"""Requests the API server judges as a tenant's ServiceAccount, not as the operator.

``impersonating(api, account)`` is the operator's client with ``Impersonate-User:
system:serviceaccount:<namespace>:<name>`` on every request, and no ``Impersonate-Group``,
so the operator needs ``impersonate`` on ``serviceaccounts`` only. It shares the
operator's connection pool. A read refused as the account is raised as ``ReadRefused``
(``refusal``); ``refused_message`` words it for a status.

More in docs/design/notes.md, "ichor/kube/impersonation.py".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.kube import errors
from ichor.kube.accounts import Read, ServiceAccount, not_impersonated, refused
from ichor.kube.clients import REQUEST_TIMEOUT

IMPERSONATE_USER = "Impersonate-User"


class ImpersonatingClient(ApiClient):
    """``api`` acting as ``account``: the same configuration, pool and headers, plus
    ``Impersonate-User``, which the client puts over any header a call passes."""

    def __init__(self, api: ApiClient, account: ServiceAccount) -> None:
        # Not ApiClient.__init__, which opens a connection pool of its own: this client
        # is api's state (configuration, pool, cookie) with headers of its own.
        self.__dict__.update(vars(api))
        self.default_headers = {**api.default_headers, IMPERSONATE_USER: account.username}
        self.account = account

    async def close(self) -> None:
        """Nothing: the pool is the operator's client's, closed with it."""


def impersonating(api: ApiClient, account: ServiceAccount) -> ImpersonatingClient:
    return ImpersonatingClient(api, account)


class ReadRefused(errors.Forbidden):
    """A 403 to ``read``: raised in place of the plain ``Forbidden`` by ``refusal``."""

    def __init__(self, error: errors.ApiError, read: Read) -> None:
        super().__init__(error)
        self.read = read


@contextmanager
def refusal(read: Read) -> Iterator[None]:
    """Inside, a 403 is raised as ``ReadRefused(read)``: the caller knows what it read,
    so the status can say which permission is missing without quoting the server."""
    try:
        yield
    except errors.Forbidden as error:
        if isinstance(error, ReadRefused):
            raise
        raise ReadRefused(error, read) from error


async def exists(api: ApiClient, account: ServiceAccount) -> bool | None:
    """Whether ``account`` exists, asked as the operator (None: not known)."""
    try:
        await errors.mapped(
            client.CoreV1Api(api).read_namespaced_service_account(
                account.name, account.namespace, _request_timeout=REQUEST_TIMEOUT
            )
        )
    except errors.NotFound:
        return False
    except errors.FAILED:
        return None
    return True


async def refused_message(api: ApiClient, account: ServiceAccount, error: ReadRefused) -> str:
    """Why ``account`` read nothing, in the operator's words: the operator may not act
    as it, it does not exist, or it lacks ``error.read``. ``api`` is the operator's own
    client, which asks whether the account exists."""
    if "cannot impersonate" in errors.message(error):
        return not_impersonated(account)
    return refused(account, error.read, exists=await exists(api, account))
