"""The HTTPS endpoint the API server calls: every request gets an AdmissionReview.

``AdmissionServer`` implements kopf's webhook server protocol. A body it cannot read, an
unknown path, an exception in kopf or a handler: each becomes a denial with a sentence.
kopf sees only a review a claim covers (``intake``), read within the memory budget
(``budget``) over capped TLS connections (``connections``), and an allowed answer no
handler judged is refused. The configuration the API server calls it by is
``configuration``'s. Why a server of its own: docs/design/notes.md.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import AsyncGenerator, Collection, Mapping
from pathlib import Path
from typing import Any

import aiohttp.web
import kopf

from ichor.api import kinds
from ichor.kube import metrics
from ichor.kube.clients import read_within
from ichor.webhook import decisions, intake
from ichor.webhook.budget import QUEUE_SECONDS, Budget, Busy, Full, OverBudget
from ichor.webhook.connections import (
    HANDSHAKE_SECONDS,
    Connections,
    TlsSite,
    files_changed,
    server_context,
)
from ichor.webhook.intake import CLAIMS, MAX_REVIEW_BYTES, REVIEW_VERSION, Claim, denial
from ichor.webhook.readiness import Readiness

_log = logging.getLogger(__name__)

HANDLERS: tuple[str, ...] = tuple(claim.path for claim in CLAIMS)
#: How long a body may take to arrive once its room is held: the API server sends it at
#: once and gives up after 5 s, so a slower sender only holds room others need.
READ_SECONDS = 5.0
#: How long the first bytes of a refused body are waited for, to name its uid.
HEAD_SECONDS = 0.5
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
    response: object,
    *,
    uid: str,
    mutating: bool = False,
    judged: bool = True,
    overridable: bool = False,
) -> dict[str, Any]:
    """kopf's answer reduced to what a validating webhook may say: allowed, a status with
    a short message when not, and a few short warnings (never an echo). Only an allowed
    answer of a mutating path carries a patch, and only a JSONPatch of bounded size.

    ``judged``: whether the handler of the path judged the review. kopf allows a review
    for which it finds no handler, so an allowed answer no handler gave is a denial.
    ``overridable``: the handler said ``override: true`` would pass its denial, which the
    status then names among its causes."""
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
    if mutating and allowed and body.get("patch") is not None:
        patch = _patch(body)
        if patch is None:
            return denial(
                uid,
                f"{intake.PREFIX} made a patch it may not send; nothing was changed",
                code=decisions.Code.UNAVAILABLE,
            )
        out.update(patch)
    warnings = _warnings(body.get("warnings"))
    if warnings:
        out["warnings"] = warnings
    if not allowed:
        out["status"] = _status(body.get("status"), overridable=overridable)
    return {"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview", "response": out}


def _patch(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The patch of an allowed mutating answer, or None when it may not be sent: only a
    JSONPatch of at most ``MAX_PATCH_BYTES``."""
    patch = body.get("patch")
    if body.get("patchType") != "JSONPatch" or not isinstance(patch, str):
        return None
    if len(patch) > MAX_PATCH_BYTES:
        return None
    return {"patchType": "JSONPatch", "patch": patch}


def _warnings(warnings: object) -> list[str]:
    """A few short warnings, each clipped."""
    if not isinstance(warnings, list):
        return []
    kept = [intake.clip(w, intake.MAX_WARNING) for w in warnings if isinstance(w, str) and w]
    return kept[: intake.MAX_WARNINGS]


#: The cause a denial carries when ``override: true`` would pass it (a StatusCause: its
#: type is the JSON key ``reason``).
_OVERRIDE_CAUSE = {
    "reason": kinds.OVERRIDE_WOULD_PASS,
    "field": "spec.override",
    "message": "override: true, set by a holder of the override verb, passes this refusal",
}


def _status(status: object, *, overridable: bool) -> dict[str, Any]:
    """A denial's status: an HTTP error code and a short message, and the cause of a
    refusal ``override: true`` would pass."""
    status = status if isinstance(status, Mapping) else {}
    message = status.get("message")
    if not isinstance(message, str) or not message.strip():
        message = f"{intake.PREFIX} refused the write"
    code = status.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or not 400 <= code <= 599:
        code = int(decisions.Code.FORBIDDEN)
    out: dict[str, Any] = {"code": code, "message": intake.clip(message, intake.MAX_MESSAGE)}
    if overridable:
        out["details"] = {"causes": [dict(_OVERRIDE_CAUSE)]}
    return out


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
    review = intake.for_kopf(data)
    try:
        return await _judged(fn, review, uid=uid, webhook=webhook, claims=claims,
                             headers=headers, sslpeer=sslpeer)  # fmt: skip
    finally:
        # kopf's views of the object refer to each other, so only a garbage collection
        # would free them; emptied, they hold nothing once the review is answered
        intake.release(review, data)


