"""A TLS proxy on loopback between the operator and the API server, which counts the
operator's API calls and puts one fault at a chosen call: the test's seam, never shipped.

The operator's kubeconfig names the proxy (its own CA, no credential); the proxy calls
the API server as the operator (the operator account's client certificate), forwarding
every header (impersonation too), so RBAC sees the operator exactly as without it. Every
request but a watch is a *call*, numbered in the order it arrives. A ``Fault`` armed for
call N acts on it, once:

* ``before``: the operator is killed (SIGKILL) before the call reaches the API server;
* ``inflight``: the call is sent and answered, then the operator is killed before it
  reads the answer (the write happened; the operator never knew);
* ``after``: the answer is handed over, then the operator is killed;
* ``conflict``: the call meets 409. A create is sent first and answered "already
  exists" (an object of that name is there: its own, from an earlier life); any other
  write is answered "the object has been modified" without being sent;
* ``outage``: the call is held while ``on_outage`` runs (the test stops etcd or the
  API server and starts it again), then sent.

A review the operator's webhook asks for (a SubjectAccessReview) stores nothing, so it
is never answered 409. The proxy keeps the calls it saw (``Call``) for the report.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import aiohttp
import yaml
from aiohttp import web
from yarl import URL

from tests.harness import certs
from tests.harness.registry import BackgroundLoop

_HOP_BY_HOP = {
    "host", "connection", "content-length", "transfer-encoding", "accept-encoding",
    "keep-alive", "upgrade",
}  # fmt: skip
_ANSWER_DROPPED = {"content-length", "transfer-encoding", "connection", "content-encoding"}
#: Writes that store nothing: never answered 409.
_REVIEWS = ("subjectaccessreviews", "selfsubjectaccessreviews", "tokenreviews")
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Action(StrEnum):
    BEFORE = "before"
    INFLIGHT = "inflight"
    AFTER = "after"
    CONFLICT = "conflict"
    OUTAGE = "outage"


@dataclass(frozen=True)
class Call:
    """One call the proxy saw: its number, method and path (query dropped)."""

    number: int
    method: str
    path: str
    #: What the fault did to it, if it was the one.
    fault: Action | None = None

    @property
    def write(self) -> bool:
        return self.method in WRITES

    def __str__(self) -> str:
        mark = f" [{self.fault}]" if self.fault else ""
        return f"#{self.number} {self.method} {self.path}{mark}"


@dataclass
class Fault:
    """What to do at call ``at`` (counted from ``ApiProxy.arm``); ``writes``: count only
    writes (``conflict``: the N-th write); ``match``: count only the calls it says yes
    to, given the method, the path and the body (the Event creates of one reason, say)."""

    action: Action
    at: int
    writes: bool = False
    match: Callable[[str, str, bytes], bool] | None = None
    fired: threading.Event = field(default_factory=threading.Event)
    call: Call | None = None


def _is_watch(request: web.Request) -> bool:
    return request.method == "GET" and request.query.get("watch", "").lower() in ("true", "1")


def _status(code: int, reason: str, message: str) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    ).encode()


class ApiProxy:
    """``ApiProxy(server=..., ca_file=..., cert=..., key=..., workdir=...)``, ``start()``;
    point the operator at ``kubeconfig()``; ``arm(Fault)`` before the calls to count;
    ``kill`` is called (from the proxy's thread) to end the operator."""

    def __init__(
        self,
        *,
        server: str,
        ca_file: Path,
        cert: Path,
        key: Path,
        workdir: Path,
        kill: Callable[[], None] = lambda: None,
        on_outage: Callable[[], None] = lambda: None,
    ) -> None:
        self.upstream = URL(server)
        self.ca_file, self.cert, self.key = ca_file, cert, key
        self.workdir = workdir
        self.kill = kill
        self.on_outage = on_outage
        self.port = 0
        self.calls: list[Call] = []
        self.counting = False
        self.fault: Fault | None = None
        self._counted = 0
        self._writes = 0
        self._matched = 0
        self._lock = threading.Lock()
        self._loop = BackgroundLoop("ichor-api-proxy")
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._files = certs.write_serving_certificate(workdir / "proxy-tls")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # --- control, from the test's thread ---------------------------------------------------

    def arm(self, fault: Fault | None) -> None:
        """Count the calls from now on (from 1), with ``fault`` (None: count only)."""
        with self._lock:
            self.calls = []
            self._counted = 0
            self._writes = 0
            self._matched = 0
            self.fault = fault
            self.counting = True

    def disarm(self) -> list[Call]:
        """Stop counting; the calls counted since ``arm``."""
        with self._lock:
            self.counting = False
            self.fault = None
            return list(self.calls)

    def kubeconfig(self, path: Path, *, user: str = "ichor-operator") -> Path:
        """A kubeconfig naming the proxy, trusting its CA, with no credential (the proxy
        presents the operator's)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "proxy", "cluster": {
                    "server": self.url, "certificate-authority": str(self._files.ca)
                }}
            ],
            "users": [{"name": user, "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": user}}],
            "current-context": "proxy",
        }  # fmt: skip
        path.write_text(yaml.safe_dump(config))
        return path

    def start(self) -> ApiProxy:
        self._runner, self.port = self._loop.run(self._serve())
        return self

    def close(self) -> None:
        self._loop.run(self._shutdown())
        self._loop.close()

    def __enter__(self) -> ApiProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- serving ---------------------------------------------------------------------------

    async def _serve(self) -> tuple[web.AppRunner, int]:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # shutdown_timeout: a watch it relays ends only when the API server ends it
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self._files.cert, self._files.key)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context, reuse_address=True)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        return runner, int(server.sockets[0].getsockname()[1])

    async def _shutdown(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            context = ssl.create_default_context(cafile=str(self.ca_file))
            context.load_cert_chain(self.cert, self.key)
            self._session = aiohttp.ClientSession(
                trust_env=False,
                auto_decompress=False,
                connector=aiohttp.TCPConnector(ssl=context, limit=0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        return self._session

    def _count(self, request: web.Request, body: bytes) -> tuple[Call | None, Action | None]:
        """Number the call and say whether the fault is for it."""
        with self._lock:
            if not self.counting:
                return None, None
            self._counted += 1
            write = request.method in WRITES
            if write:
                self._writes += 1
            call = Call(self._counted, request.method, request.path)
            fault = self.fault
            action: Action | None = None
            eligible, number = False, 0
            if fault is not None and fault.match is not None:
                eligible = fault.match(request.method, request.path, body)
                self._matched += 1 if eligible else 0
                number = self._matched
            elif fault is not None:
                number = self._writes if fault.writes else self._counted
                eligible = write if fault.writes else True
            if fault is not None and not fault.fired.is_set() and eligible and number == fault.at:
                action = fault.action
                if action is Action.CONFLICT and any(r in request.path for r in _REVIEWS):
                    action = None  # nothing stored, nothing to conflict with: the next one
                    if fault.writes:
                        self._writes -= 1
                    else:
                        fault.at += 1
            if action is not None:
                call = Call(call.number, call.method, call.path, fault=action)
                assert fault is not None
                fault.call = call
            self.calls.append(call)
            return call, action

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if _is_watch(request):
            return await self._stream(request)
        body = await request.read()
        _, action = self._count(request, body)
        if action is Action.BEFORE:
            self._fire()
            return await self._dropped(request)
        if action is Action.OUTAGE:
            await asyncio.get_running_loop().run_in_executor(None, self.on_outage)
            self._fired()
        if action is Action.CONFLICT and request.method != "POST":
            self._fired()
            return web.Response(
                status=409, content_type="application/json",
                body=_status(409, "Conflict", f"Operation cannot be fulfilled on {request.path}: "
                             "the object has been modified; please apply your changes to the "
                             "latest version and try again (injected by the test's proxy)"),
            )  # fmt: skip
        try:
            status, headers, answer = await self._forward(request, body)
        except (aiohttp.ClientError, OSError, TimeoutError):
            return await self._dropped(request)
        if action is Action.INFLIGHT:
            self._fire()
            return await self._dropped(request)
        if action is Action.CONFLICT:
            self._fired()
            return web.Response(
                status=409, content_type="application/json",
                body=_status(409, "AlreadyExists", f"{request.path}: already exists "
                             "(injected by the test's proxy after the create was sent)"),
            )  # fmt: skip
        response = web.Response(status=status, headers=headers, body=answer)
        if action is Action.AFTER:
            await response.prepare(request)
            await response.write_eof()
            self._fire()
        return response

    def _fired(self) -> None:
        fault = self.fault
        if fault is not None:
            fault.fired.set()

    def _fire(self) -> None:
        self.kill()
        self._fired()

    async def _dropped(self, request: web.Request) -> web.StreamResponse:
        """No answer at all: the connection closes (the process it served is gone)."""
        if request.transport is not None:
            request.transport.close()
        raise web.HTTPBadGateway()  # never written: the transport is closed

    def _headers(self, request: web.Request) -> dict[str, str]:
        """The request's headers for the API server, asking for no compression: the
        answer is passed on as it comes, without its ``Content-Encoding``."""
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["Accept-Encoding"] = "identity"
        return headers

    async def _forward(
        self, request: web.Request, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        target = self.upstream.join(URL(request.path_qs, encoded=True))
        async with self._client().request(
            request.method, target, headers=self._headers(request), data=body or None,
            allow_redirects=False,
        ) as response:  # fmt: skip
            answer = await response.read()
            headers = {
                k: v for k, v in response.headers.items() if k.lower() not in _ANSWER_DROPPED
            }
            return response.status, headers, answer

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        """A watch: its events as they come, until either side closes."""
        target = self.upstream.join(URL(request.path_qs, encoded=True))
        try:
            upstream = await self._client().get(
                target, headers=self._headers(request), allow_redirects=False
            )
        except (aiohttp.ClientError, OSError, TimeoutError):
            return await self._dropped(request)
        async with upstream:
            headers = {
                k: v for k, v in upstream.headers.items() if k.lower() not in _ANSWER_DROPPED
            }
            response = web.StreamResponse(status=upstream.status, headers=headers)
            await response.prepare(request)
            with contextlib.suppress(aiohttp.ClientError, OSError, ConnectionError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            with contextlib.suppress(aiohttp.ClientError, OSError, ConnectionError):
                await response.write_eof()
            return response


def wait_fired(fault: Fault, *, within: float) -> bool:
    """Whether ``fault`` fired within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if fault.fired.wait(0.1):
            return True
    return fault.fired.is_set()
