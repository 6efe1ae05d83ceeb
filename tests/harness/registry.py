"""A real OCI registry on loopback, with bearer-token auth like ghcr.io, for tests and the demo.

The release check lists tags over the OCI distribution API, anonymously, through the token
dance ghcr.io uses (401 with a ``Bearer`` challenge, a token from the realm, the request
again). This module runs the CNCF distribution registry v3 (built by ``make testenv``; it
pages tag lists with ``Link``) with ``auth: token``, and a tiny token server that signs
JWTs with a key whose certificate the registry trusts:

- anonymous callers get ``pull`` (except on repositories under ``private/``, which stand
  for a private mirror and need the seeding credentials);
- the seeding credentials (HTTP basic to the realm) get ``pull`` and ``push``.

Seeding pushes one tiny OCI image (a config blob and a layer blob, uploaded once) and PUTs
the same manifest under every tag, concurrently: 2,500 tags take seconds.

It refuses to listen anywhere but 127.0.0.1, never reaches the network, and never skips a
test quietly: a missing registry binary raises ``MissingBinaryError`` naming
``make testenv``.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import ctypes
import datetime
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Coroutine, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec
from yarl import URL

from tests.harness import binaries, certs

#: Release repositories on a closed loopback port: a release check of a test's chart or
#: IchorInstallation fails at once instead of sending traffic off the machine.
OFFLINE_REPOSITORIES = {
    "talosRepository": "127.0.0.1:1/siderolabs/installer-base",
    "kubernetesRepository": "127.0.0.1:1/siderolabs/kubelet",
    "chartRepository": "127.0.0.1:1/ichor-dev/charts/ichor",
}

T = TypeVar("T")

SERVICE = "ichor-test-registry"
ISSUER = "ichor-test-token-server"
TOKEN_LIFETIME_S = 300
PRIVATE_PREFIX = "private/"
SEED_USER = "seed"

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG_BLOB = b"{}"
LAYER_BLOB = b"ichor test layer\n"


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the starting thread ends (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def basic_auth(user: str, password: str) -> str:
    """An HTTP basic ``Authorization`` value."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _b64url_uint(value: int) -> str:
    # Go's big.Int.Bytes(): minimal big-endian bytes, no left padding.
    raw = value.to_bytes((value.bit_length() + 7) // 8 or 1, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jwk_thumbprint(key: ec.EllipticCurvePublicKey) -> str:
    """The key ID distribution v3 gives a root certificate's key (its ``GetJWKThumbprint``).

    RFC 7638 over ``{"crv","kty","x","y"}`` with SHA-256, base64url without padding; the
    coordinates are encoded without left padding, exactly as the registry computes them.
    """
    numbers = key.public_numbers()
    curve = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}[key.curve.name]
    payload = (
        f'{{"crv":"{curve}","kty":"EC","x":"{_b64url_uint(numbers.x)}",'
        f'"y":"{_b64url_uint(numbers.y)}"}}'
    )
    digest = hashlib.sha256(payload.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _parse_scope(scope: str) -> tuple[str, str, list[str]] | None:
    # repository:NAME:ACTIONS, where NAME may itself hold a ':' only for a port-less name.
    kind, sep, rest = scope.partition(":")
    name, sep2, actions = rest.rpartition(":")
    if not (sep and sep2 and kind and name):
        return None
    return kind, name, [a for a in actions.split(",") if a]


class TokenServer:
    """Docker/OCI token endpoint (``GET /token?service=..&scope=..``) for the test registry.

    Counts the tokens it issues so tests can prove a client caches them.
    """

    def __init__(self, *, key: certs.SigningKey, seed_password: str) -> None:
        self.key = key
        #: The ``kid`` of its tokens: the key ID the registry gives its root certificate.
        self.key_id = jwk_thumbprint(key.public_key())
        self.seed_password = seed_password
        self.issued = 0
        self.refused = 0
        self.port = 0

    @property
    def realm(self) -> str:
        # A host name, not 127.0.0.1: crane (go-containerregistry >= 0.21) refuses a realm
        # that is a private or loopback IP literal unless it is the registry's own host:port.
        return f"http://localhost:{self.port}/token"

    def _authenticated(self, request: web.Request) -> bool | None:
        header = request.headers.get("Authorization")
        if header is None:
            return False
        scheme, _, encoded = header.partition(" ")
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode()
        except ValueError:
            return None
        user, _, password = decoded.partition(":")
        if scheme.lower() != "basic" or user != SEED_USER:
            return None
        return secrets.compare_digest(password, self.seed_password) or None

    def grant(self, *, name: str, actions: list[str], seeding: bool) -> list[str]:
        if seeding:
            return [a for a in actions if a in ("pull", "push", "delete", "*")]
        if name.startswith(PRIVATE_PREFIX):
            return []
        return [a for a in actions if a == "pull"]

    def sign(self, *, access: list[dict[str, Any]], subject: str) -> str:
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": subject,
            "aud": SERVICE,
            "iat": now,
            "nbf": now - 5,
            "exp": now + TOKEN_LIFETIME_S,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        return jwt.encode(claims, self.key.private, algorithm="ES256", headers={"kid": self.key_id})

    async def handle(self, request: web.Request) -> web.Response:
        seeding = self._authenticated(request)
        if seeding is None:
            self.refused += 1
            return web.json_response(
                {"errors": [{"code": "UNAUTHORIZED", "message": "wrong credentials"}]},
                status=401,
                headers={"WWW-Authenticate": 'Basic realm="ichor-test-token-server"'},
            )
        if request.query.get("service", SERVICE) != SERVICE:
            return web.json_response({"errors": [{"code": "DENIED"}]}, status=400)
        access: list[dict[str, Any]] = []
        for scope in request.query.getall("scope", []):
            for single in scope.split(" "):
                parsed = _parse_scope(single)
                if parsed is None:
                    continue
                kind, name, actions = parsed
                if kind != "repository":
                    continue
                granted = self.grant(name=name, actions=actions, seeding=seeding)
                if granted:
                    access.append({"type": kind, "name": name, "actions": granted})
        token = self.sign(access=access, subject=SEED_USER if seeding else "")
        self.issued += 1
        return web.json_response(
            {
                "token": token,
                "access_token": token,
                "expires_in": TOKEN_LIFETIME_S,
                "issued_at": datetime.datetime.now(datetime.UTC).isoformat(),
            }
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/token", self.handle)
        return app


class BackgroundLoop:
    """An event loop on its own thread, for servers that must answer while a test blocks.

    A sync test (or one waiting on ``kubectl``) would starve a server running on the
    test's own loop; this one keeps serving.
    """

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.submit(coro).result()

    async def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self.submit(coro))

    async def serve(self, app: web.Application, *, port: int = 0) -> tuple[web.AppRunner, int]:
        """Serve ``app`` on 127.0.0.1 (call through ``run``); returns the runner and port."""
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, reuse_address=True)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        bound: int = server.sockets[0].getsockname()[1]
        return runner, bound

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image_manifest() -> bytes:
    """The one tiny OCI image manifest every seeded tag points at."""
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": OCI_CONFIG,
                "digest": _sha256(CONFIG_BLOB),
                "size": len(CONFIG_BLOB),
            },
            "layers": [
                {"mediaType": OCI_LAYER, "digest": _sha256(LAYER_BLOB), "size": len(LAYER_BLOB)}
            ],
        },
        separators=(",", ":"),
    ).encode()


