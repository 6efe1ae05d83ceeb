"""Hostile load on the operator the chart describes: sixteen concurrent reviews of the
largest size the webhook reads, a thousand connections that never start TLS, and two
hundred that declare the largest body and stop half way each keep the process under the
chart's memory limit (and its growth small), and ordinary reviews sent meanwhile, each
on a connection of its own, are still answered in time.

A second operator process is started for this test alone (the chart's environment, its
ServiceAccount, mutual TLS as installed), so its peak RSS (``VmHWM``) is this load's and
nothing else's. The reviews go straight to its port with the API server's client
certificate: the API server itself would cap a body at 3 MiB, a caller that holds the
certificate need not.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import ssl
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from ichor.webhook import budget, connections, intake
from tests.component.chart import helm
from tests.component.chart.conftest import Installed, start_operator, stop_operator
from tests.fixtures.fuzzing import figure
from tests.harness import controlplane

pytestmark = pytest.mark.component

HOSTILE = 16
ORDINARY = 24
#: Connections that never send a TLS ClientHello.
IDLE = 1_000
#: Connections that declare a body of the largest size and send a part of it.
SLOW = 200
SLOW_PART = 1024 * 1024
#: How much a load of callers that never finish TLS may grow the operator's RSS: the
#: connections it holds at once are few, each one's buffers small.
HOSTILE_GROWTH = 64 * 1024 * 1024
#: How much slow bodies of callers past their TLS handshake may grow it: the review
#: budget, and every place's TLS buffer (asyncio's 256 KiB) and request buffers. (These
#: callers handshake as quickly as the API server, so none of them is dropped for it: a
#: burst of the API server's own new connections must be answered.)
SLOW_GROWTH = budget.BUDGET_BYTES + connections.MAX_CONNECTIONS * 384 * 1024
#: A connection that never starts its TLS handshake is closed by the server within this.
CLOSED_WITHIN = 6.0
#: The API server waits this long for an answer (the chart's webhook.timeoutSeconds).
ANSWER_WITHIN = 5.0
_UNITS = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


def chart_memory_limit() -> int:
    """``resources.limits.memory`` of the chart's values.yaml, in bytes."""
    values = yaml.safe_load((helm.CHART / "values.yaml").read_text())
    text: str = values["resources"]["limits"]["memory"]
    found = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", text)
    assert found, f"resources.limits.memory {text!r} is not <n>Ki/Mi/Gi"
    return int(found[1]) * _UNITS[found[2]]


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in bytes: now and the peak since it started."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)[1])  # type: ignore[index]
    hwm = int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)[1])  # type: ignore[index]
    return rss * 1024, hwm * 1024


def review(namespace: str, *, pad: str = "", name: str = "load") -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosCluster",
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
        },
    }
    if pad:
        cluster["metadata"]["annotations"] = {"pad": pad}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
            "resource": {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"},
            "namespace": namespace,
            "name": name,
            "operation": "CREATE",
            "userInfo": {"username": "load-test"},
            "object": cluster,
            "dryRun": True,
        },
    }


