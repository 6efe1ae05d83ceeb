"""The webhook endpoint's TLS listener: connections capped, handshakes bounded in time.

``Connections`` decides which connection holds a place and which runs its handshake;
``TlsSite`` is aiohttp's site over a plain TCP listener whose connections start their
TLS within those caps. ``server_context`` is the TLS the endpoint offers (mutual with a
client CA), and ``files_changed`` tells when the certificate files are renewed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
import time
from collections.abc import Callable, Collection
from pathlib import Path

import aiohttp.web

_log = logging.getLogger(__name__)

#: How long a caller may take over its TLS handshake (the API server takes milliseconds;
#: asyncio's default is 60 s). Each connection holds asyncio's 256 KiB TLS read buffer
#: from its first moment, so one that never says hello must not stay long.
HANDSHAKE_SECONDS = 3.0
#: Connections held at once, and of them, connections in their TLS handshake (each
#: holds asyncio's 256 KiB TLS buffer). A connection beyond the handshakes waits for a
#: turn (a paused TCP connection holds no TLS buffer), or takes the turn of the oldest
#: handshake running longer than ``HANDSHAKE_GRACE``: the API server keeps few idle
#: connections per webhook and opens a new one for most reviews of a burst, whose
#: handshakes take milliseconds and must not be dropped (a reset is a 500 for the
#: write), while a caller that never says hello gives way. Beyond all the places a new
#: connection takes the place of such a stalled handshake, or of the oldest one waiting,
#: and is refused at once when every place is past its handshake.
MAX_CONNECTIONS = 128
MAX_HANDSHAKES = 32
HANDSHAKE_GRACE = 0.5


def server_context(certfile: Path, pkeyfile: Path, client_ca: Path | None) -> ssl.SSLContext:
    """The TLS the endpoint offers: TLS 1.2 or later, and with ``client_ca`` a client
    certificate that CA signed (mutual TLS)."""
    # Not create_default_context(CLIENT_AUTH): that trusts the system's CAs for
    # client certificates too; only client_ca may sign a caller's certificate.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(certfile), str(pkeyfile))
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca))
    return context


def _digest(paths: Collection[Path]) -> str:
    hasher = hashlib.sha256()
    for path in paths:
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


async def files_changed(files: Collection[Path], *, interval: float) -> None:
    """Return once the content of ``files`` differs from what it is now."""
    initial = await asyncio.to_thread(_digest, files)
    while True:
        await asyncio.sleep(interval)
        if await asyncio.to_thread(_digest, files) != initial:
            return


class Connections:
    """The connections the endpoint holds: at most ``limit``; of those not yet past their
    TLS handshake, at most ``handshakes`` run it (hold a turn), the others wait for one.

    A connection beyond the places takes the place of the oldest handshake running longer
    than ``grace``, else of the oldest connection waiting for a turn, else of the oldest
    handshake (``dropped``): a caller stalled there gives way, so connections that never
    say hello cannot keep the API server out. With every place taken by a connection past
    its handshake, the new one is refused at once (``refused``). A turn goes at once to a
    newcomer that finds one free, or finds the oldest handshake stalled past ``grace``
    (that one is dropped); a turn given back goes to the newest connection waiting (after
    a flood, the oldest waiting are the flood's).
    """

    def __init__(
        self,
        *,
        limit: int = MAX_CONNECTIONS,
        handshakes: int = MAX_HANDSHAKES,
        grace: float = HANDSHAKE_GRACE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.handshakes = handshakes
        self.grace = grace
        self.clock = clock
        #: Admitted, not yet past the handshake; oldest first.
        self._handshaking: dict[_Connection, None] = {}
        #: Of those, the ones holding a turn, with when they got it; oldest first.
        self._turns: dict[_Connection, float] = {}
        #: Of those, the ones waiting for a turn; first come first.
        self._waiting: dict[_Connection, asyncio.Future[None]] = {}
        self._established: set[_Connection] = set()
        self.peak = 0
        self.dropped = 0
        self.refused = 0

    @property
    def open(self) -> int:
        return len(self._handshaking) + len(self._established)

    def _stalled(self) -> _Connection | None:
        """The oldest handshake, when it has run longer than ``grace``."""
        oldest = next(iter(self._turns.items()), None)
        if oldest is not None and self.clock() - oldest[1] >= self.grace:
            return oldest[0]
        return None

    def _drop(self, connection: _Connection) -> None:
        self.release(connection)
        self.dropped += 1
        connection.abort()

    def admit(self, connection: _Connection) -> bool:
        """Whether ``connection`` gets a place (maybe a stalled or waiting one's)."""
        while self._handshaking and self.open >= self.limit:
            victim = (
                self._stalled() or next(iter(self._waiting), None) or next(iter(self._handshaking))
            )
            self._drop(victim)
        if self.open >= self.limit:
            self.refused += 1
            return False
        self._handshaking[connection] = None
        self.peak = max(self.peak, self.open)
        return True

    async def turn(self, connection: _Connection, *, within: float) -> None:
        """Wait (at most ``within`` seconds: ``TimeoutError``) until ``connection`` may
        run its handshake; ``release`` or ``established`` gives the turn back."""
        if len(self._turns) >= self.handshakes:
            stalled = self._stalled()
            if stalled is not None:
                self._drop(stalled)
        if len(self._turns) < self.handshakes:
            self._turns[connection] = self.clock()
            return
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiting[connection] = waiter
        deadline = loop.time() + within
        try:
            while not waiter.done():
                # wake when the oldest handshake passes the grace, to drop it if it stalls
                oldest = next(iter(self._turns.values()), None)
                wake = deadline
                if oldest is not None:
                    wake = min(deadline, loop.time() + max(oldest + self.grace - self.clock(), 0))
                try:
                    async with asyncio.timeout_at(wake):
                        await asyncio.shield(waiter)
                except TimeoutError:
                    if loop.time() >= deadline:
                        raise
                    stalled = self._stalled()
                    if stalled is not None:
                        self._drop(stalled)  # its turn goes to the newest waiting
        finally:
            self._waiting.pop(connection, None)
        await waiter  # the turn given (or the cancellation of a connection dropped)

    def _give_turns(self) -> None:
        # the newest waiting first: after a flood of callers that never say hello, the
        # oldest waiting are theirs, and the API server's connection is the newest
        while len(self._turns) < self.handshakes and self._waiting:
            connection, waiter = next(reversed(self._waiting.items()))
            del self._waiting[connection]
            if not waiter.done():
                self._turns[connection] = self.clock()
                waiter.set_result(None)

    def established(self, connection: _Connection) -> bool:
        """Its handshake is done: False when it lost its place meanwhile."""
        if connection not in self._handshaking:
            return False
        del self._handshaking[connection]
        self._turns.pop(connection, None)
        self._established.add(connection)
        self._give_turns()
        return True

    def release(self, connection: _Connection) -> None:
        self._handshaking.pop(connection, None)
        self._established.discard(connection)
        waiter = self._waiting.pop(connection, None)
        if waiter is not None and not waiter.done():
            waiter.cancel()
        if self._turns.pop(connection, None) is not None:
            self._give_turns()

    def close(self) -> None:
        """Drop every connection still in its handshake (the listener is closing)."""
        for connection in list(self._handshaking):
            self.release(connection)
            connection.abort()


class _Connection(asyncio.Protocol):
    """One accepted TCP connection: a place among ``Connections``, then TLS within
    ``HANDSHAKE_SECONDS``, then aiohttp's request handler over it.

    asyncio's own TLS server gives neither a cap nor a way to drop a handshake, so the
    listener is plain TCP and the TLS is started here (``loop.start_tls``). Reading stays
    paused until then, so no byte of the handshake is lost.
    """

    def __init__(
        self,
        *,
        context: ssl.SSLContext,
        handler: Callable[[], asyncio.Protocol],
        connections: Connections,
        tasks: set[asyncio.Task[None]],
        handshake_seconds: float,
    ) -> None:
        self.context = context
        self.handler = handler
        self.connections = connections
        self.tasks = tasks
        self.handshake_seconds = handshake_seconds
        self.raw: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.raw = transport
        transport.pause_reading()
        if not self.connections.admit(self):
            transport.abort()
            return
        task = asyncio.get_running_loop().create_task(self._secure(transport))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def connection_lost(self, exc: Exception | None) -> None:
        # Only before TLS takes the connection over (then ``_Handoff`` hears it).
        self.connections.release(self)

    def abort(self) -> None:
        if self.raw is not None:
            self.raw.abort()

    async def _secure(self, raw: asyncio.Transport) -> None:
        handoff = _Handoff(self)
        try:
            await self.connections.turn(self, within=self.handshake_seconds)
            if raw.is_closing():
                raise ConnectionAbortedError("closed before its handshake")
            tls = await asyncio.get_running_loop().start_tls(
                raw,
                handoff,
                self.context,
                server_side=True,
                ssl_handshake_timeout=self.handshake_seconds,
                # a caller that never answers the closing alert does not keep its place
                # for asyncio's 30 s
                ssl_shutdown_timeout=self.handshake_seconds,
            )
        except Exception as error:
            # A timeout, a caller without the client certificate, a reset, a place lost
            _log.debug("webhook connection dropped in its TLS handshake: %r", error)
            self.connections.release(self)
            raw.abort()
            return
        except BaseException:
            self.connections.release(self)
            raw.abort()
            raise
        if tls is None or handoff.lost or not self.connections.established(self):
            if tls is not None:
                tls.abort()
            return
        handoff.attach(tls, self.handler())


class _Handoff(asyncio.Protocol):
    """The application side of one TLS connection: what arrives before aiohttp's handler
    is attached is kept for it, and the end of the connection frees its place."""

    def __init__(self, connection: _Connection) -> None:
        self.connection = connection
        self.handler: asyncio.Protocol | None = None
        self.pending: list[bytes] = []
        self.eof = False
        self.lost = False

    def attach(self, transport: asyncio.Transport, handler: asyncio.Protocol) -> None:
        self.handler = handler
        handler.connection_made(transport)
        for data in self.pending:
            handler.data_received(data)
        self.pending.clear()
        if self.eof:
            handler.eof_received()

    def data_received(self, data: bytes) -> None:
        if self.handler is not None:
            self.handler.data_received(data)
        else:
            self.pending.append(data)

    def eof_received(self) -> bool | None:
        if self.handler is not None:
            return self.handler.eof_received()
        self.eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.connection.connections.release(self.connection)
        if self.handler is not None:
            self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.handler is not None:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.handler is not None:
            self.handler.resume_writing()


class TlsSite(aiohttp.web.BaseSite):
    """aiohttp's site over ``_Connection``: a plain TCP listener whose connections start
    their TLS themselves, within ``Connections``' caps and ``HANDSHAKE_SECONDS``."""

    def __init__(
        self,
        runner: aiohttp.web.BaseRunner,
        host: str,
        port: int,
        *,
        context: ssl.SSLContext,
        connections: Connections,
        handshake_seconds: float,
    ) -> None:
        super().__init__(runner, ssl_context=context)
        self.host = host
        self.port = port
        self.context = context
        self.connections = connections
        self.handshake_seconds = handshake_seconds
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return f"https://{self.host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        handler = self._runner.server
        assert handler is not None

        def accepted() -> _Connection:
            return _Connection(
                context=self.context,
                handler=handler,
                connections=self.connections,
                tasks=self.tasks,
                handshake_seconds=self.handshake_seconds,
            )

        self._server = await asyncio.get_running_loop().create_server(
            accepted, self.host, self.port, reuse_address=True
        )

    async def stop(self) -> None:
        await super().stop()
        self.connections.close()
        for task in list(self.tasks):
            task.cancel()
