"""The HTTPS endpoint the API server calls, and the fixed ValidatingWebhookConfiguration.

Why a server of our own instead of ``kopf.WebhookServer``: kopf's server answers a review
it cannot read with HTTP 400/404/500 (a missing ``request`` key escapes as a 500 with a
stack trace in the log), and a path naming no handler is *allowed* (no handler, no error).
``AdmissionServer`` implements kopf's public server protocol (a callable that takes kopf's
webhook function and yields the client config) and answers every request with an
AdmissionReview: a body it cannot read, an unknown path, an exception anywhere in kopf or
in a handler all become a denial with a sentence. It hands kopf only a review a claim
covers (``intake``: kopf *allows* a review no handler takes), and refuses an allowed
answer no handler of the path judged (``intake.judging``), read within a memory
budget (``Budget``: a review waits for room, or is denied; what waits counts in it), over
connections that are capped and must finish their TLS handshake in seconds
(``Connections``), so the handlers stay ``@kopf.on.validate`` handlers and hostile load
cannot grow the process past its limit. kopf gets each review with one constant object
uid (``intake.for_kopf``), so forged reviews cannot grow its per-object memory either.
With a client CA it is mutual TLS: only the API server's certificate gets a review read.

Why a fixed configuration instead of kopf's managed one (``settings.admission.managed``):
kopf writes ``timeoutSeconds: 30`` and ``admissionReviewVersions: [v1, v1beta1]``, needs
the right to patch a cluster-wide ValidatingWebhookConfiguration at run time, and removes
its non-persistent webhooks when the operator stops, which turns "operator down" into
"every write allowed". ``render_configuration`` gives one configuration, rendered once
(by the chart, the tests, the demo) with ``failurePolicy: Fail``, ``sideEffects:
NoneOnDryRun``, a 5 s timeout, v1 reviews only and rules for group ichor.dev only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import aiohttp.web
import kopf

from ichor.api import kinds
from ichor.kube.clients import read_within
from ichor.webhook import decisions, intake
from ichor.webhook.intake import CLAIMS, MAX_REVIEW_BYTES, REVIEW_VERSION, Claim, denial
from ichor.webhook.readiness import Readiness

_log = logging.getLogger(__name__)

__all__ = [
    "CLAIMS",
    "MAX_REVIEW_BYTES",
    "REVIEW_VERSION",
    "AdmissionServer",
    "Budget",
    "Connections",
    "Full",
    "configure",
    "denial",
    "render_configuration",
    "render_mutating_configuration",
    "respond",
]

TIMEOUT_SECONDS = 5
HANDLERS: tuple[str, ...] = tuple(claim.path for claim in CLAIMS)
#: Memory the reviews being read and judged may take together (``intake.cost``). With
#: the operator's own ~100 MiB and the connections' buffers (``MAX_CONNECTIONS`` of about
#: 0.3 MiB) this stays under the chart's 256Mi limit.
BUDGET_BYTES = 96 * 1024 * 1024
#: Part of the budget only reviews costing at most ``SMALL_COST`` may use, so ordinary
#: reviews are answered while large ones wait.
SMALL_RESERVE = 16 * 1024 * 1024
SMALL_COST = 4 * 1024 * 1024
#: How long a review waits for room in the budget (the API server waits 5 s).
QUEUE_SECONDS = 3.0
#: How long a body may take to arrive once its room is held: the API server sends it at
#: once and gives up after 5 s, so a slower sender only holds room others need.
READ_SECONDS = 5.0
#: Reviews that may wait for room at once. While it waits, a review's connection buffers
#: what arrives of its body (TLS and HTTP buffers: about 1.2 MiB measured), so each one
#: holds ``WAIT_COST`` of the budget while it waits; one more is refused at once.
MAX_WAITING = 8
WAIT_COST = 2 * 1024 * 1024
#: How long the first bytes of a refused body are waited for, to name its uid.
HEAD_SECONDS = 0.5
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
#: How long the unread rest of a refused body is read and thrown away before the
#: connection closes (so the caller reads the denial, not a reset): aiohttp's 10 s let
#: every refused slow body hold its connection's place that long.
LINGER_SECONDS = 1.0
#: How long a connection past its handshake may sit idle between reviews (aiohttp's
#: default is an hour, so idle callers could hold every place). Above the API server's
#: own idle time for webhook connections (Go's 90 s), so the API server closes first and
#: never sends a review on a connection the endpoint is closing.
KEEPALIVE_SECONDS = 120.0


#: The largest JSONPatch a mutating answer carries (the records are a few KiB at most).
MAX_PATCH_BYTES = 256 * 1024


def _clean(
    response: object, *, uid: str, mutating: bool = False, judged: bool = True
) -> dict[str, Any]:
    """kopf's answer reduced to what a validating webhook may say: allowed, a status with
    a short message when not, and a few short warnings (never an echo). Only an allowed
    answer of a mutating path carries a patch, and only a JSONPatch of bounded size.

    ``judged``: whether the handler of the path judged the review. kopf allows a review
    for which it finds no handler, so an allowed answer no handler gave is a denial."""
    body = response.get("response") if isinstance(response, Mapping) else None
    if not isinstance(body, Mapping) or not isinstance(body.get("allowed"), bool):
        return denial(uid, f"{intake.PREFIX} gave no answer", code=decisions.Code.UNAVAILABLE)
    allowed: bool = body["allowed"]
    if allowed and not judged:
        _log.warning("admission review %s: kopf allowed it but no handler judged it", uid)
        return denial(
            uid,
            f"no handler of {intake.PREFIX} judged this review (kopf found none for it), "
            "and what no handler judged is refused; nothing was changed",
            code=decisions.Code.FORBIDDEN,
        )
    out: dict[str, Any] = {"uid": uid, "allowed": allowed}
    patch = body.get("patch")
    if mutating and allowed and patch is not None:
        if (
            body.get("patchType") != "JSONPatch"
            or not isinstance(patch, str)
            or len(patch) > MAX_PATCH_BYTES
        ):
            return denial(
                uid,
                f"{intake.PREFIX} made a patch it may not send; nothing was changed",
                code=decisions.Code.UNAVAILABLE,
            )
        out["patchType"] = "JSONPatch"
        out["patch"] = patch
    warnings = body.get("warnings")
    if isinstance(warnings, list):
        kept = [intake.clip(w, intake.MAX_WARNING) for w in warnings if isinstance(w, str) and w]
        if kept:
            out["warnings"] = kept[: intake.MAX_WARNINGS]
    if not allowed:
        status = body.get("status")
        status = status if isinstance(status, Mapping) else {}
        message = status.get("message")
        if not isinstance(message, str) or not message.strip():
            message = f"{intake.PREFIX} refused the write"
        code = status.get("code")
        if not isinstance(code, int) or isinstance(code, bool) or not 400 <= code <= 599:
            code = int(decisions.Code.FORBIDDEN)
        out["status"] = {"code": code, "message": intake.clip(message, intake.MAX_MESSAGE)}
    return {"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview", "response": out}


async def respond(
    fn: kopf.WebhookFn,
    *,
    payload: bytes,
    webhook: str,
    claims: tuple[Claim, ...] = CLAIMS,
    headers: Mapping[str, str] | None = None,
    sslpeer: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The answer to one HTTP request: always an AdmissionReview, never an exception.

    kopf sees the review only when it is readable within the limits and a claim covers
    it (``intake.admissible``); kopf allows what no handler claims, so nothing else may
    reach it. kopf gets it with one constant object uid (``intake.for_kopf``), so forged
    reviews cannot grow its per-object memory.
    """
    data, problem = intake.parse(payload)
    if problem is not None:
        return intake.unreadable("", problem)
    uid = intake.uid_of(data)
    refusal = intake.admissible(data, path=webhook, claims=claims)
    if refusal is not None:
        return denial(uid, refusal)
    assert isinstance(data, Mapping)  # admissible says so
    try:
        with intake.judging() as judged:
            response: Any = await fn(
                intake.for_kopf(data),  # type: ignore[arg-type]
                webhook=webhook,
                headers=dict(headers or {}),
                sslpeer=dict(sslpeer or {}),
            )
    except Exception as error:
        _log.warning("admission review %s failed: %s: %s", uid, type(error).__name__, error)
        return denial(
            uid,
            f"{intake.PREFIX} could not decide ({type(error).__name__}: {error}); "
            "nothing was changed",
            code=decisions.Code.UNAVAILABLE,
        )
    claim = intake.claim_at(webhook, claims)
    return _clean(
        response,
        uid=uid,
        mutating=claim is not None and claim.mutating,
        judged=claim is not None and claim.path in judged,
    )


