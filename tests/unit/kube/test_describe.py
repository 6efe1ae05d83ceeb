"""A failed call to a workload cluster is said in the project's words: the server's
reason phrase, body and TLS text, and an exception's message, never reach a status."""

from __future__ import annotations

import socket
import ssl

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey
from kubernetes.aio.client.exceptions import ApiException

from ichor.controller.taloscluster import reconciler
from ichor.kube import errors

HOSTILE = "-----BEGIN PRIVATE KEY----- MIIEvQIBADANBg the operator's key"
KEY = ConnectionKey("10.0.0.1", 6443, True, True, None, None, None)


def _api(status: int) -> ApiException:
    error = ApiException(status=status, reason=HOSTILE)
    error.body = HOSTILE
    return error


def _connector(cause: OSError) -> aiohttp.ClientConnectorError:
    return aiohttp.ClientConnectorError(KEY, cause)


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (_api(401), "the workload cluster refused the operator (401 Unauthorized)"),
        (_api(403), "the workload cluster refused the operator (403 Forbidden)"),
        (_api(503), "the workload cluster answered 503 Service Unavailable"),
        (_api(599), "the workload cluster answered 599"),
        (TimeoutError(HOSTILE), "the workload cluster did not answer in time"),
        (
            _connector(ConnectionRefusedError(111, HOSTILE)),
            "the workload cluster cannot be reached (the connection was refused)",
        ),
        (
            _connector(socket.gaierror(-2, HOSTILE)),
            "the workload cluster cannot be reached (its host name does not resolve)",
        ),
        (
            aiohttp.ClientConnectorCertificateError(KEY, ssl.SSLCertVerificationError(HOSTILE)),
            "the workload cluster cannot be reached (its certificate is not signed by the CA "
            "the credentials name, or names another host)",
        ),
        (
            aiohttp.ClientConnectorSSLError(KEY, ssl.SSLError(1, HOSTILE)),
            "the workload cluster cannot be reached (the TLS handshake failed)",
        ),
        (
            aiohttp.ServerDisconnectedError(HOSTILE),
            "the workload cluster cannot be reached (it closed the connection)",
        ),
        (
            aiohttp.ClientPayloadError(HOSTILE),
            "the workload cluster sent an answer that could not be read",
        ),
        (OSError(HOSTILE), "the workload cluster cannot be reached (the connection failed)"),
    ],
)
def test_each_failure_is_a_sentence_of_our_own(error: BaseException, said: str) -> None:
    assert errors.describe(error) == said
    assert reconciler._describe(error) == said


def test_an_unexpected_answer_is_named_by_its_kind_only() -> None:
    message = reconciler._unexpected(ValueError(HOSTILE * 100))
    assert "PRIVATE" not in message
    assert message.startswith("the workload cluster's answer could not be read (ValueError)")