def largest(namespace: str, *, unit: str) -> bytes:
    """A review of exactly ``MAX_REVIEW_BYTES``, padded with ``unit`` (ASCII, or a
    character UTF-8 writes in 4 bytes and Python holds in 4, the costliest to parse)."""
    empty = json.dumps(review(namespace, pad="."), ensure_ascii=False).encode()
    room = intake.MAX_REVIEW_BYTES - len(empty) + 1
    width = len(unit.encode())
    pad = unit * (room // width) + "." * (room % width)
    body = json.dumps(review(namespace, pad=pad), ensure_ascii=False).encode()
    assert len(body) == intake.MAX_REVIEW_BYTES, len(body)
    return body


def many_values(namespace: str) -> bytes:
    """Just under the cap, and far more JSON values than any object holds."""
    body = json.dumps(review(namespace, pad="x")).encode()
    filler = b"[" + b",".join([b"{}"] * (intake.MAX_REVIEW_BYTES // 4)) + b"]"
    return body.replace(b'"pad": "x"', b'"pad": ' + filler)[: intake.MAX_REVIEW_BYTES]


async def post(
    session: aiohttp.ClientSession, url: str, body: bytes, context: ssl.SSLContext
) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    async with session.post(
        f"{url}/taloscluster",
        data=io.BytesIO(body),
        ssl=context,
        headers={"Content-Type": "application/json"},
    ) as response:
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = await response.json()
    return time.monotonic() - started, answer


@pytest.fixture
def second_operator(installed: Installed, tmp_path: Path) -> Any:
    ports = {name: controlplane.free_port() for name in ("webhook", "healthz", "metrics")}
    operator, log = start_operator(
        installed.plane,
        installed.manifest,
        namespace=installed.namespace,
        workdir=tmp_path,
        ports=ports,
    )
    try:
        yield (
            operator,
            f"https://127.0.0.1:{ports['webhook']}",
            tmp_path / "webhook-tls" / "ca.crt",
            log,
        )
    finally:
        stop_operator(operator)


async def test_sixteen_largest_reviews_stay_under_the_memory_limit_and_ordinary_ones_are_answered(
    installed: Installed, second_operator: Any
) -> None:
    operator, url, serving_ca, log = second_operator
    limit = chart_memory_limit()
    context = installed.plane.webhook_caller_context(serving_ca=serving_ca)
    namespace = installed.namespace
    shapes = [
        largest(namespace, unit="x"),
        largest(namespace, unit="\U0001f600"),
        many_values(namespace),
    ]
    hostile = [shapes[i % len(shapes)] for i in range(HOSTILE)]
    ordinary = json.dumps(review(namespace, name="ordinary")).encode()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        # warm: the first review loads what the handlers import
        await post(session, url, ordinary, context)
        rss_before, _ = memory(operator.pid)

        async def ordinary_stream() -> list[tuple[float, dict[str, Any]]]:
            answers = []
            for _ in range(ORDINARY):
                answers.append(await post(session, url, ordinary, context))
                await asyncio.sleep(0.05)
            return answers

        storm = [asyncio.create_task(post(session, url, body, context)) for body in hostile]
        await asyncio.sleep(0.05)  # the large ones are in flight first
        answered = await ordinary_stream()
        hostile_answers = await asyncio.gather(*storm)
    rss_after, peak = memory(operator.pid)
    figure(
        f"webhook load: {HOSTILE} concurrent reviews of {intake.MAX_REVIEW_BYTES:,} bytes and "
        f"{ORDINARY} ordinary ones: operator RSS {rss_before / 2**20:.0f} MiB before, peak "
        f"{peak / 2**20:.0f} MiB (limit {limit / 2**20:.0f} MiB), {rss_after / 2**20:.0f} MiB after"
    )
    assert operator.poll() is None, log.read_text()
    assert peak < limit, f"peak RSS {peak / 2**20:.0f} MiB over the chart's limit"
    for seconds, answer in answered:
        assert seconds < ANSWER_WITHIN, f"an ordinary review took {seconds:.1f} s"
        assert answer["response"]["allowed"] is True, answer
    outcomes: dict[str, int] = {}
    for _, answer in hostile_answers:
        body = answer["response"]
        assert isinstance(body["allowed"], bool)
        if not body["allowed"]:
            message = body["status"]["message"]
            assert message.strip()
            key = "busy" if "retry the write" in message else message.split(":")[1][:40]
        else:
            key = "allowed"
        outcomes[key] = outcomes.get(key, 0) + 1
    slowest = max(seconds for seconds, _ in answered)
    figure(
        f"webhook load: answers to the {HOSTILE} large reviews: {outcomes}; slowest ordinary "
        f"answer {slowest:.2f} s"
    )
    # every answer is short: an 8 MiB body is never echoed back
    assert all(len(json.dumps(a)) < 4096 for _, a in hostile_answers)


def ordinary_session() -> aiohttp.ClientSession:
    """Each ordinary review on a connection of its own, as a new connection of the API
    server would come: none reuses a connection opened before the hostile load."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True))


async def ordinary_stream(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    context: ssl.SSLContext,
    *,
    refusals: list[int] | None = None,
) -> list[tuple[float, dict[str, Any]]]:
    """``ORDINARY`` reviews one after the other. With ``refusals``, a connection refused
    at connect is tried again (counted there) until ``ANSWER_WITHIN`` of the first try;
    the time is counted from the first try."""
    answers = []
    for _ in range(ORDINARY):
        started = time.monotonic()
        while True:
            try:
                seconds, answer = await post(session, url, body, context)
            except aiohttp.ClientConnectorError:
                if refusals is None or time.monotonic() - started > ANSWER_WITHIN:
                    raise
                refusals[0] += 1
                await asyncio.sleep(0.05)
                continue
            answers.append(
                (time.monotonic() - started if refusals is not None else seconds, answer)
            )
            break
        await asyncio.sleep(0.05)
    return answers


def assert_answered(answered: list[tuple[float, dict[str, Any]]]) -> float:
    for seconds, answer in answered:
        assert seconds < ANSWER_WITHIN, f"an ordinary review took {seconds:.1f} s"
        assert answer["response"]["allowed"] is True, answer
    return max(seconds for seconds, _ in answered)


async def _closed_by_server(reader: asyncio.StreamReader, *, within: float) -> bool:
    try:
        async with asyncio.timeout(within):
            return await reader.read(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True  # reset by the server


async def test_a_thousand_connections_that_never_start_tls_are_dropped_and_reviews_answered(
    installed: Installed, second_operator: Any
) -> None:
    operator, url, serving_ca, log = second_operator
    port = int(url.rsplit(":", 1)[1])
    limit = chart_memory_limit()
    context = installed.plane.webhook_caller_context(serving_ca=serving_ca)
    ordinary = json.dumps(review(installed.namespace, name="ordinary")).encode()
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        async with ordinary_session() as session:
            await post(session, url, ordinary, context)  # warm
            rss_before, _ = memory(operator.pid)
            for _ in range(IDLE):
                idle.append(await asyncio.open_connection("127.0.0.1", port))
            opened = time.monotonic()  # the last one
            answered = await ordinary_stream(session, url, ordinary, context)
            left = CLOSED_WITHIN - (time.monotonic() - opened)
            closed = await asyncio.gather(
                *(_closed_by_server(reader, within=max(left, 0.1)) for reader, _ in idle)
            )
            # and once they are gone, a review on a new connection is answered as before
            after = await post(session, url, ordinary, context)
    finally:
        for _, writer in idle:
            writer.close()
    rss_after, peak = memory(operator.pid)
    slowest = assert_answered([*answered, after])
    figure(
        f"webhook load: {IDLE:,} connections that never start TLS and {ORDINARY} ordinary "
        f"reviews: operator RSS {rss_before / 2**20:.0f} MiB before, peak {peak / 2**20:.0f} "
        f"MiB (limit {limit / 2**20:.0f} MiB), {rss_after / 2**20:.0f} MiB after; "
        f"{sum(closed):,} closed by the server within {CLOSED_WITHIN:.0f} s; slowest ordinary "
        f"answer {slowest:.2f} s"
    )
    assert operator.poll() is None, log.read_text()
    assert peak < limit, f"peak RSS {peak / 2**20:.0f} MiB over the chart's limit"
    assert peak - rss_before < HOSTILE_GROWTH, f"grew {(peak - rss_before) / 2**20:.0f} MiB"
    assert all(closed), f"{IDLE - sum(closed)} idle connections still open"


async def _slow_body(
    port: int, context: ssl.SSLContext, head: bytes, part: bytes, *, hold: float
) -> str:
    """Declare the largest body, send ``part`` of it, then nothing: what the server says."""
    try:
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    except (OSError, TimeoutError):
        return "not connected"
    reply = b""
    try:
        writer.write(head + part)
        try:
            async with asyncio.timeout(hold):
                while chunk := await reader.read(65536):
                    reply += chunk
        except TimeoutError:
            if not reply:
                return "no answer"
        except OSError:
            if not reply:
                return "reset"
    finally:
        writer.close()
    if not reply:
        return "closed"
    if b"retry the write" in reply:
        return "busy"
    if b"did not arrive" in reply:
        return "body timed out"
    return reply.split(b"\r\n", 1)[0].decode(errors="replace")


async def test_slow_bodies_of_the_largest_size_keep_memory_bounded_and_reviews_answered(
    installed: Installed, second_operator: Any
) -> None:
    operator, url, serving_ca, log = second_operator
    port = int(url.rsplit(":", 1)[1])
    limit = chart_memory_limit()
    context = installed.plane.webhook_caller_context(serving_ca=serving_ca)
    ordinary = json.dumps(review(installed.namespace, name="ordinary")).encode()
    head = (
        "POST /taloscluster HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {intake.MAX_REVIEW_BYTES}\r\n\r\n"
    ).encode()
    part = (
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": '
        b'{"uid": "slow", "pad": "' + b"x" * SLOW_PART
    )
    async with ordinary_session() as session:
        await post(session, url, ordinary, context)  # warm
        rss_before, _ = memory(operator.pid)
        slow = [
            asyncio.create_task(_slow_body(port, context, head, part, hold=15.0))
            for _ in range(SLOW)
        ]
        await asyncio.sleep(1.0)  # the slow bodies are in flight first
        # While every place is held by a slow body past its handshake, a new connection
        # is refused (a reset; the API server would answer that write 500, failing
        # closed); the places free as the slow bodies are denied (within the linger). So
        # an ordinary review is tried again on a refused connection, and must be answered
        # within the API server's timeout of its first try.
        refusals = [0]
        answered = await ordinary_stream(session, url, ordinary, context, refusals=refusals)
        outcomes: dict[str, int] = {}
        for outcome in await asyncio.gather(*slow):
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    rss_after, peak = memory(operator.pid)
    slowest = assert_answered(answered)
    figure(
        f"webhook load: {SLOW} connections declaring {intake.MAX_REVIEW_BYTES:,} bytes and "
        f"sending {SLOW_PART:,}, and {ORDINARY} ordinary reviews: operator RSS "
        f"{rss_before / 2**20:.0f} MiB before, peak {peak / 2**20:.0f} MiB (limit "
        f"{limit / 2**20:.0f} MiB), {rss_after / 2**20:.0f} MiB after; the slow ones: "
        f"{outcomes}; slowest ordinary answer {slowest:.2f} s ({refusals[0]} connections "
        "refused while every place was held)"
    )
    assert operator.poll() is None, log.read_text()
    assert peak < limit, f"peak RSS {peak / 2**20:.0f} MiB over the chart's limit"
    assert peak - rss_before < SLOW_GROWTH, f"grew {(peak - rss_before) / 2**20:.0f} MiB"
    assert "no answer" not in outcomes, outcomes  # none is left hanging
