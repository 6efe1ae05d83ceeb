"""Kubernetes Events: what happened to an object, for a person reading ``kubectl describe``.

Events are best effort: ``post`` logs a failed Event and never fails the work that
produced it, and it catches one set of failures for every controller (``POST_FAILURES``,
which is ``errors.FAILED``: any answer of the API server that is not a success, and
``errors.TRANSIENT``). ``emit`` raises them instead, for the one caller whose work is the
Event (the recorder, which removes a record only once its Event is posted). The body is
pure (``ichor.kube.bodies.event_body``), for the CLI's own client too. ``post_owed``
posts an owed Event (``ichor.api.owed``) under the name its key fixes: a repeat after a
restart meets 409 and counts as posted, so it is one Event, never two.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, cast

from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import owed
from ichor.kube import errors
from ichor.kube.bodies import COMPONENT, EventType, PlannedEvent, event_body
from ichor.kube.clients import REQUEST_TIMEOUT
from ichor.kube.payloads import ObjectReference

logger = logging.getLogger(__name__)

#: What a best-effort post logs and swallows: any failed call (``errors.FAILED``).
POST_FAILURES = errors.FAILED


async def emit(
    api: ApiClient,
    involved: ObjectReference,
    *,
    type_: EventType,
    reason: str,
    message: str,
    component: str = COMPONENT,
    name: str | None = None,
    at: datetime | None = None,
) -> None:
    """Post an Event about ``involved`` (``name``: under that name, ``at``: of that time);
    raises the typed error for the caller."""
    body = event_body(
        involved, type_=type_, reason=reason, message=message, component=component, name=name,
        now=at,
    )  # fmt: skip
    # the answer is not read into a V1Event (nothing uses it; building it cost more than
    # the request), so its status is checked here
    response: Any = await errors.mapped(
        client.CoreV1Api(api).create_namespaced_event_without_preload_content(
            body["metadata"]["namespace"],
            cast(Any, body),
            _request_timeout=REQUEST_TIMEOUT,
        )
    )
    try:
        raw = await response.read()
    finally:
        response.release()
    if not 200 <= response.status <= 299:
        raise errors.answered(response.status, response.reason, raw)


async def post(api: ApiClient, involved: ObjectReference, event: PlannedEvent) -> bool:
    """Post ``event`` about ``involved``, best effort: False (and a warning in the log)
    when it could not be posted."""
    try:
        await emit(api, involved, type_=event.type, reason=event.reason, message=event.message)
    except POST_FAILURES as error:
        where = "/".join(filter(None, (involved.get("namespace"), involved.get("name"))))
        kind = involved.get("kind")
        logger.warning("event %s on %s %s not posted: %s", event.reason, kind, where, error)
        return False
    return True


async def post_owed(
    api: ApiClient, involved: ObjectReference, *, key: str, event: owed.OwedEvent
) -> bool:
    """Post the owed ``event`` about ``involved`` under the name ``key`` fixes. True when
    the Event exists now: posted, or posted before (409, an earlier try that was not
    recorded as done); False (and a warning in the log) when it could not be posted, so
    it stays owed."""
    name = owed.event_name(str(involved.get("name") or "object"), key)
    try:
        await emit(
            api, involved, type_=EventType(event.type), reason=event.reason,
            message=event.message, name=name, at=event.at,
        )  # fmt: skip
    except errors.Conflict:
        return True
    except POST_FAILURES as error:
        where = "/".join(filter(None, (involved.get("namespace"), involved.get("name"))))
        logger.warning(
            "event %s on %s %s not posted yet: %s", event.reason, involved.get("kind"), where,
            error,
        )  # fmt: skip
        return False
    return True
