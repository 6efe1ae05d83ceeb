"""The API server's answers, mapped once to typed errors; and the one set of failures
below HTTP.

Every call of the client layer (``objects``, ``patching``, ``batch``, ``events``)
raises one of these instead of the client's bare ``ApiException`` (``mapped`` around a
call, ``answered`` for an answer read raw), as kopf's ``errors.py`` maps its statuses.
They are ``ApiException`` too, with the same ``status``, ``reason`` and ``body``, so a
caller that only knows the client's exception still catches them. ``TRANSIENT`` is the
failures below HTTP (connection, TLS, timeout): the server may answer later. ``FAILED``
is both: whatever "the API call failed" means to a caller that treats every failure
alike (logs it, tries again later); every such caller catches it.
"""

from __future__ import annotations

import errno
import http
import socket
import ssl
from collections.abc import Awaitable
from typing import TypeVar

import aiohttp
from kubernetes.aio.client.exceptions import ApiException

from ichor.kube import apistatus

T = TypeVar("T")

#: Failures below HTTP: no answer (yet) from the server. ``ssl.SSLError`` is an OSError.
TRANSIENT = (aiohttp.ClientError, TimeoutError, OSError)
#: Any failure of an API call: an answer that is not a success (``ApiException``, which
#: every typed error below is), or none at all (``TRANSIENT``).
FAILED = (ApiException, *TRANSIENT)


class ApiError(ApiException):
    """An answer of the API server that is not a success, with its status and body."""

    def __init__(self, error: ApiException) -> None:
        super().__init__(status=error.status, reason=error.reason)
        self.body = error.body
        self.headers = error.headers

    @property
    def message(self) -> str:
        return message(self)

    @property
    def refused(self) -> bool:
        """A 4xx: the server refused the request as it was made (RBAC, a webhook, the
        schema, a namesake, throttling), rather than failing to answer it (5xx). The typed
        classes below name the 4xx a caller tells apart; any other 4xx is an ``ApiError``
        with this set, its ``status`` and the server's ``message``."""
        return isinstance(self.status, int) and 400 <= self.status < 500


class Unauthorized(ApiError):
    """401: the credentials were not accepted."""


class Forbidden(ApiError):
    """403: RBAC or a webhook refused the call (the body says which and why)."""


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: the object moved since it was read (a resourceVersion precondition failed),
    or a create met an object of that name."""


class Invalid(ApiError):
    """422: the object does not pass the CRD's schema."""


class ServerError(ApiError):
    """5xx: the server could not answer; it may later."""


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Invalid,
}


async def mapped(call: Awaitable[T]) -> T:
    """``await call`` (a call of the client), a failed answer raised as its typed error:
    the one ``try`` of every call of the client layer."""
    try:
        return await call
    except ApiException as error:
        raise typed(error) from error


def typed(error: ApiException) -> ApiError:
    """``error`` as the typed error of its status (``ApiError`` for any other)."""
    if isinstance(error, ApiError):
        return error
    status = error.status if isinstance(error.status, int) else 0
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return kind(error)


def answered(status: int, reason: str | None, body: bytes) -> ApiError:
    """The typed error of an answer read without the client's own check of its status
    (a ``*_without_preload_content`` call), with the start of its body."""
    error = ApiException(status=status, reason=reason)
    # text, as the client's own errors carry it once read
    error.body = body.decode(errors="replace")[:1024]
    return typed(error)


def message(error: ApiException) -> str:
    """The API server's message of a failed call (a webhook's denial text included), or
    the status and reason when the body holds none."""
    return apistatus.read(error.body, status=error.status, reason=error.reason).message


def _phrase(status: int | None) -> str:
    """``401 Unauthorized``: the status and HTTP's own phrase, never the server's."""
    if status is None:
        return "no status"
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _connection(error: BaseException) -> str:
    """Why a connection failed, in words of our own."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return "its certificate is not signed by the CA the credentials name, or names another host"
    cause = (
        getattr(error, "os_error", error)
        if isinstance(error, aiohttp.ClientConnectorError)
        else error
    )
    if isinstance(cause, ssl.SSLCertVerificationError):
        return "its certificate is not signed by the CA the credentials name, or names another host"
    if isinstance(error, aiohttp.ClientSSLError) or isinstance(cause, ssl.SSLError):
        return "the TLS handshake failed"
    if isinstance(error, aiohttp.ClientProxyConnectionError):
        return "the proxy cannot be reached"
    if isinstance(cause, socket.gaierror):
        return "its host name does not resolve"
    if isinstance(cause, ConnectionRefusedError):
        return "the connection was refused"
    if isinstance(cause, OSError) and cause.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "there is no route to it"
    if isinstance(error, aiohttp.ServerDisconnectedError | ConnectionResetError):
        return "it closed the connection"
    return "the connection failed"


def describe(error: BaseException, *, server: str = "the workload cluster") -> str:
    """A failed call to a server outside the operator's trust (a workload cluster), in the
    project's own words: a status with HTTP's phrase, or a kind of connection failure.
    Nothing the server sent (a reason phrase, a body, a TLS alert's text) is quoted: it
    goes into a status or an Event that others read."""
    if isinstance(error, ApiException):
        phrase = _phrase(error.status)
        if isinstance(typed(error), Unauthorized | Forbidden):
            return f"{server} refused the operator ({phrase})"
        return f"{server} answered {phrase}"
    if isinstance(error, TimeoutError):
        return f"{server} did not answer in time"
    if isinstance(error, aiohttp.ClientPayloadError | aiohttp.ClientResponseError):
        return f"{server} sent an answer that could not be read"
    if isinstance(error, aiohttp.ClientError | OSError):
        return f"{server} cannot be reached ({_connection(error)})"
    return f"{server} cannot be reached ({type(error).__name__})"
