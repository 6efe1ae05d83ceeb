"""The fixed webhook configurations the chart, the tests and the demo install.

One ValidatingWebhookConfiguration and one MutatingWebhookConfiguration, rendered once
(not kopf-managed): ``failurePolicy: Fail``, ``sideEffects: NoneOnDryRun``, a 5 s
timeout, v1 reviews only, and one webhook per claim of ``intake.CLAIMS`` in group
ichor.dev. Why not kopf's managed configuration: docs/design/notes.md.
"""

from __future__ import annotations

import base64
from typing import NotRequired, TypedDict

from ichor.api import kinds
from ichor.webhook.intake import CLAIMS, Claim

TIMEOUT_SECONDS = 5


class Rule(TypedDict):
    apiGroups: list[str]
    apiVersions: list[str]
    operations: list[str]
    resources: list[str]
    scope: str


class ClientConfig(TypedDict):
    url: str
    caBundle: str


class MatchCondition(TypedDict):
    name: str
    expression: str


class Webhook(TypedDict):
    name: str
    clientConfig: ClientConfig
    rules: list[Rule]
    failurePolicy: str
    matchPolicy: str
    sideEffects: str
    timeoutSeconds: int
    admissionReviewVersions: list[str]
    matchConditions: NotRequired[list[MatchCondition]]


class Metadata(TypedDict):
    name: str
    labels: NotRequired[dict[str, str]]


class ValidatingWebhookConfiguration(TypedDict):
    apiVersion: str
    kind: str
    metadata: Metadata
    webhooks: list[Webhook]


class MutatingWebhook(Webhook):
    reinvocationPolicy: str


class MutatingWebhookConfiguration(TypedDict):
    apiVersion: str
    kind: str
    metadata: Metadata
    webhooks: list[MutatingWebhook]


#: The name of a claim's match condition (``Claim.match``).
MATCH_CONDITION = "ichor-dev-keys"


def _webhook(claim: Claim, *, base: str, bundle: str, timeout_seconds: int) -> Webhook:
    hook = _hook(claim, base=base, bundle=bundle, timeout_seconds=timeout_seconds)
    if claim.match is not None:
        hook["matchConditions"] = [MatchCondition(name=MATCH_CONDITION, expression=claim.match)]
    return hook


def _hook(claim: Claim, *, base: str, bundle: str, timeout_seconds: int) -> Webhook:
    return Webhook(
        name=f"{claim.path}.{kinds.GROUP}",
        clientConfig=ClientConfig(url=f"{base}/{claim.path}", caBundle=bundle),
        rules=[
            Rule(
                apiGroups=[kinds.GROUP],
                apiVersions=["*"],
                operations=sorted(claim.operations),
                resources=claim.resources(),
                scope=claim.scope,
            )
        ],
        failurePolicy="Fail",
        matchPolicy="Equivalent",
        sideEffects="NoneOnDryRun",
        timeoutSeconds=timeout_seconds,
        admissionReviewVersions=["v1"],
    )


def _metadata(name: str) -> Metadata:
    return Metadata(
        name=name,
        labels={"app.kubernetes.io/name": "ichor", "app.kubernetes.io/component": "webhook"},
    )


def _webhooks(*, url: str, ca_bundle: bytes, timeout_seconds: int, mutating: bool) -> list[Webhook]:
    """One webhook per claim of the half ``mutating`` says, served at ``url``."""
    base = url.rstrip("/")
    bundle = base64.b64encode(ca_bundle).decode("ascii")
    return [
        _webhook(claim, base=base, bundle=bundle, timeout_seconds=timeout_seconds)
        for claim in CLAIMS
        if claim.mutating is mutating
    ]


def render_configuration(
    *,
    url: str,
    ca_bundle: bytes,
    name: str = "ichor-webhook",
    timeout_seconds: int = TIMEOUT_SECONDS,
) -> ValidatingWebhookConfiguration:
    """The ValidatingWebhookConfiguration for a server at ``url`` whose CA is ``ca_bundle``.

    One webhook per claim (path = kopf handler id), each matching only what its claim
    covers in group ichor.dev (``intake.CLAIMS``), so the API server sends nothing the
    endpoint would refuse as unclaimed. DELETE is not matched, so clusters and operations
    can be removed while the operator is down.
    """
    return ValidatingWebhookConfiguration(
        apiVersion="admissionregistration.k8s.io/v1",
        kind="ValidatingWebhookConfiguration",
        metadata=_metadata(name),
        webhooks=_webhooks(
            url=url, ca_bundle=ca_bundle, timeout_seconds=timeout_seconds, mutating=False
        ),
    )


def render_mutating_configuration(
    *,
    url: str,
    ca_bundle: bytes,
    name: str = "ichor-webhook",
    timeout_seconds: int = TIMEOUT_SECONDS,
) -> MutatingWebhookConfiguration:
    """The MutatingWebhookConfiguration of the same server: the paths that write the
    admission records (``ichor.api.records``) into the object under review.

    It patches nothing but those annotations, and the validating half refuses an object
    whose records are not exactly what it would have written, so a missing or reordered
    mutating webhook fails closed. ``reinvocationPolicy: IfNeeded``: when a later mutating
    webhook changes the object, the records are computed again for what is stored.
    """
    hooks = _webhooks(url=url, ca_bundle=ca_bundle, timeout_seconds=timeout_seconds, mutating=True)
    return MutatingWebhookConfiguration(
        apiVersion="admissionregistration.k8s.io/v1",
        kind="MutatingWebhookConfiguration",
        metadata=_metadata(name),
        webhooks=[MutatingWebhook(**hook, reinvocationPolicy="IfNeeded") for hook in hooks],
    )
