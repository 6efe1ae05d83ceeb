"""An HTTP proxy on loopback that puts chosen faults between a client and the test registry.

The real registry answers correctly; the faults a tag lister must survive (429 with
``Retry-After``, 5xx, a body cut short or not JSON, a ``Link`` that loops, a tag list
without end, a slow answer, a token that stops working) come from registries and proxies
on the way. This proxy forwards every request to the upstream registry unchanged, except
the ones a ``Fault`` matches, which it answers itself, so a test states exactly which
request fails and how many times.

It listens on 127.0.0.1 only, forwards to one upstream only, and keeps no bodies.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import StrEnum

import aiohttp
from aiohttp import web
from yarl import URL

from tests.harness.registry import BackgroundLoop

_FORWARDED = ("Content-Type", "Link", "WWW-Authenticate", "Retry-After", "Location")
_HOP_BY_HOP = {"host", "connection", "content-length", "transfer-encoding", "accept-encoding"}


class FaultKind(StrEnum):
    STATUS = "Status"  # answer `status` (with `headers`) instead of the registry
    CUT_CONNECTION = "CutConnection"  # announce the whole body, send half, close
    HALF_BODY = "HalfBody"  # send the first half of the body with a matching length
    NOT_JSON = "NotJson"  # 200 with an HTML page
    LINK_LOOP = "LinkLoop"  # the registry's answer, with Link pointing at this same page
    ENDLESS = "Endless"  # synthetic pages of `tags` tags, each linking to a new next page
    HUGE = "Huge"  # one synthetic page of `tags` tags, no Link
    SLOW = "Slow"  # wait `delay` seconds, then forward
    CHALLENGE = "Challenge"  # 401 with the registry's own challenge (a token gone stale)


@dataclass
class Fault:
    """Which requests a fault hits (path substring) and how many times (None: all)."""

    kind: FaultKind
    path_contains: str = "/tags/list"
    times: int | None = None
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    tags: int = 1000
    delay: float = 0.0
    hits: int = 0

    def matches(self, request: web.Request) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.path_contains not in request.path_qs:
            return False
        # an injected status hits any request; the other faults only requests past the
        # token dance (that carry a token), so `times=1` garbles the first real page
        return self.kind is FaultKind.STATUS or "Authorization" in request.headers


def status(code: int, *, retry_after: str | None = None, times: int | None = None) -> Fault:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Fault(kind=FaultKind.STATUS, status=code, headers=headers, times=times)


class FaultProxy:
    """``FaultProxy(upstream=registry.url)``; point the client at ``proxy.url``."""

    def __init__(self, *, upstream: str) -> None:
        self.upstream = URL(upstream)
        self.faults: list[Fault] = []
        self.requests = 0
        self.port = 0
        self._loop = BackgroundLoop("ichor-fault-proxy")
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def reference(self, repository: str) -> str:
        return f"{self.url}/{repository}"

    def set_faults(self, *faults: Fault) -> None:
        """Replace the faults (the first that matches a request answers it)."""
        self.faults = list(faults)
        self.requests = 0

    def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner, self.port = self._loop.run(self._loop.serve(app))

    def close(self) -> None:
        self._loop.run(self._shutdown())
        self._loop.close()

    async def _shutdown(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _forward(
        self, request: web.Request, *, drop_token: bool = False
    ) -> tuple[int, dict[str, str], bytes]:
        if self._session is None:
            self._session = aiohttp.ClientSession(trust_env=False, auto_decompress=False)
        dropped = _HOP_BY_HOP | ({"authorization"} if drop_token else set())
        headers = {k: v for k, v in request.headers.items() if k.lower() not in dropped}
        target = self.upstream.join(URL(request.path_qs, encoded=True))
        async with self._session.request(
            request.method,
            target,
            headers=headers,
            data=await request.read(),
            allow_redirects=False,
        ) as response:
            body = await response.read()
            kept = {k: response.headers[k] for k in _FORWARDED if k in response.headers}
            return response.status, kept, body

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        fault = next((f for f in self.faults if f.matches(request)), None)
        if fault is not None:
            fault.hits += 1
        try:
            return await self._answer(request, fault)
        except aiohttp.ClientError as error:
            return web.Response(status=502, text=f"upstream failed: {error}")

    async def _answer(self, request: web.Request, fault: Fault | None) -> web.StreamResponse:
        kind = fault.kind if fault is not None else None
        if fault is not None and kind is FaultKind.STATUS:
            error = {"errors": [{"code": "FAULT", "message": f"injected {fault.status}"}]}
            return web.json_response(error, status=fault.status, headers=fault.headers)
        if fault is not None and kind is FaultKind.NOT_JSON:
            return web.Response(
                status=200,
                text="<html><body>502 Bad Gateway</body></html>",
                content_type="text/html",
            )
        if fault is not None and kind in (FaultKind.ENDLESS, FaultKind.HUGE):
            start = int(request.query.get("last", "0") or 0)
            tags = [f"v0.0.{start + i}" for i in range(1, fault.tags + 1)]
            headers = {}
            if kind is FaultKind.ENDLESS:
                next_url = URL(request.path).with_query(last=str(start + fault.tags), n="1000")
                headers["Link"] = f'<{next_url}>; rel="next"'
            return web.json_response({"name": "endless", "tags": tags}, headers=headers)
        if fault is not None and kind is FaultKind.SLOW:
            await asyncio.sleep(fault.delay)
        # a stale token: the registry's own 401 and challenge, as if the token had expired
        code, headers, body = await self._forward(request, drop_token=kind is FaultKind.CHALLENGE)
        if fault is not None and kind is FaultKind.LINK_LOOP:
            headers["Link"] = f'<{request.path_qs}>; rel="next"'
        if fault is not None and kind is FaultKind.HALF_BODY:
            body = body[: len(body) // 2]
        if fault is not None and kind is FaultKind.CUT_CONNECTION:
            response = web.StreamResponse(status=code, headers=headers)
            response.content_length = len(body)
            await response.prepare(request)
            await response.write(body[: len(body) // 2])
            assert request.transport is not None
            request.transport.close()
            return response
        return web.Response(status=code, headers=headers, body=body)
