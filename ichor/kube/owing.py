"""Post the Events an object's stored state owes, then remove them (``ichor.api.owed``).

``flush`` is what every controller calls after a write that stored owed Events, and for
any object it finds holding some (after a restart): each is posted under the name its
key fixes (``events.post_owed``: posted before counts as posted), then the posted ones are
removed from the status (``status.pendingEvents``) and from the create's annotation
(``ichor.dev/owed-events``). One that cannot be posted stays owed for the next call; one
about an object that is gone is dropped, since nothing is left to post it on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds, owed
from ichor.kube import bodies, events, patching

logger = logging.getLogger(__name__)

#: Reads the object an owed Event is ``about`` (an operation's TalosCluster); None: gone.
About = Callable[[], Awaitable[Mapping[str, Any] | None]]


def _annotations(body: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = body.get("metadata")
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def owes(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` holds owed Events (in its status or its annotation)."""
    return bool(owed.pending(body.get("status")) or owed.annotated(_annotations(body)))


async def flush(
    api: ApiClient,
    *,
    kind: kinds.Kind,
    body: Mapping[str, Any],
    about: About | None = None,
) -> dict[str, Any] | None:
    """Post what ``body`` owes, oldest first, and remove what was posted. Returns the
    object as last written (None: nothing written). The writes take no resourceVersion:
    each removes keys of a map, which commutes with any other write."""
    in_status = owed.pending(body.get("status"))
    annotated = owed.annotated(_annotations(body))
    entries = {**annotated, **in_status}
    if not entries:
        return None
    meta: Mapping[str, Any] = body.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), meta.get("namespace")
    holder = bodies.reference(body)
    target: Mapping[str, Any] | None = None
    looked = False
    done: set[str] = set()
    for key, event in owed.in_order(entries):
        involved = holder
        if event.about is not None:
            if not looked:
                target, looked = (await about() if about is not None else None), True
            if target is None:
                logger.warning(
                    "event %s about the %s of %s %s dropped: it no longer exists",
                    event.reason, event.about, kind.value, name,
                )  # fmt: skip
                done.add(key)
                continue
            involved = bodies.reference(target)
        if await events.post_owed(api, involved, key=key, event=event):
            done.add(key)
    where = str(namespace) if namespace else None
    return await _remove(api, kind, name, where, done, in_status, annotated)


async def _remove(
    api: ApiClient,
    kind: kinds.Kind,
    name: str,
    where: str | None,
    done: set[str],
    in_status: Mapping[str, Any],
    annotated: Mapping[str, Any],
) -> dict[str, Any] | None:
    """Remove the posted keys ``done`` from the status and the annotation; the object as
    last written (None: nothing written)."""
    written: dict[str, Any] | None = None
    if done & in_status.keys():
        written = await patching.patch_status(
            api, kind=kind, name=name, namespace=where,
            status_patch={owed.FIELD: {key: None for key in done & in_status.keys()}},
        )  # fmt: skip
    if done & annotated.keys():
        rest = {k: v for k, v in annotated.items() if k not in done}
        written = await patching.patch_object(
            api, kind=kind, name=name, namespace=where,
            patch={"metadata": {"annotations": {
                owed.OWED_ANNOTATION: owed.dump(rest) if rest else None
            }}},
            resource_version=None,
        )  # fmt: skip
    return written
