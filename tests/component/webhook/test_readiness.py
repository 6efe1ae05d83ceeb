"""The readiness endpoint against the real HTTPS endpoint on loopback: unready until the
listener opens, ready while it serves, unready again once it closes or the Pod drains;
draining closes each review's connection after its answer, so no kept connection carries
a review to a Pod the Service has dropped; nothing on the network can drain it, and the
operator process drains on SIGUSR1."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import aiohttp
import pytest

from ichor.webhook import readiness, server
from tests.component.webhook.test_endpoint import REVIEW, refuse_everything
from tests.harness import certs, controlplane

pytestmark = pytest.mark.component


async def _ask(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_ready_only_while_the_webhook_listener_serves_and_not_while_draining(
    tmp_path: Path,
) -> None:
    files = certs.write_serving_certificate(tmp_path)
    state = readiness.Readiness(webhook=True)
    probe_port = controlplane.free_port()
    endpoint = f"http://127.0.0.1:{probe_port}/readyz"
    probe = asyncio.create_task(readiness.serve(endpoint, state))
    webhook = server.AdmissionServer(
        port=controlplane.free_port(), certfile=files.cert, pkeyfile=files.key, cafile=files.ca,
        readiness=state,
    )  # fmt: skip
    context = ssl.create_default_context(cafile=str(files.ca))
    try:
        for _ in range(50):  # the probe's own listener
            try:
                status, text = await _ask(endpoint)
                break
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.1)
        assert (status, text) == (503, "the webhook's listener is not open yet\n")
        configs = webhook(refuse_everything)
        try:
            await anext(configs)
            assert await _ask(endpoint) == (200, "ready\n")
            async with aiohttp.ClientSession() as session:
                async with session.post(
                    f"{webhook.url}/taloscluster", data=json.dumps(REVIEW), ssl=context
                ) as answered:
                    assert answered.status == 200
                    assert answered.headers.get("Connection", "").lower() != "close"
                # the operator drains on SIGUSR1 (the chart's preStop); the network cannot
                assert (await _ask(f"http://127.0.0.1:{probe_port}/drain"))[0] == 404
                assert await _ask(endpoint) == (200, "ready\n")
                state.drain()
                assert await _ask(endpoint) == (503, "draining: the Pod is stopping\n")
                async with session.post(
                    f"{webhook.url}/taloscluster", data=json.dumps(REVIEW), ssl=context
                ) as answered:
                    assert answered.status == 200
                    assert (await answered.json())["response"]["allowed"] is False
                    assert answered.headers.get("Connection", "").lower() == "close"
        finally:
            await configs.aclose()
        assert state.listening is False
        state.draining = False
        assert (await _ask(endpoint))[0] == 503
    finally:
        probe.cancel()
        await asyncio.gather(probe, return_exceptions=True)


async def test_without_a_webhook_the_process_is_ready_at_once() -> None:
    state = readiness.Readiness(webhook=False)
    port = controlplane.free_port()
    probe = asyncio.create_task(readiness.serve(f"http://127.0.0.1:{port}/readyz", state))
    try:
        for _ in range(50):
            try:
                answer = await _ask(f"http://127.0.0.1:{port}/readyz")
                break
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.1)
        assert answer == (200, "ready (no webhook is configured)\n")
    finally:
        probe.cancel()
        await asyncio.gather(probe, return_exceptions=True)


def test_an_endpoint_without_a_port_is_refused() -> None:
    state = readiness.Readiness(webhook=True)
    with pytest.raises(ValueError, match="is not http://HOST:PORT/PATH"):
        asyncio.run(readiness.serve("https://0.0.0.0/readyz", state))


def test_the_operator_process_drains_on_sigusr1(tmp_path: Path) -> None:
    """The chart's preStop sends SIGUSR1 to the operator (PID 1 in its container): the
    readiness endpoint turns 503 while the process runs on."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    port = controlplane.free_port()
    env = controlplane.loopback_env(
        {
            "ICHOR_READINESS_ENDPOINT": f"http://127.0.0.1:{port}/readyz",
            "KUBECONFIG": "/nonexistent",
        }
    )
    script = (
        "import asyncio, kopf\n"
        "from ichor import operator\n"
        "from ichor.settings import Settings\n"
        "async def idle(**_):\n"
        "    await asyncio.Event().wait()\n"
        "kopf.operator = idle\n"  # no cluster here: the readiness endpoint alone
        "asyncio.run(operator.main(Settings.from_env()))\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE)

    def status() -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return None

    try:
        deadline = time.monotonic() + 60
        while status() != 200:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the readiness endpoint never answered"
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while status() != 503:
            assert time.monotonic() < deadline, "SIGUSR1 did not drain"
            time.sleep(0.1)
        assert process.poll() is None
    finally:
        process.kill()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()