class OverBudget(Exception):
    """A review would need more memory than the whole budget: it is never read."""


class Busy(Exception):
    """The budget stayed full for ``QUEUE_SECONDS``: the review was not read."""


class Full(Busy):
    """No room now, and ``MAX_WAITING`` reviews already wait: refused at once."""


@dataclass
class Hold:
    """Bytes of the budget one review holds; ``shrink`` once its real cost is known."""

    budget: Budget
    cost: int
    large: bool

    async def shrink(self, cost: int) -> None:
        if cost < self.cost:
            await self.budget._release(self, self.cost - cost)


class Budget:
    """Memory the reviews being read and judged may take together, counted in
    ``intake.cost`` bytes; a review waits for room, at most ``wait`` seconds.

    Reviews costing more than ``small`` may use all but ``reserved`` of it, so an
    ordinary review finds room while large ones wait. At most ``max_waiting`` reviews
    wait at once, each counted as ``wait_cost`` meanwhile (what its connection buffers
    while it waits; by default ``WAIT_COST`` scaled with ``total``); one more is refused
    at once (``Full``). ``peak`` is the most reviews held at once, ``peak_total`` with
    what the waiting ones count.
    """

    def __init__(
        self,
        *,
        total: int = BUDGET_BYTES,
        reserved: int = SMALL_RESERVE,
        small: int = SMALL_COST,
        max_waiting: int = MAX_WAITING,
        wait_cost: int | None = None,
    ) -> None:
        self.total = total
        self.reserved = reserved
        self.small = small
        self.max_waiting = max_waiting
        self.wait_cost = WAIT_COST * total // BUDGET_BYTES if wait_cost is None else wait_cost
        self.in_use = 0
        self.large_in_use = 0
        self.waiting = 0
        self.peak = 0
        self.peak_total = 0
        self._changed: asyncio.Condition | None = None

    @property
    def waiting_bytes(self) -> int:
        return self.waiting * self.wait_cost

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _limit(self, cost: int) -> int:
        return self.total if cost <= self.small else self.total - self.reserved

    def _fits(self, cost: int, *, waited: int = 0) -> bool:
        """Whether ``cost`` fits now; ``waited``: what the asking review counts while it
        waits, given back when it takes its room."""
        if self.in_use + self.waiting_bytes - waited + cost > self.total:
            return False
        return cost <= self.small or self.large_in_use + cost <= self._limit(cost)

    def _take(self, cost: int) -> Hold:
        held = Hold(self, cost, large=cost > self.small)
        self.in_use += cost
        if held.large:
            self.large_in_use += cost
        self.peak = max(self.peak, self.in_use)
        self.peak_total = max(self.peak_total, self.in_use + self.waiting_bytes)
        return held

    async def _release(self, hold: Hold, amount: int) -> None:
        async with self._condition():
            hold.cost -= amount
            self.in_use -= amount
            if hold.large:
                self.large_in_use -= amount
            self._condition().notify_all()

    async def _wait_for_room(self, cost: int, wait: float) -> Hold:
        """Room for ``cost``, at once or after waiting at most ``wait`` seconds counted
        as ``wait_cost``; raises ``Full`` or ``Busy``."""
        changed = self._condition()
        async with changed:
            if self._fits(cost):
                return self._take(cost)
            if (
                self.waiting >= self.max_waiting
                or self.in_use + self.waiting_bytes + self.wait_cost > self.total
            ):
                raise Full(cost)
            self.waiting += 1
            self.peak_total = max(self.peak_total, self.in_use + self.waiting_bytes)
            try:
                async with asyncio.timeout(wait):
                    await changed.wait_for(lambda: self._fits(cost, waited=self.wait_cost))
            except TimeoutError:
                raise Busy(cost) from None
            finally:
                self.waiting -= 1
                changed.notify_all()
            return self._take(cost)

    @contextlib.asynccontextmanager
    async def hold(self, cost: int, *, wait: float = QUEUE_SECONDS) -> AsyncIterator[Hold]:
        """Hold ``cost`` bytes for the ``with`` block; raises ``OverBudget``, ``Full`` or
        ``Busy``."""
        if cost > self._limit(cost):
            raise OverBudget(cost)
        held = await self._wait_for_room(cost, wait)
        try:
            yield held
        finally:
            await self._release(held, held.cost)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


