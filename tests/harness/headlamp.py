"""A loopback stand-in for Headlamp's backend, serving the Ichor plugin to a browser.

Headlamp's own backend (a Go server) is not served by the Go module proxy, so the
browser test cannot run it. This plays the part of it the plugin meets, with Headlamp's
own URL layout: ``/config`` (one cluster), ``/plugins`` and ``/plugins/ichor/main.js``
(the built plugin, as ``headlamp-plugin build`` leaves it), and ``/clusters/<name>/...``
proxied to the API server. Everything else is the host page (ui/headlamp/harness), which
runs the plugin with Headlamp's frontend library.

Each stand-in acts as the one user of the kubeconfig it is given, as Headlamp's backend
does with a kubeconfig context: the proxy presents that user's client certificate, so
the browser holds no credential and cannot choose another user (a request's own
``Authorization``, cookies and impersonation headers are dropped). Only ``127.0.0.1``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from tests.harness import controlplane

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "ui" / "headlamp"
PAGE = PLUGIN / "build" / "harness"
CLUSTER = "test"
PLUGIN_NAME = "ichor"
#: The largest request body passed on (a TalosOperation or an access review is < 2 KiB).
MAX_BODY = 256 * 1024
#: Seconds one proxied request may take.
TIMEOUT = 30.0
#: Headers of the API server's answer the browser gets; the rest stays here.
PASSED_BACK = ("Content-Type", "Warning")
#: Headers of the browser's request the API server gets.
PASSED_ON = ("Content-Type", "Accept")
_PORT_ATTEMPTS = 3


def chromium_path() -> str:
    """The browser the test drives: Debian's chromium, or ``$ICHOR_CHROMIUM``."""
    return os.environ.get("ICHOR_CHROMIUM") or "/usr/bin/chromium"


class MissingBuild(RuntimeError):
    """The plugin or the host page was not built: says what to run."""


@dataclass(frozen=True)
class User:
    """Who the stand-in acts as: the API server, its CA and a client certificate."""

    name: str
    server: str
    context: ssl.SSLContext

    @classmethod
    def from_kubeconfig(cls, path: Path, workdir: Path) -> User:
        """The current context's user of a self-contained kubeconfig (embedded data)."""
        config: dict[str, Any] = yaml.safe_load(path.read_text())
        current = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == current)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        if "as" in user or "token" in user:
            raise ValueError(f"{path}: the stand-in presents a client certificate only")
        workdir.mkdir(parents=True, exist_ok=True)
        files = {}
        for key in ("client-certificate-data", "client-key-data"):
            written = workdir / f"{context['user']}.{key}.pem"
            written.write_bytes(base64.b64decode(user[key]))
            written.chmod(0o600)
            files[key] = written
        ssl_context = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        ssl_context.load_cert_chain(files["client-certificate-data"], files["client-key-data"])
        return cls(name=context["user"], server=cluster["server"].rstrip("/"), context=ssl_context)


def check_built() -> None:
    """Fail with the command to run when the plugin or the host page is missing."""
    missing = [
        str(path.relative_to(ROOT))
        for path in (PLUGIN / "dist" / "main.js", PAGE / "index.html")
        if not path.is_file()
    ]
    if missing:
        raise MissingBuild(f"{', '.join(missing)} missing: run `make ui` (npm ci and the builds)")


