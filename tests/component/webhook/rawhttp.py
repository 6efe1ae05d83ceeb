"""HTTP/1.1 over TLS byte by byte, for requests no well-behaved client sends: any method,
any headers, a Content-Length that lies, a body that stops half way."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


class NoReply(Exception):
    """The server closed the connection, or said nothing in time."""


async def exchange(
    host: str,
    port: int,
    *,
    context: ssl.SSLContext,
    head: bytes,
    body: bytes = b"",
    seconds: float = 30.0,
) -> Reply:
    """Send ``head`` (request line and headers, without the blank line) and ``body``, then
    read one response to the end (the request asks for ``Connection: close``)."""
    try:
        async with asyncio.timeout(seconds):
            reader, writer = await asyncio.open_connection(host, port, ssl=context)
            try:
                writer.write(head + b"\r\nConnection: close\r\n\r\n")
                writer.write(body)
                await writer.drain()
                raw = await reader.read()
            finally:
                writer.close()
                with contextlib.suppress(ConnectionError, ssl.SSLError):
                    await writer.wait_closed()
    except (TimeoutError, ConnectionError, ssl.SSLError, OSError) as error:
        raise NoReply(f"{type(error).__name__}: {error}") from None
    top, sep, rest = raw.partition(b"\r\n\r\n")
    if not sep:
        raise NoReply(f"no complete response: {raw[:200]!r}")
    lines = top.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        rest = _unchunk(rest)
    return Reply(status=status, headers=headers, body=rest)


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)


def chunked(body: bytes, *, piece: int = 65536) -> bytes:
    """``body`` in chunked transfer encoding."""
    out = bytearray()
    for start in range(0, len(body), piece):
        part = body[start : start + piece]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return bytes(out + b"0\r\n\r\n")