async def _head(stream: aiohttp.StreamReader) -> bytes:
    """The first bytes of a body that will not be read, for ``intake.peek_uid``: what
    arrives within ``HEAD_SECONDS`` (a caller that sends nothing is not waited for)."""
    try:
        async with asyncio.timeout(HEAD_SECONDS):
            return await stream.read(intake.PEEK_BYTES)
    except (OSError, aiohttp.ClientError, ValueError, TimeoutError):
        return b""


def _common_name(peer: Mapping[str, Any] | None) -> str | None:
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def _digest(paths: Collection[Path]) -> str:
    hasher = hashlib.sha256()
    for path in paths:
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


async def _changed(files: Collection[Path], *, interval: float) -> None:
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


class _Site(aiohttp.web.BaseSite):
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


class AdmissionServer:
    """kopf's webhook server protocol over HTTPS, answering every request with a review.

    With ``client_ca`` the TLS handshake requires a client certificate that CA signed
    (mutual TLS: the API server presents it, see docs/install.md); a caller
    without one is refused before any byte of HTTP is read. ``client_names``, when
    given, also limits the certificate's common name. Bodies are read within ``budget``.

    The certificate files are re-read when they change (cert-manager renews them in
    place); the listening socket is then reopened with the new certificate.

    Connections are capped (``Connections``), a TLS handshake must end within
    ``HANDSHAKE_SECONDS`` and an idle connection is closed after ``KEEPALIVE_SECONDS``,
    so idle or stalled callers hold little memory and not for long.
    """

    def __init__(
        self,
        *,
        port: int,
        certfile: Path,
        pkeyfile: Path,
        cafile: Path | None = None,
        client_ca: Path | None = None,
        client_names: Collection[str] = (),
        addr: str = "127.0.0.1",
        host: str | None = None,
        file_check_interval: float = 60.0,
        budget: Budget | None = None,
        connections: Connections | None = None,
        handshake_seconds: float = HANDSHAKE_SECONDS,
        keepalive_seconds: float = KEEPALIVE_SECONDS,
        readiness: Readiness | None = None,
    ) -> None:
        if client_names and client_ca is None:
            raise ValueError("client_names needs client_ca: names are read from a verified cert")
        self.port = port
        self.certfile = certfile
        self.pkeyfile = pkeyfile
        self.cafile = cafile
        self.client_ca = client_ca
        self.client_names = frozenset(client_names)
        self.addr = addr
        self.host = host or ("127.0.0.1" if addr in ("0.0.0.0", "") else addr)
        self.file_check_interval = file_check_interval
        self.budget = budget or Budget()
        self.connections = connections or Connections()
        self.handshake_seconds = handshake_seconds
        self.keepalive_seconds = keepalive_seconds
        #: Told when the listener opens and closes (the readiness endpoint's answer).
        self.readiness = readiness

    @property
    def url(self) -> str:
        """The base URL the configuration points at (handler ids are appended)."""
        return f"https://{self.host}:{self.port}"

    def ca_bundle(self) -> bytes:
        return (self.cafile or self.certfile).read_bytes()

    def _context(self) -> ssl.SSLContext:
        # Not create_default_context(CLIENT_AUTH): that trusts the system's CAs for
        # client certificates too; only client_ca may sign a caller's certificate.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.certfile), str(self.pkeyfile))
        if self.client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(self.client_ca))
        return context

    async def answer(
        self, fn: kopf.WebhookFn, request: aiohttp.web.BaseRequest, *, path: str
    ) -> tuple[dict[str, Any], bool]:
        """The review answering ``request``, and whether to close the connection (its
        body was not read to the end)."""
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        peer = peer if isinstance(peer, Mapping) else None
        if self.client_names and _common_name(peer) not in self.client_names:
            # The CA signed it (the handshake checked), but it is not the API server's.
            head = await _head(request.content)
            return denial(
                intake.peek_uid(head),
                f"{intake.PREFIX} answers only the API server: the client certificate "
                f"{intake.clip(str(_common_name(peer)), 80)!r} is not one of "
                f"{', '.join(sorted(self.client_names))}; nothing was changed",
                code=decisions.Code.FORBIDDEN,
            ), True
        if request.method != "POST":
            return intake.unreadable("", f"{request.method} is not POST"), True
        length = request.content_length
        if length is not None and length > MAX_REVIEW_BYTES:
            head = await _head(request.content)
            return intake.unreadable(intake.peek_uid(head), intake.too_large_problem(length)), True
        bound = intake.cost_bound(length if length is not None else MAX_REVIEW_BYTES)
        try:
            async with self.budget.hold(bound) as held:
                try:
                    async with asyncio.timeout(READ_SECONDS):
                        payload = await read_within(request.content, limit=MAX_REVIEW_BYTES)
                except TimeoutError:
                    return intake.unreadable(
                        "", f"the body did not arrive within {READ_SECONDS:.0f} s"
                    ), True
                if payload is None:
                    return intake.unreadable(
                        "", intake.too_large_problem(MAX_REVIEW_BYTES + 1)
                    ), True
                await held.shrink(intake.cost(payload))
                answer = await respond(
                    fn,
                    payload=payload,
                    webhook=path,
                    headers=dict(request.headers),
                    sslpeer=peer,
                )
                return answer, False
        except OverBudget:
            head = await _head(request.content)
            return intake.unreadable(
                intake.peek_uid(head),
                f"reading a body of {length:,} bytes could take {_mib(bound)}, more than "
                f"the webhook's budget of {_mib(self.budget.total)}",
            ), True
        except Full:
            head = await _head(request.content)
            return denial(
                intake.peek_uid(head),
                f"{intake.PREFIX} already holds {_mib(self.budget.in_use)} of reviews and "
                f"{self.budget.waiting} more wait for room, as many as may; nothing was "
                "changed, retry the write",
                code=decisions.Code.UNAVAILABLE,
            ), True
        except Busy:
            head = await _head(request.content)
            return denial(
                intake.peek_uid(head),
                f"{intake.PREFIX} already holds {_mib(self.budget.in_use)} of reviews, its "
                f"budget, and this one waited {QUEUE_SECONDS:.0f} s for room; nothing was "
                "changed, retry the write",
                code=decisions.Code.UNAVAILABLE,
            ), True
        except (OSError, aiohttp.ClientError, ValueError) as error:
            return intake.unreadable("", f"the body could not be read ({error})"), True

    async def reply(self, fn: kopf.WebhookFn, request: aiohttp.web.Request) -> aiohttp.web.Response:
        """The HTTP response to one request, its body encoded: the whole of what the
        endpoint does between aiohttp handing over a request and sending the answer."""
        answer, close = await self.answer(fn, request, path=request.match_info.get("id", ""))
        response = aiohttp.web.json_response(answer)
        if close or (self.readiness is not None and self.readiness.draining):
            # draining: the caller's next review opens a new connection, which the
            # Service sends to a Pod that stays
            response.force_close()
        return response

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncGenerator[kopf.WebhookClientConfig, None]:
        async def handle(request: aiohttp.web.Request) -> aiohttp.web.Response:
            return await self.reply(fn, request)

        files = [
            p for p in (self.certfile, self.pkeyfile, self.cafile, self.client_ca) if p is not None
        ]
        while True:
            app = aiohttp.web.Application(client_max_size=MAX_REVIEW_BYTES)
            app.add_routes([aiohttp.web.route("*", "/{id:.*}", handle)])
            runner = aiohttp.web.AppRunner(
                app,
                handle_signals=False,
                access_log=None,
                keepalive_timeout=self.keepalive_seconds,
                lingering_time=LINGER_SECONDS,
            )
            await runner.setup()
            try:
                site = _Site(
                    runner,
                    self.addr,
                    self.port,
                    context=self._context(),
                    connections=self.connections,
                    handshake_seconds=self.handshake_seconds,
                )
                await site.start()
                if self.readiness is not None:
                    self.readiness.opened()
                _log.info(
                    "admission webhook listening on %s:%s (%s)",
                    self.addr,
                    self.port,
                    "mutual TLS" if self.client_ca is not None else "TLS, any client",
                )
                yield kopf.WebhookClientConfig(
                    url=self.url, caBundle=base64.b64encode(self.ca_bundle()).decode("ascii")
                )
                await _changed(files, interval=self.file_check_interval)
                _log.info("admission webhook certificate changed: reopening the endpoint")
            finally:
                if self.readiness is not None:
                    self.readiness.closed()
                await runner.cleanup()


