"""Loopback addresses a tenant can point a kubeconfig at to hold the operator's workers:
one that accepts and never answers, one that starts TLS and never finishes it, one that
finishes TLS and never answers the request, and one that trickles its answer.

Each is an asyncio server on 127.0.0.1 of the running loop (``serving``); ``kubeconfig``
gives a kubeconfig with inline credentials that names it, and closing the server ends
every connection it holds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import ssl
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.harness import certs


class Kind(enum.Enum):
    #: Accepts the connection and never reads or writes a byte.
    SILENT = "silent"
    #: Reads the ClientHello and sends the first bytes of a handshake record, never the rest.
    TLS_STALL = "tls-stall"
    #: Finishes TLS, reads the request, never answers it.
    HTTP_SILENT = "http-silent"
    #: Finishes TLS and answers 200 with a long body, one byte every ``TRICKLE_SECONDS``.
    TRICKLE = "trickle"


TRICKLE_SECONDS = 0.5


@dataclass
class Server:
    kind: Kind
    port: int
    ca: bytes
    #: Connections accepted so far.
    accepted: int = 0

    @property
    def address(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubeconfig(self, *, name: str = "hostile") -> str:
        """A kubeconfig naming this server, with inline CA data and a token only."""
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": name,
                        "cluster": {
                            "server": self.address,
                            "certificate-authority-data": base64.b64encode(self.ca).decode(),
                        },
                    }
                ],
                "users": [{"name": name, "user": {"token": "not-a-secret"}}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                "current-context": name,
            }
        )


async def _hold(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, kind: Kind, stop: asyncio.Event
) -> None:
    """Hold one connection as ``kind`` does, until ``stop``."""
    if kind is Kind.SILENT:
        await stop.wait()
        return
    if kind is Kind.TLS_STALL:
        await reader.read(4096)  # the ClientHello
        # a handshake record that declares 64 bytes, and 5 of them
        writer.write(b"\x16\x03\x03\x00\x40" + b"\x02\x00\x00\x3c\x03")
        await writer.drain()
        await stop.wait()
        return
    await reader.readuntil(b"\r\n\r\n")  # the request's head
    if kind is Kind.HTTP_SILENT:
        await stop.wait()
        return
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
    )
    while not stop.is_set():
        writer.write(b" ")
        await writer.drain()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), TRICKLE_SECONDS)


@contextlib.asynccontextmanager
async def serving(kind: Kind) -> AsyncIterator[Server]:
    """A hostile server of ``kind`` on a free loopback port, for the ``async with``."""
    authority = certs.Authority.create("hostile-ca")
    context: ssl.SSLContext | None = None
    if kind in (Kind.HTTP_SILENT, Kind.TRICKLE):
        serving_pem = authority.issue_server(hosts=["127.0.0.1"])
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as folder:
            cert, key = Path(folder) / "tls.crt", Path(folder) / "tls.key"
            serving_pem.write(cert_path=cert, key_path=key)
            context.load_cert_chain(cert, key)
    server_state = Server(kind=kind, port=0, ca=authority.cert_pem)
    stop = asyncio.Event()
    open_writers: set[asyncio.StreamWriter] = set()
    ended = asyncio.Condition()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server_state.accepted += 1
        open_writers.add(writer)
        try:
            await _hold(reader, writer, kind, stop)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away, or the server closes
        finally:
            open_writers.discard(writer)
            writer.close()
            async with ended:
                ended.notify_all()

    server = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=context, backlog=1024)
    server_state.port = server.sockets[0].getsockname()[1]
    try:
        yield server_state
    finally:
        server.close()
        stop.set()
        for writer in list(open_writers):
            writer.transport.abort()  # a read in progress ends
        async with ended:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait_for(lambda: not open_writers), timeout=5)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), timeout=5)
