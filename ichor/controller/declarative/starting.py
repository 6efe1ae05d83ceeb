"""The declarative mode's one API call: start the operation ``decisions.decide`` chose,
through ``talosoperation.creating`` (an ordinary TalosOperation, judged by the webhook as the
operator, never an override), and word what came of it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubernetes.aio.client.api_client import ApiClient

from ichor.api.conditions import SpecReachedReason
from ichor.api.talosoperation import StartedBy
from ichor.controller.declarative.decisions import Decision, Target
from ichor.controller.talosoperation import creating, start_request
from ichor.kube import bodies, errors

logger = logging.getLogger(__name__)


class StartDeferred(Exception):
    """A transient failure (5xx, 429, a create and delete race, a timeout, the
    connection): try again later."""


#: Refusals nobody needs to act on: throttling (429), and the operation deleted between
#: its create and its read (404). The start is deferred, as after a 5xx.
TRY_LATER = frozenset({404, 429})


def request(*, cluster: Mapping[str, Any], target: Target) -> start_request.StartRequest:
    """The start for ``target``; its attempt is the spec generation, so the same spec
    never starts the same upgrade twice, and the next spec change may."""
    generation = bodies.generation(cluster)
    return start_request.StartRequest(
        cluster=start_request.ClusterTarget.from_body(cluster),
        type=target.type,
        version=target.version,
        started_by=StartedBy.DECLARATIVE,
        attempt=f"g{generation}",
        reason=target.sentence,
    )


def outcome(started: creating.Started, *, target: Target) -> Decision:
    """What an operation the start created or found says of the upgrade."""
    status = started.body.get("status")
    status = status if isinstance(status, Mapping) else {}
    phase = status.get("phase")
    what = f"TalosOperation {started.name}"
    if phase == "Failed":
        message = status.get("message") or "no message"
        return Decision(
            SpecReachedReason.FAILED,
            f"{what} for {target.sentence} failed: {message}; change the spec, or create a "
            f"TalosOperation, to try again",
        )
    if phase == "Succeeded":
        return Decision(
            SpecReachedReason.UPGRADING,
            f"{what} succeeded; waiting for the Nodes to report {target.version}",
        )
    verb = "started" if started.created else "is " + str(phase or "Pending")
    return Decision(SpecReachedReason.UPGRADING, f"{what} {verb} for {target.sentence}")


async def start(api: ApiClient, *, cluster: Mapping[str, Any], target: Target) -> Decision:
    """Start (or find) the operation for ``target``. A refusal is a ``Refused`` decision
    with the API server's sentence (``retry`` unless the webhook's rule denied it); a
    transient failure raises ``StartDeferred``."""
    try:
        started = await creating.start_operation(
            api, request=request(cluster=cluster, target=target)
        )
    except creating.StartRefused as refused:
        said = f"{target.sentence}, and the start was refused: {refused.message}"
        if refused.rule_denial:
            return Decision(SpecReachedReason.REFUSED, said)  # stands until the spec changes
        if refused.status in TRY_LATER:
            raise StartDeferred(refused.message) from refused
        return Decision(
            SpecReachedReason.REFUSED, f"{said}; it is tried again at the next check", retry=True
        )
    except errors.FAILED as error:
        raise StartDeferred(str(error)) from error
    return outcome(started, target=target)