class RegistryError(RuntimeError):
    """The test registry did not start or refused a seeding request."""


class LocalRegistry:
    """The distribution v3 registry plus its token server, on free loopback ports.

    ``start()``/``stop()`` start and stop only the registry process (the store and port are
    kept), so a test can make it unreachable and bring it back. ``close()`` ends it all.
    """

    def __init__(self, *, workdir: Path | None = None, max_tags_per_page: int = 1000) -> None:
        self.binary = binaries.find("registry")
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="ichor-registry-"))
        self.store = self.workdir / "store"
        self.store.mkdir(parents=True, exist_ok=True)
        self.max_tags_per_page = max_tags_per_page
        self.seed_password = secrets.token_urlsafe(16)
        self.key = certs.SigningKey.create()
        (self.workdir / "root.crt").write_bytes(self.key.self_signed(ISSUER))
        self.tokens = TokenServer(key=self.key, seed_password=self.seed_password)
        self.port = free_port()
        self.log_path = self.workdir / "registry.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._loop = BackgroundLoop("ichor-test-token-server")
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._seeded: set[str] = set()
        self._started = False

    # -- addresses ---------------------------------------------------------------

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def reference(self, repository: str) -> str:
        """The reference a client lists: ``http://127.0.0.1:PORT/<repository>``."""
        return f"{self.url}/{repository}"

    @property
    def seed_credentials(self) -> tuple[str, str]:
        """User and password the token server grants push and private pulls to."""
        return SEED_USER, self.seed_password

    # -- lifecycle ---------------------------------------------------------------

    def _config(self) -> str:
        config = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.store)},
                "delete": {"enabled": True},
                "maintenance": {"uploadpurging": {"enabled": False}},
                "cache": {"blobdescriptor": "inmemory"},
            },
            "http": {"addr": self.host, "secret": secrets.token_hex(16)},
            "auth": {
                "token": {
                    "realm": self.tokens.realm,
                    "service": SERVICE,
                    "issuer": ISSUER,
                    "rootcertbundle": str(self.workdir / "root.crt"),
                }
            },
            "tags": {"maxtags": self.max_tags_per_page},
        }
        return json.dumps(config, indent=2)  # JSON is YAML

    def start(self, *, timeout: float = 20.0) -> None:
        """Start the token server (once) and the registry; return when /v2/ answers 401.

        The first start moves to another free port if its port was taken meanwhile; a
        restart after ``stop()`` keeps its port (clients hold references to it).
        """
        if self._runner is None:
            self._runner, self.tokens.port = self._loop.run(self._loop.serve(self.tokens.app()))
        if self._process is not None and self._process.poll() is None:
            return
        for attempt in range(3):
            try:
                self._spawn(timeout)
            except RegistryError as error:
                if self._started or attempt == 2 or "address already in use" not in str(error):
                    raise
                self.port = free_port()
            else:
                self._started = True
                return

    def _spawn(self, timeout: float) -> None:
        config = self.workdir / "config.yml"
        config.write_text(self._config())
        env = {
            **os.environ,
            "OTEL_SDK_DISABLED": "true",
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
        }
        with self.log_path.open("ab") as log:
            # PR_SET_PDEATHSIG follows the starting thread: only the main thread lives as
            # long as the interpreter, so only there does the registry die with us
            main = threading.current_thread() is threading.main_thread()
            self._process = subprocess.Popen(
                [str(self.binary), "serve", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.workdir,
                preexec_fn=_die_with_parent if main else None,
            )
        atexit.register(self.stop)
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RegistryError(
                    f"registry exited with {self._process.returncode}: {self._log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"GET /v2/ HTTP/1.0\r\nHost: x\r\n\r\n")
                    status_line = sock.recv(64).split(b"\r\n", 1)[0].decode(errors="replace")
                if " 401 " in status_line + " ":
                    return
                last = status_line
            except OSError as error:
                last = str(error)
            time.sleep(0.05)
        raise RegistryError(
            f"registry on {self.host} not ready after {timeout} s ({last}): {self._log_tail()}"
        )

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the registry process (its store and port stay); a client now finds it
        unreachable."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def close(self) -> None:
        self.stop()
        atexit.unregister(self.stop)
        if self._session is not None or self._runner is not None:
            self._loop.run(self._shutdown())
        self._loop.close()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    async def _shutdown(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def __enter__(self) -> LocalRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- seeding -----------------------------------------------------------------

    def seed(self, repository: str, tags: Iterable[str], *, concurrency: int = 16) -> None:
        """Push the tiny image under every tag of ``repository`` (blocking; any thread)."""
        self._loop.run(self._seed(repository, list(tags), concurrency=concurrency))

    async def aseed(self, repository: str, tags: Iterable[str], *, concurrency: int = 16) -> None:
        """``seed`` for async tests: runs on the registry's own loop, awaits it here."""
        await self._loop.run_async(self._seed(repository, list(tags), concurrency=concurrency))

    async def _push_token(self, session: aiohttp.ClientSession, repository: str) -> str:
        async with session.get(
            self.tokens.realm,
            params={"service": SERVICE, "scope": f"repository:{repository}:pull,push"},
            headers={"Authorization": basic_auth(SEED_USER, self.seed_password)},
        ) as response:
            response.raise_for_status()
            body = await response.json()
            token: str = body["token"]
            return token

    async def _seed(self, repository: str, tags: list[str], *, concurrency: int) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=concurrency), trust_env=False
            )
        session = self._session
        headers = {"Authorization": f"Bearer {await self._push_token(session, repository)}"}
        base = f"{self.url}/v2/{repository}"
        if repository not in self._seeded:
            for blob in (CONFIG_BLOB, LAYER_BLOB):
                await self._upload_blob(session, base=base, blob=blob, headers=headers)
            self._seeded.add(repository)
        manifest = image_manifest()
        put_headers = {**headers, "Content-Type": OCI_MANIFEST}
        semaphore = asyncio.Semaphore(concurrency)

        async def put(tag: str) -> None:
            async with (
                semaphore,
                session.put(f"{base}/manifests/{tag}", data=manifest, headers=put_headers) as r,
            ):
                if r.status != 201:
                    raise RegistryError(
                        f"PUT manifest {repository}:{tag}: {r.status} {await r.text()}"
                    )

        await _gather_all([put(tag) for tag in tags])

    async def _upload_blob(
        self, session: aiohttp.ClientSession, *, base: str, blob: bytes, headers: dict[str, str]
    ) -> None:
        async with session.post(f"{base}/blobs/uploads/", headers=headers) as response:
            if response.status != 202:
                raise RegistryError(f"start upload: {response.status} {await response.text()}")
            location = response.headers["Location"]
        upload = str(response.url.join(URL(location)))
        separator = "&" if "?" in upload else "?"
        async with session.put(
            f"{upload}{separator}digest={_sha256(blob)}",
            data=blob,
            headers={**headers, "Content-Type": "application/octet-stream"},
        ) as response:
            if response.status != 201:
                raise RegistryError(f"finish upload: {response.status} {await response.text()}")


async def _gather_all(coros: list[Awaitable[None]]) -> None:
    """Run all; on the first failure cancel the rest and raise it."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks, return_exceptions=True)


def _main(argv: list[str] | None = None) -> int:
    """``python -m tests.harness.registry [--seed REPO=N ...]``: run until interrupted."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", action="append", default=[], metavar="REPO=N")
    args = parser.parse_args(argv)
    with LocalRegistry() as registry:
        for item in args.seed:
            repository, _, count = item.partition("=")
            registry.seed(repository, [f"v1.0.{i}" for i in range(int(count or 10))])
        print(f"registry: {registry.url} (token realm {registry.tokens.realm})", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
