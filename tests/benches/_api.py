"""What the benches share: the API server as a bare asyncio client sees it, and quantiles.

A bench's own client is aiohttp alone (no kubernetes client, no kopf), so its requests
cost the shared CPU as little as they can and stand for the limit a Python client has.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from ichor.api import kinds

MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class Endpoint:
    """An API server and the client certificate a bench calls it with."""

    server: str
    context: ssl.SSLContext

    @classmethod
    def of(cls, *, server: str, ca_file: Path, cert: Path, key: Path) -> Endpoint:
        context = ssl.create_default_context(cafile=str(ca_file))
        context.load_cert_chain(str(cert), str(key))
        return cls(server=server.rstrip("/"), context=context)

    def session(self, *, limit: int = 100) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            base_url=self.server,
            connector=aiohttp.TCPConnector(ssl=self.context, limit=limit),
            timeout=aiohttp.ClientTimeout(total=60),
        )


def clusters_path(namespace: str, name: str = "") -> str:
    base = f"/apis/{kinds.GROUP}/{kinds.VERSION}/namespaces/{namespace}/talosclusters"
    return f"{base}/{name}" if name else base


async def call(
    session: aiohttp.ClientSession, method: str, path: str, body: object = None, **kw: Any
) -> Any:
    """The JSON answer of one request; an error status raises (a POST's 409 does not:
    the object is there already)."""
    headers = {"Content-Type": MERGE if method == "PATCH" else "application/json"}
    data = None if body is None else json.dumps(body)
    async with session.request(method, path, data=data, headers=headers, **kw) as response:
        text = await response.text()
        if response.status >= 400 and not (method == "POST" and response.status == 409):
            raise RuntimeError(f"{method} {path}: {response.status} {text[:300]}")
        return json.loads(text) if text else None


async def pool(count: int, concurrency: int, one: Callable[[int], Awaitable[None]]) -> None:
    """``one(i)`` for every i in range(count), on ``concurrency`` workers."""
    indices = iter(range(count))

    async def worker() -> None:
        for i in indices:
            await one(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def quantiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 (nearest rank)."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    p50 = ordered[(len(ordered) - 1) // 2]
    p99 = ordered[min(len(ordered) - 1, max(0, -(-99 * len(ordered) // 100) - 1))]
    return p50, p99