async def _judged(
    fn: kopf.WebhookFn,
    review: dict[str, Any],
    *,
    uid: str,
    webhook: str,
    claims: tuple[Claim, ...],
    headers: Mapping[str, str] | None,
    sslpeer: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """kopf's answer to an admissible ``review``, reduced by ``_clean``."""
    try:
        with intake.judging() as judged, intake.overridable() as passable:
            response: Any = await fn(
                review,  # type: ignore[arg-type]
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
        overridable=claim is not None and claim.path in passable,
    )


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


async def _peeked_uid(request: aiohttp.web.BaseRequest) -> str:
    """The uid at the start of a body that will not be read (``_head``, ``peek_uid``)."""
    return intake.peek_uid(await _head(request.content))


def _common_name(peer: Mapping[str, Any] | None) -> str | None:
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


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

    async def answer(
        self, fn: kopf.WebhookFn, request: aiohttp.web.BaseRequest, *, path: str
    ) -> tuple[dict[str, Any], bool]:
        """The review answering ``request``, and whether to close the connection (its
        body was not read to the end)."""
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        peer = peer if isinstance(peer, Mapping) else None
        if self.client_names and _common_name(peer) not in self.client_names:
            # The CA signed it (the handshake checked), but it is not the API server's.
            intake.denied_for("NotApiServer")
            return denial(
                await _peeked_uid(request),
                f"{intake.PREFIX} answers only the API server: the client certificate "
                f"{intake.clip(str(_common_name(peer)), 80)!r} is not one of "
                f"{', '.join(sorted(self.client_names))}; nothing was changed",
                code=decisions.Code.FORBIDDEN,
            ), True
        if request.method != "POST":
            return intake.unreadable("", f"{request.method} is not POST"), True
        length = request.content_length
        if length is not None and length > MAX_REVIEW_BYTES:
            return intake.unreadable(
                await _peeked_uid(request), intake.too_large_problem(length)
            ), True
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
            return intake.unreadable(
                await _peeked_uid(request),
                f"reading a body of {length:,} bytes could take {_mib(bound)}, more than "
                f"the webhook's budget of {_mib(self.budget.total)}",
            ), True
        except Full:
            return await self._no_room(request, queue_full=True), True
        except Busy:
            return await self._no_room(request, queue_full=False), True
        except (OSError, aiohttp.ClientError, ValueError) as error:
            return intake.unreadable("", f"the body could not be read ({error})"), True

    async def _no_room(
        self, request: aiohttp.web.BaseRequest, *, queue_full: bool
    ) -> dict[str, Any]:
        """The denial of a review the budget holds no room for, to be retried: the queue
        for room is full, or the review waited its time in it."""
        uid = await _peeked_uid(request)
        why = (
            f" and {self.budget.waiting} more wait for room, as many as may"
            if queue_full
            else f", its budget, and this one waited {QUEUE_SECONDS:.0f} s for room"
        )
        return denial(
            uid,
            f"{intake.PREFIX} already holds {_mib(self.budget.in_use)} of reviews{why}; "
            "nothing was changed, retry the write",
            code=decisions.Code.UNAVAILABLE,
        )

    async def reply(self, fn: kopf.WebhookFn, request: aiohttp.web.Request) -> aiohttp.web.Response:
        """The HTTP response to one request, its body encoded: the whole of what the
        endpoint does between aiohttp handing over a request and sending the answer."""
        started = time.monotonic()
        path = request.match_info.get("id", "")
        with intake.denials() as reasons:
            answer, close = await self.answer(fn, request, path=path)
        _count(answer, path=path, seconds=time.monotonic() - started, reasons=reasons)
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
                site = TlsSite(
                    runner,
                    self.addr,
                    self.port,
                    context=server_context(self.certfile, self.pkeyfile, self.client_ca),
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
                await files_changed(files, interval=self.file_check_interval)
                _log.info("admission webhook certificate changed: reopening the endpoint")
            finally:
                if self.readiness is not None:
                    self.readiness.closed()
                await runner.cleanup()


def _count(answer: Mapping[str, Any], *, path: str, seconds: float, reasons: list[str]) -> None:
    """The metrics of one answer: its latency, and the reason of a denial."""
    metrics.webhook_answered(webhook=path, seconds=seconds, known=(claim.path for claim in CLAIMS))
    response = answer.get("response")
    if isinstance(response, Mapping) and response.get("allowed") is not True:
        status = response.get("status")
        code = status.get("code") if isinstance(status, Mapping) else None
        metrics.webhook_denied(
            reason=reasons[-1] if reasons else None, code=code if isinstance(code, int) else 403
        )


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


def configure(settings: kopf.OperatorSettings, server: AdmissionServer) -> AdmissionServer:
    """Point kopf at ``server``; the configuration is fixed, not kopf-managed."""
    quiet_refusals()
    settings.admission.server = server
    settings.admission.managed = None
    return server