class RefusalsAreAnswers(logging.Filter):
    """kopf logs every ``AdmissionError`` as "failed permanently" at ERROR; a refusal is the
    webhook's answer, not a failure of the operator, so it is logged at INFO."""

    PREFIXES = tuple(f"Webhook {handler!r} failed permanently" for handler in HANDLERS)

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.levelno == logging.ERROR
            and isinstance(record.msg, str)
            and record.msg.startswith(self.PREFIXES)
        ):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def quiet_refusals() -> None:
    """Install ``RefusalsAreAnswers`` on kopf's object logger (once)."""
    objects = logging.getLogger("kopf.objects")
    if not any(isinstance(f, RefusalsAreAnswers) for f in objects.filters):
        objects.addFilter(RefusalsAreAnswers())


def configure(
    settings: kopf.OperatorSettings,
    *,
    port: int,
    certfile: Path,
    pkeyfile: Path,
    cafile: Path | None = None,
    client_ca: Path | None = None,
    client_names: Collection[str] = (),
    addr: str = "127.0.0.1",
    host: str | None = None,
    readiness: Readiness | None = None,
) -> AdmissionServer:
    """Point kopf at the admission server; the configuration is fixed, not kopf-managed."""
    quiet_refusals()
    server = AdmissionServer(
        readiness=readiness,
        port=port,
        certfile=certfile,
        pkeyfile=pkeyfile,
        cafile=cafile,
        client_ca=client_ca,
        client_names=client_names,
        addr=addr,
        host=host,
    )
    settings.admission.server = server
    settings.admission.managed = None
    return server


