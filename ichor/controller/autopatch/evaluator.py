"""Where the health checks run: one worker process (``celworker``), reused while it
answers, killed at a check's deadline and replaced at the next check.

A thread cannot be stopped, so a runaway expression gets a process that SIGKILL ends. The
worker starts isolated (``-I``, an empty environment, no file but its pipes, ``/``), limits
its own memory and CPU, and dies with the operator. One check at a time for the whole
operator (a wait of at most ``WAIT_TIMEOUT``), so every tenant's checks take one core.

More in docs/design/notes.md, "ichor/controller/autopatch/evaluator.py".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from ichor.api import celbudget
from ichor.controller.autopatch import health

logger = logging.getLogger(__name__)

WORKER_MODULE = "ichor.controller.autopatch.celworker"
#: Seconds a new worker may take to start (Python, celpy, its parser).
START_TIMEOUT = 30.0
#: Seconds a check waits for the worker while other checks run.
WAIT_TIMEOUT = 60.0
#: The worker's address space: about 50 MiB once started, 70 MiB with the largest list a
#: check reads converted for CEL; the rest is for what an expression builds.
ADDRESS_SPACE = 256 * 1024 * 1024
#: Seconds a worker that closed its output has to end before it is killed.
REAP_TIMEOUT = 5.0
#: CPU seconds an evaluation may use beyond its deadline's seconds, before the kernel
#: ends it (the deadline comes first; this holds if the operator cannot kill it).
CPU_GRACE = 1.0


class Evaluator:
    """The worker process and the lock that gives it one check at a time."""

    def __init__(
        self,
        *,
        address_space: int = ADDRESS_SPACE,
        start_timeout: float = START_TIMEOUT,
        wait_timeout: float = WAIT_TIMEOUT,
        steps: int = celbudget.BUDGET,
        cpu_seconds: float | None = None,
    ) -> None:
        self.address_space = address_space
        #: CPU seconds one evaluation may use (None: its deadline's, and ``CPU_GRACE``).
        self.cpu_seconds = cpu_seconds
        self.start_timeout = start_timeout
        self.wait_timeout = wait_timeout
        self.steps = steps
        self._lock = asyncio.Lock()
        self._process: asyncio.subprocess.Process | None = None
        #: Workers started so far (the first, and each that replaced a killed one).
        self.started = 0

    @property
    def pid(self) -> int | None:
        """The running worker's process id (None: none runs now)."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    async def run(
        self, compiled: health.Compiled, objects: Sequence[Any], *, within: float
    ) -> tuple[health.Outcome, float]:
        """Evaluate ``compiled`` over ``objects`` in the worker within ``within`` seconds:
        the outcome, and the seconds the evaluation took (not counting the wait for the
        worker). A cancelled evaluation kills the worker."""
        try:
            async with asyncio.timeout(self.wait_timeout):
                await self._lock.acquire()
        except TimeoutError:
            busy = f"the evaluator stayed busy with other checks for {self.wait_timeout:.0f} s"
            return health.Outcome(health.Result.UNAVAILABLE, busy), 0.0
        try:
            return await self._run(compiled, objects, within=within)
        finally:
            self._lock.release()

    async def _run(
        self, compiled: health.Compiled, objects: Sequence[Any], *, within: float
    ) -> tuple[health.Outcome, float]:
        process = await self._ready()
        if process is None:
            why = "the evaluator process could not be started; it is tried again at the next look"
            return health.Outcome(health.Result.UNAVAILABLE, why), 0.0
        within = max(within, 0.0)
        seconds = self.cpu_seconds if self.cpu_seconds is not None else within + CPU_GRACE
        message = health.request(compiled, objects, steps=self.steps, cpu=seconds)
        loop = asyncio.get_running_loop()
        began = loop.time()
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            async with asyncio.timeout(within):
                process.stdin.write(message)
                await process.stdin.drain()
                raw = await _read(process.stdout)
        except TimeoutError:
            await self.kill()
            return health.Outcome(health.Result.TIMEOUT, limit=within), loop.time() - began
        except (OSError, asyncio.IncompleteReadError, ValueError):
            ended = await self._reap(cpu=seconds)
            return ended, loop.time() - began
        except BaseException:
            self._kill_now()  # cancelled: its answer would be read as the next check's
            raise
        outcome = health.Outcome.from_json(raw)
        if outcome is None:
            await self.kill()
            outcome = health.Outcome(health.Result.ENDED, "it answered out of turn")
        elif outcome.result is health.Result.MEMORY:
            await self.kill()  # a process that ran out of memory is not used again
        return outcome, loop.time() - began

    async def _ready(self) -> asyncio.subprocess.Process | None:
        """The running worker, started if none runs; None when it cannot be started."""
        process = self._process
        if process is not None and process.returncode is None:
            return process
        self._process = None
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-B", "-m", WORKER_MODULE,
                str(os.getpid()), str(self.address_space),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, env={}, cwd="/", close_fds=True,
            )  # fmt: skip
        except OSError as error:
            logger.warning("health checks: the evaluator process did not start: %s", error)
            return None
        self._process = process
        self.started += 1
        assert process.stdout is not None
        try:
            async with asyncio.timeout(self.start_timeout):
                hello = await _read(process.stdout)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
            hello = None
        except BaseException:
            self._kill_now()
            raise
        if hello != {"ready": True}:
            ended = await self._reap(cpu=0.0)
            logger.warning("health checks: the evaluator process did not start (%s)", ended.detail)
            return None
        return process

    def _kill_now(self) -> None:
        """SIGKILL the worker without waiting (its reaping is left to asyncio)."""
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()

    async def kill(self) -> None:
        """SIGKILL the worker and wait until it is gone; the next check starts another."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        await process.wait()

    async def _reap(self, *, cpu: float) -> health.Outcome:
        """The worker ended while evaluating (its output closed): how (its CPU limit, or
        otherwise). It is waited for, not signalled: ``Process.kill`` polls first, and a
        poll that reaps the exited worker leaves asyncio an unknown child (code 255)."""
        process, self._process = self._process, None
        if process is None:
            return health.Outcome(health.Result.ENDED, "it is gone")
        try:
            async with asyncio.timeout(REAP_TIMEOUT):
                code = await process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            code = await process.wait()
        if code == -signal.SIGXCPU:
            return health.Outcome(health.Result.CPU, limit=cpu)
        if code < 0:
            return health.Outcome(health.Result.ENDED, f"signal {signal.Signals(-code).name}")
        return health.Outcome(health.Result.ENDED, f"exit code {code}")

    async def close(self) -> None:
        """Stop the worker (the operator stops)."""
        await self.kill()


async def _read(stream: asyncio.StreamReader) -> Any:
    """One message of the worker's (at most ``health.MAX_ANSWER`` bytes)."""
    head = await stream.readexactly(health.HEADER)
    size = int.from_bytes(head, "big")
    if size > health.MAX_ANSWER:
        raise ValueError(f"an answer of {size} bytes")
    return json.loads(await stream.readexactly(size))
