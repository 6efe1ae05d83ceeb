"""kopf in-process for the component tests: its own thread and loop, a clean stop.

Every folder that runs the operator (controller, operations, release check, webhook, CLI)
uses this one harness, so they stop it the same way. kopf runs in a thread with its own
event loop, as in a Pod: when it stops it cancels every task of its loop that it did not
find at its start, which in the test's loop would be the test itself; and the webhook's
tests call kubectl (blocking) while the API server calls back into the webhook.

Stopping waits for kopf to return, then lets the loop run a few more turns so the watch
connections kopf closed finish their TLS shutdown before the loop closes. A transport
that kopf still leaves behind after that is collected here, in the harness, with only
its "unclosed" ResourceWarning silenced: left to the garbage collector it would warn in
whichever later test happens to collect it, and fail that test under
``filterwarnings = error``. Nothing else is silenced, and nothing globally.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import kopf
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from tests.harness import controlplane
from tests.harness.registry import OFFLINE_REPOSITORIES

CRDS = Path(__file__).resolve().parents[2] / "crds"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
#: Loop turns after kopf returns, for closed connections to finish closing.
SETTLE_SECONDS = 0.5
MERGE = "application/merge-patch+json"

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    check: Callable[[T], bool],
    *,
    within: float = 20.0,
    what: str = "the expected state",
) -> T:
    """Poll ``probe`` until ``check`` holds; fail with the last value seen."""
    deadline = time.monotonic() + within
    value = await probe()
    while not check(value):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {within} s; last: {value!r}")
        await asyncio.sleep(0.1)
        value = await probe()
    return value


def apply_crds(plane: controlplane.ControlPlane) -> None:
    """The CRDs from crds/, applied and established (idempotent)."""
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRDS))
    for kind in kinds.Kind:
        plane.kubectl(
            "wait", "--for=condition=Established", f"crd/{kinds.crd_name(kind)}", "--timeout=60s"
        )


def collect_leaked_transports() -> None:
    """Collect what a stopped loop left behind, without its "unclosed" warnings."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"unclosed", category=ResourceWarning)
        gc.collect()


class KopfThread:
    """One kopf run in a thread of its own; ``start`` after ``stop`` is a restart."""

    def __init__(
        self,
        registry: kopf.OperatorRegistry,
        *,
        memo: kopf.Memo | None = None,
        settings: kopf.OperatorSettings | None = None,
        name: str = "kopf-operator",
    ) -> None:
        self.registry = registry
        self.memo = memo
        self.settings = settings
        self.name = name
        self.errors: list[BaseException] = []
        self.thread: threading.Thread | None = None
        self.stop_flag = threading.Event()
        self.ready_flag = threading.Event()

    async def _operate(self) -> None:
        try:
            await kopf.operator(
                registry=self.registry,
                settings=self.settings,
                memo=self.memo,
                clusterwide=True,
                standalone=True,
                stop_flag=self.stop_flag,
                ready_flag=self.ready_flag,
            )
        finally:
            await asyncio.sleep(SETTLE_SECONDS)

    def _run(self) -> None:
        try:
            asyncio.run(self._operate())
        except BaseException as error:  # reported by stop()
            self.errors.append(error)
        finally:
            collect_leaked_transports()

    @property
    def alive(self) -> bool:
        return not self.errors and self.thread is not None and self.thread.is_alive()

    def start(self) -> None:
        """Start kopf without waiting for it (``wait_ready`` waits)."""
        assert self.thread is None, "kopf is already running"
        self.errors.clear()
        self.stop_flag = threading.Event()
        self.ready_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        if not self.ready_flag.wait(timeout):
            raise AssertionError(f"kopf did not start within {timeout} s: {self.errors!r}")

    def stop(self, *, check: bool = True) -> None:
        """Stop kopf and wait until its thread (and so its connections) ended."""
        if self.thread is None:
            return
        self.stop_flag.set()
        self.thread.join(STOP_TIMEOUT)
        if self.thread.is_alive():
            raise AssertionError(f"kopf did not stop within {STOP_TIMEOUT} s")
        self.thread = None
        if check and self.errors:
            raise AssertionError(f"kopf failed: {self.errors!r}")

    async def astart(self) -> None:
        self.start()
        await asyncio.to_thread(self.wait_ready)

    async def astop(self, *, check: bool = True) -> None:
        await asyncio.to_thread(lambda: self.stop(check=check))


async def apply_installation(
    custom: client.CustomObjectsApi,
    release_check: dict[str, Any],
    status: dict[str, Any] | None = None,
) -> None:
    """Create or update the IchorInstallation singleton, then merge ``status`` into it.
    Repositories ``release_check`` does not name are :data:`OFFLINE_REPOSITORIES`."""
    body = {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.ICHOR_INSTALLATION,
        "metadata": {"name": kinds.INSTALLATION_NAME},
        "spec": {"releaseCheck": OFFLINE_REPOSITORIES | release_check},
    }
    plural = kinds.Plural.ICHOR_INSTALLATIONS
    try:
        await custom.create_cluster_custom_object(kinds.GROUP, kinds.VERSION, plural, body)
    except ApiException as error:
        if error.status != 409:
            raise
        await custom.patch_cluster_custom_object(
            kinds.GROUP,
            kinds.VERSION,
            plural,
            kinds.INSTALLATION_NAME,
            {"spec": body["spec"]},
            _content_type=MERGE,
        )
    if status is not None:
        await custom.patch_cluster_custom_object_status(
            kinds.GROUP,
            kinds.VERSION,
            plural,
            kinds.INSTALLATION_NAME,
            {"status": status},
            _content_type=MERGE,
        )