class Rule(TypedDict):
    apiGroups: list[str]
    apiVersions: list[str]
    operations: list[str]
    resources: list[str]
    scope: str


class ClientConfig(TypedDict):
    url: str
    caBundle: str


class MatchCondition(TypedDict):
    name: str
    expression: str


class Webhook(TypedDict):
    name: str
    clientConfig: ClientConfig
    rules: list[Rule]
    failurePolicy: str
    matchPolicy: str
    sideEffects: str
    timeoutSeconds: int
    admissionReviewVersions: list[str]
    matchConditions: NotRequired[list[MatchCondition]]


class Metadata(TypedDict):
    name: str
    labels: NotRequired[dict[str, str]]


class ValidatingWebhookConfiguration(TypedDict):
    apiVersion: str
    kind: str
    metadata: Metadata
    webhooks: list[Webhook]


class MutatingWebhook(Webhook):
    reinvocationPolicy: str


class MutatingWebhookConfiguration(TypedDict):
    apiVersion: str
    kind: str
    metadata: Metadata
    webhooks: list[MutatingWebhook]


#: The name of a claim's match condition (``Claim.match``).
MATCH_CONDITION = "ichor-dev-keys"


def _webhook(claim: Claim, *, base: str, bundle: str, timeout_seconds: int) -> Webhook:
    hook = _hook(claim, base=base, bundle=bundle, timeout_seconds=timeout_seconds)
    if claim.match is not None:
        hook["matchConditions"] = [MatchCondition(name=MATCH_CONDITION, expression=claim.match)]
    return hook