class StandIn:
    """One user's Headlamp backend on a free loopback port (``url``)."""

    def __init__(self, user: User) -> None:
        check_built()
        self.user = user
        self.requests: list[tuple[str, str]] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_get("/config", self._config)
        app.router.add_get("/plugins", self._plugins)
        app.router.add_get(f"/plugins/{PLUGIN_NAME}/main.js", self._main_js)
        app.router.add_get(f"/plugins/{PLUGIN_NAME}/package.json", self._package_json)
        app.router.add_route("*", f"/clusters/{CLUSTER}/{{tail:.*}}", self._proxy)
        app.router.add_static("/assets", PAGE / "assets")
        app.router.add_get("/{tail:.*}", self._page)
        return app

    async def start(self) -> StandIn:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=TIMEOUT),
            connector=aiohttp.TCPConnector(ssl=self.user.context),
        )
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        for attempt in range(_PORT_ATTEMPTS):
            port = controlplane.free_port()
            try:
                await web.TCPSite(self._runner, "127.0.0.1", port).start()
            except OSError:
                if attempt == _PORT_ATTEMPTS - 1:
                    raise
                continue
            break
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    # -- what Headlamp's backend serves -----------------------------------------------

    async def _config(self, _: web.Request) -> web.Response:
        cluster = {"name": CLUSTER, "server": self.user.server, "auth_type": ""}
        return web.json_response({"clusters": [cluster], "isDynamicClusterEnabled": False})

    async def _plugins(self, _: web.Request) -> web.Response:
        return web.json_response(
            [{"name": PLUGIN_NAME, "path": f"plugins/{PLUGIN_NAME}", "type": "development"}]
        )

    async def _main_js(self, _: web.Request) -> web.FileResponse:
        return web.FileResponse(PLUGIN / "dist" / "main.js")

    async def _package_json(self, _: web.Request) -> web.FileResponse:
        return web.FileResponse(PLUGIN / "package.json")

    async def _page(self, _: web.Request) -> web.FileResponse:
        return web.FileResponse(PAGE / "index.html")

    # -- the proxy ----------------------------------------------------------------------

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        tail = request.match_info["tail"]
        target = f"{self.user.server}/{tail}"
        self.requests.append((request.method, f"/{tail}?{request.query_string}"))
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._websocket(request, target)
        assert self._session is not None
        headers = {k: request.headers[k] for k in PASSED_ON if k in request.headers}
        body = await request.read() if request.can_read_body else None
        try:
            async with self._session.request(
                request.method,
                target,
                params=request.query,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=TIMEOUT),
            ) as answer:
                data = await answer.read()
                out = web.Response(status=answer.status, body=data)
                for name in PASSED_BACK:
                    for value in answer.headers.getall(name, []):
                        out.headers.add(name, value)
                return out
        except (aiohttp.ClientError, TimeoutError) as error:
            return web.json_response(
                {"kind": "Status", "status": "Failure", "message": f"proxy: {error}"}, status=502
            )

    async def _websocket(self, request: web.Request, target: str) -> web.StreamResponse:
        """A watch over a WebSocket, relayed both ways (Headlamp's lists watch this way)."""
        assert self._session is not None
        protocols = [
            p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")
        ]
        # Headlamp adds a protocol carrying a token when it stores one; this user has none.
        kept = tuple(p for p in protocols if p and not p.startswith("base64url.headlamp"))
        browser = web.WebSocketResponse(protocols=kept, max_msg_size=16 * 1024 * 1024)
        await browser.prepare(request)
        # kube-apiserver's watch over a WebSocket (golang.org/x/net/websocket) refuses a
        # handshake without an Origin; the browser's is passed on, as Headlamp's proxy does.
        origin = {"Origin": request.headers["Origin"]} if "Origin" in request.headers else {}
        try:
            upstream = await self._session.ws_connect(
                target.replace("https://", "wss://", 1),
                params=request.query,
                protocols=kept,
                headers=origin,
                max_msg_size=16 * 1024 * 1024,
            )
        except (aiohttp.ClientError, TimeoutError):
            await browser.close()
            return browser

        async def pump(source: Any, sink: Any) -> None:
            async for message in source:
                if message.type == aiohttp.WSMsgType.TEXT:
                    await sink.send_str(message.data)
                elif message.type == aiohttp.WSMsgType.BINARY:
                    await sink.send_bytes(message.data)
                else:
                    break

        tasks = [
            asyncio.create_task(pump(upstream, browser)),
            asyncio.create_task(pump(browser, upstream)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await upstream.close()
            await browser.close()
        return browser


@asynccontextmanager
async def serving(kubeconfig: Path) -> AsyncIterator[StandIn]:
    """A stand-in acting as the user of ``kubeconfig``, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="headlamp-standin-") as workdir:
        stand_in = StandIn(User.from_kubeconfig(kubeconfig, Path(workdir)))
        await stand_in.start()
        try:
            yield stand_in
        finally:
            await stand_in.stop()


def main() -> None:
    """``python -m tests.harness.headlamp KUBECONFIG``: serve the plugin as that user."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kubeconfig", type=Path)
    args = parser.parse_args()

    async def run() -> None:
        async with serving(args.kubeconfig) as stand_in:
            print(json.dumps({"url": f"{stand_in.url}/c/{CLUSTER}/ichor/clusters"}), flush=True)
            await asyncio.Event().wait()

    with suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
