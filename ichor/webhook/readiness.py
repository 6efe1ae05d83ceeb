"""The readiness endpoint: a Pod is Ready only while its webhook can answer a review.

It answers 200 only while the webhook's listener serves (``AdmissionServer`` says when),
or at once when no webhook is configured. ``drain`` (SIGUSR1, the chart's preStop) makes
it answer 503 and every review's connection close after its answer, so no kept-alive
connection carries reviews to a Pod the Service dropped. Only a process in the container
can drain it. Liveness stays kopf's.

More in docs/design/notes.md, "ichor/webhook/readiness.py".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse

import aiohttp.web

_log = logging.getLogger(__name__)


class Readiness:
    """Whether this process can answer reviews, as the webhook's listener reports it."""

    def __init__(self, *, webhook: bool) -> None:
        self.webhook = webhook
        self.listening = False
        self.draining = False

    def opened(self) -> None:
        self.listening = True

    def closed(self) -> None:
        self.listening = False

    def drain(self) -> None:
        """The Pod is stopping: unready from now on, and reviews close their connections."""
        if not self.draining:
            _log.info("draining: unready, and each review closes its connection after its answer")
        self.draining = True

    def state(self) -> tuple[bool, str]:
        """(ready, why) for the endpoint's answer."""
        if self.draining:
            return False, "draining: the Pod is stopping"
        if self.webhook and not self.listening:
            return False, "the webhook's listener is not open yet"
        return True, "ready" if self.webhook else "ready (no webhook is configured)"


async def serve(endpoint: str, readiness: Readiness) -> None:
    """Answer GET ``endpoint`` (``http://host:port/path``) until cancelled."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme != "http" or parts.port is None:
        raise ValueError(f"the readiness endpoint {endpoint!r} is not http://HOST:PORT/PATH")

    async def ready(request: aiohttp.web.Request) -> aiohttp.web.Response:
        ok, why = readiness.state()
        return aiohttp.web.Response(status=200 if ok else 503, text=why + "\n")

    app = aiohttp.web.Application()
    app.add_routes([aiohttp.web.get(parts.path or "/", ready)])
    runner = aiohttp.web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        site = aiohttp.web.TCPSite(runner, parts.hostname or "0.0.0.0", parts.port)
        await site.start()
        _log.info("readiness endpoint at %s", endpoint)
        await asyncio.Event().wait()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.shield(runner.cleanup())