def _hook(claim: Claim, *, base: str, bundle: str, timeout_seconds: int) -> Webhook:
    return Webhook(
        name=f"{claim.path}.{kinds.GROUP}",
        clientConfig=ClientConfig(url=f"{base}/{claim.path}", caBundle=bundle),
        rules=[
            Rule(
                apiGroups=[kinds.GROUP],
                apiVersions=["*"],
                operations=sorted(claim.operations),
                resources=claim.resources(),
                scope=claim.scope,
            )
        ],
        failurePolicy="Fail",
        matchPolicy="Equivalent",
        sideEffects="NoneOnDryRun",
        timeoutSeconds=timeout_seconds,
        admissionReviewVersions=["v1"],
    )


def _metadata(name: str) -> Metadata:
    return Metadata(
        name=name,
        labels={"app.kubernetes.io/name": "ichor", "app.kubernetes.io/component": "webhook"},
    )


def render_configuration(
    *,
    url: str,
    ca_bundle: bytes,
    name: str = "ichor-webhook",
    timeout_seconds: int = TIMEOUT_SECONDS,
) -> ValidatingWebhookConfiguration:
    """The ValidatingWebhookConfiguration for a server at ``url`` whose CA is ``ca_bundle``.

    One webhook per claim (path = kopf handler id), each matching only what its claim
    covers in group ichor.dev (``intake.CLAIMS``), so the API server sends nothing the
    endpoint would refuse as unclaimed. DELETE is not matched, so clusters and operations
    can be removed while the operator is down.
    """
    base = url.rstrip("/")
    bundle = base64.b64encode(ca_bundle).decode("ascii")
    return ValidatingWebhookConfiguration(
        apiVersion="admissionregistration.k8s.io/v1",
        kind="ValidatingWebhookConfiguration",
        metadata=_metadata(name),
        webhooks=[
            _webhook(claim, base=base, bundle=bundle, timeout_seconds=timeout_seconds)
            for claim in CLAIMS
            if not claim.mutating
        ],
    )


def render_mutating_configuration(
    *,
    url: str,
    ca_bundle: bytes,
    name: str = "ichor-webhook",
    timeout_seconds: int = TIMEOUT_SECONDS,
) -> MutatingWebhookConfiguration:
    """The MutatingWebhookConfiguration of the same server: the paths that write the
    admission records (``ichor.api.records``) into the object under review.

    It patches nothing but those annotations, and the validating half refuses an object
    whose records are not exactly what it would have written, so a missing or reordered
    mutating webhook fails closed. ``reinvocationPolicy: IfNeeded``: when a later mutating
    webhook changes the object, the records are computed again for what is stored.
    """
    base = url.rstrip("/")
    bundle = base64.b64encode(ca_bundle).decode("ascii")
    return MutatingWebhookConfiguration(
        apiVersion="admissionregistration.k8s.io/v1",
        kind="MutatingWebhookConfiguration",
        metadata=_metadata(name),
        webhooks=[
            MutatingWebhook(
                **_webhook(claim, base=base, bundle=bundle, timeout_seconds=timeout_seconds),
                reinvocationPolicy="IfNeeded",
            )
            for claim in CLAIMS
            if claim.mutating
        ],
    )
