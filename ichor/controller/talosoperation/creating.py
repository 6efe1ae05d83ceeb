"""Create the TalosOperation the controller decided to start (``start_request`` builds it).

``start_operation`` creates it with the operator's own client, so the webhook judges it
as it judges a person's create. Idempotent across restarts: a 409 on the same name returns
the existing operation when it is the request's own (``start_request.judge_existing``).
A denial is returned as ``StartRefused`` with the webhook's sentence; a transient failure
is raised for the caller to retry. It decides nothing.

More in docs/design/notes.md, "ichor/controller/talosoperation/creating.py".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds, owed
from ichor.controller.talosoperation import start_request
from ichor.kube import errors, objects


@dataclass(frozen=True)
class Started:
    """The operation of a request, as stored; ``created`` False: it existed already."""

    name: str
    created: bool
    body: dict[str, Any]


#: How the API server words a validating webhook's denial (k8s.io/apiserver's admission
#: webhook errors): ``admission webhook "NAME" denied the request: ...``.
_WEBHOOK_DENIAL = re.compile(r'admission webhook "[^"]*" denied the request')


class StartRefused(Exception):
    """The API server (its webhook, the CRD schema, RBAC, throttling) refused the create,
    or another object holds the request's name. ``message`` says which and why."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    @property
    def rule_denial(self) -> bool:
        """The webhook denied the operation (its rule's sentence): the same request is
        refused again until what it asks changes. Anything else (a namesake, a create and
        delete race, RBAC, the schema, throttling) may pass at a later try."""
        return self.status == 403 and _WEBHOOK_DENIAL.match(self.message) is not None


async def start_operation(
    api: ApiClient,
    *,
    request: start_request.StartRequest,
    owes: Mapping[str, owed.OwedEvent] | None = None,
) -> Started:
    """Create the request's operation, or return the one a earlier run created. ``owes``:
    the Events its create owes (``ichor.api.owed``), carried by the operation until the
    executor posted them."""
    body = start_request.manifest(request, owes=owes)
    name = body["metadata"]["name"]
    try:
        created = await objects.create(
            api, kind=kinds.Kind.TALOS_OPERATION, namespace=request.cluster.namespace, body=body
        )
    except errors.Conflict:
        return await _existing(api, request=request, name=name)
    except errors.ApiError as error:
        if error.refused:
            raise StartRefused(error.message, status=error.status) from error
        raise
    return Started(name=name, created=True, body=created)


async def _existing(api: ApiClient, *, request: start_request.StartRequest, name: str) -> Started:
    namespace = request.cluster.namespace
    found = await objects.get(api, kind=kinds.Kind.TALOS_OPERATION, name=name, namespace=namespace)
    if found is None:
        # deleted between the create and the read: the next start creates it
        raise StartRefused(
            f"TalosOperation {namespace}/{name} was deleted while it was being created; it "
            f"is created again at the next check",
            status=404,
        )
    problem = start_request.judge_existing(request, found)
    if problem is not None:
        raise StartRefused(f"{problem}; delete it to let the controller start its own", status=409)
    return Started(name=name, created=False, body=found)
