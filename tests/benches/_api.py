"""What the benches share: the API server as a bare asyncio client sees it, and quantiles.

A bench's own client is aiohttp alone (no kubernetes client, no kopf), so its requests
cost the shared CPU as little as they can and stand for the limit a Python client has.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from ichor.api import kinds
from tests.harness import controlplane

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

    @classmethod
    def admin_of(cls, plane: controlplane.ControlPlane) -> Endpoint:
        """``plane``'s admin (system:masters)."""
        cert, key = plane.pki / "admin.crt", plane.pki / "admin.key"
        return cls.of(server=plane.server, ca_file=plane.ca_file, cert=cert, key=key)

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


class Profile:
    """py-spy recording a bench's child process while ``ICHOR_BENCH_PROFILE`` names a
    folder (nothing otherwise): collapsed stacks in ``<folder>/<name>.txt`` (for a flame
    graph: ``flamegraph.pl`` or speedscope) and the frames that took most samples.

    py-spy, not an in-process profiler: it samples the operator as it runs (no hook in
    its event loop, no slowdown of the code measured), sees time in C and the GC, and
    attaches to the child by pid.
    """

    def __init__(self, name: str) -> None:
        folder = os.environ.get("ICHOR_BENCH_PROFILE")
        self.output = Path(folder) / f"{name}.txt" if folder else None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, pid: int) -> None:
        if self.output is None:
            return
        self.output.parent.mkdir(parents=True, exist_ok=True)
        spy = Path(sys.executable).with_name("py-spy")
        self._process = subprocess.Popen(
            [str(spy), "record", "--pid", str(pid), "--rate", "200", "--format", "raw",
             "--nonblocking", "--output", str(self.output)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def stop(self) -> list[str]:
        """The top frames by self and by total samples (empty without a profile)."""
        if self._process is None or self.output is None:
            return []
        self._process.send_signal(signal.SIGINT)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
        if not self.output.exists():
            return [f"profile: py-spy wrote nothing to {self.output}"]
        return top_frames(self.output.read_text().splitlines())


def top_frames(collapsed: list[str], *, count: int = 12) -> list[str]:
    """The frames of collapsed stacks (``a;b;c N``) most often on top and most often in
    the stack, as percentages of all samples."""
    own: dict[str, int] = {}
    inside: dict[str, int] = {}
    total = 0
    for line in collapsed:
        stack, _, number = line.rpartition(" ")
        if not stack or not number.isdigit():
            continue
        samples = int(number)
        total += samples
        frames = stack.split(";")
        own[frames[-1]] = own.get(frames[-1], 0) + samples
        for frame in set(frames):
            inside[frame] = inside.get(frame, 0) + samples
    if not total:
        return ["profile: no samples"]
    lines = [f"profile: {total} samples; self:"]
    for frame, samples in sorted(own.items(), key=lambda kv: -kv[1])[:count]:
        lines.append(f"  {samples * 100 / total:5.1f}% {frame}")
    lines.append("profile: total (in the stack):")
    for frame, samples in sorted(inside.items(), key=lambda kv: -kv[1])[: count * 2]:
        lines.append(f"  {samples * 100 / total:5.1f}% {frame}")
    return lines
