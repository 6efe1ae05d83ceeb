"""kopf's own admission dispatch (the function its operator hands a webhook server), with
the webhook's real handlers and an in-memory backend, without an API server.

``serve_admission_request`` is what ``kopf.operator`` binds with ``functools.partial``
and hands to ``AdmissionServer``; here it is bound the same way, with the resources kopf
would have discovered from the CRDs, so a unit test sees exactly which handler kopf picks
(or that it picks none and allows) and what it keeps in its per-object memory.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import kopf
from kopf._cogs.structs import ephemera, references
from kopf._core.engines import admission, indexing
from kopf._core.reactor import inventory

from ichor.api import kinds
from ichor.settings import KubeSettings
from ichor.webhook import handlers
from ichor.webhook import wiring as webhook_wiring
from tests.unit.webhook.fakes import FakeBackend


@dataclass
class RealKopf:
    fn: kopf.WebhookFn
    memories: inventory.ResourceMemories
    backend: FakeBackend


def real_kopf(backend: FakeBackend | None = None) -> RealKopf:
    """kopf's webhook function over the webhook's registry (``wiring.register``)."""
    backend = backend if backend is not None else FakeBackend(holders={"olivia"})
    registry = kopf.OperatorRegistry()
    webhook_wiring.register_handlers(registry, kube=KubeSettings.from_env())
    insights = references.Insights()
    for kind, plural in kinds.PLURALS.items():
        insights.webhook_resources.add(
            references.Resource(
                group=kinds.GROUP,
                version=kinds.VERSION,
                plural=plural.value,
                kind=kind.value,
                namespaced=kind is not kinds.Kind.ICHOR_INSTALLATION,
                subresources=frozenset({"status"}),
                verbs=frozenset({"get", "list", "watch", "create", "update", "patch"}),
            )
        )
    memories = inventory.ResourceMemories()
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    fn: Any = functools.partial(
        admission.serve_admission_request,
        settings=settings,
        memories=memories,
        memobase=ephemera.AnyMemo(kopf.Memo({handlers.BACKEND: backend})),
        registry=registry,
        insights=insights,
        indices=indexing.OperatorIndexers().indices,
    )
    return RealKopf(fn=fn, memories=memories, backend=backend)
