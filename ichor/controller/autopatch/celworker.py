"""The process that evaluates health checks:
``python -I -m ichor.controller.autopatch.celworker <parent pid> <address space bytes>``,
started by ``evaluator`` with an empty environment, no open file but its pipes, and ``/``
as its directory. It writes no file and holds no credential.

Before it reads a request it limits itself: it dies with the operator (``PR_SET_PDEATHSIG``),
its address space is bounded (``RLIMIT_AS``: a list built too large is a MemoryError,
answered), it writes no file and no core dump, and it is the first process the kernel's
OOM killer takes. Each request sets its CPU limit anew (``RLIMIT_CPU``: SIGXCPU ends it).
Then, one request at a time: read a message (``health.frame``), evaluate with the step
limit (``health.run``), write the outcome. It ends at the end of its input.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import resource
import signal
import sys
from typing import IO, Any

from ichor.controller.autopatch import health

#: ``prctl`` option: the signal this process gets when its parent ends.
PR_SET_PDEATHSIG = 1
#: Open files: its pipes, and what an import may open.
MAX_FILES = 32
#: The longest request read (2 MiB of objects and their JSON, with room).
MAX_REQUEST = 8 * 1024 * 1024
#: Programs kept compiled between requests, by expression.
KEEP_PROGRAMS = 64


def die_with(parent: int) -> None:
    """End (SIGKILL) when the operator ends, however it ends; at once if it already has."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def limit(address_space: int) -> None:
    """Bound the address space, write no file and no core, and offer itself first to the
    OOM killer (the operator then survives a pod that runs out of memory)."""
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_FILES, MAX_FILES))
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
        adj.write("1000")


def cpu(seconds: float) -> None:
    """Let the next evaluation use ``seconds`` of CPU more than this process has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used + seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _read(stream: IO[bytes]) -> Any:
    """The next request, or None at the end of the input (or a message it cannot take)."""
    head = stream.read(health.HEADER)
    if len(head) < health.HEADER:
        return None
    size = int.from_bytes(head, "big")
    if size > MAX_REQUEST:
        return None
    body = stream.read(size)
    if len(body) < size:
        return None
    return json.loads(body)


def _write(stream: IO[bytes], payload: dict[str, Any]) -> None:
    stream.write(health.frame(payload))
    stream.flush()


def serve(inp: IO[bytes], out: IO[bytes], *, address_space: int) -> None:
    """Answer requests until the input ends."""
    programs: dict[str, Any] = {}
    _write(out, {"ready": True})
    while True:
        request = _read(inp)
        if not isinstance(request, dict):
            return
        expression, objects = request.get("expression"), request.get("objects")
        steps, seconds = request.get("steps"), request.get("cpu")
        if not (
            isinstance(expression, str)
            and isinstance(objects, list)
            and isinstance(steps, int)
            and isinstance(seconds, int | float)
        ):
            return
        cpu(float(seconds))
        program = programs.get(expression)
        if program is None:
            try:
                program = health.program(expression)
            except Exception:  # the controller compiled it already: not expected
                _write(out, health.Outcome(health.Result.ERROR, "it does not compile").to_json())
                continue
            if len(programs) >= KEEP_PROGRAMS:
                programs.clear()
            programs[expression] = program
        outcome = health.run(program, objects, steps=steps)
        if outcome.result is health.Result.MEMORY:
            outcome = health.Outcome(health.Result.MEMORY, limit=address_space)
        del objects, request
        _write(out, outcome.to_json())


def main(argv: list[str]) -> int:
    parent, address_space = int(argv[1]), int(argv[2])
    die_with(parent)
    limit(address_space)
    health.program("true")  # the parser, built before the first request's clock runs
    serve(sys.stdin.buffer, sys.stdout.buffer, address_space=address_space)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
