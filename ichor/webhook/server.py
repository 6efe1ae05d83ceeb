"""The HTTPS endpoint the API server calls, and the fixed ValidatingWebhookConfiguration.

Why a server of our own instead of ``kopf.WebhookServer``: kopf's server answers a review
it cannot read with HTTP 400/404/500 (a missing ``request`` key escapes as a 500 with a
stack trace in the log), and a path naming no handler is *allowed* (no handler, no error).
``AdmissionServer`` implements kopf's public server protocol (a callable that takes kopf's
webhook function and yields the client config) and answers every request with an
AdmissionReview: a body it cannot read, an unknown path, an exception anywhere in kopf or
in a handler all become a denial with a sentence. It still hands every valid review to
kopf, so the handlers stay ``@kopf.on.validate`` handlers.

Why a fixed configuration instead of kopf's managed one (``settings.admission.managed``):
kopf writes ``timeoutSeconds: 30`` and ``admissionReviewVersions: [v1, v1beta1]``, needs
the right to patch a cluster-wide ValidatingWebhookConfiguration at run time, and removes
its non-persistent webhooks when the operator stops, which turns "operator down" into
"every write allowed". ``render_configuration`` gives one configuration, rendered once
(by the chart, the tests, the demo) with ``failurePolicy: Fail``, ``sideEffects:
NoneOnDryRun``, a 5 s timeout, v1 reviews only and rules for group ichor.dev only.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import ssl
from collections.abc import AsyncGenerator, Collection, Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import aiohttp.web
import kopf

from ichor.api import kinds
from ichor.webhook import admission
from ichor.webhook.validating import CLUSTER_HANDLER, OPERATION_HANDLER

_log = logging.getLogger(__name__)

REVIEW_VERSION = "admission.k8s.io/v1"
TIMEOUT_SECONDS = 5
#: An AdmissionReview holds the object and the old object (each up to etcd's 1.5 MiB).
MAX_REVIEW_BYTES = 8 * 1024 * 1024
HANDLERS: tuple[str, ...] = (CLUSTER_HANDLER, OPERATION_HANDLER)


def denial(uid: str, message: str, *, code: int = admission.Code.BAD_REQUEST) -> dict[str, Any]:
    """An AdmissionReview response that refuses the write with ``message``."""
    return {
        "apiVersion": REVIEW_VERSION,
        "kind": "AdmissionReview",
        "response": {
            "uid": uid,
            "allowed": False,
            "status": {"code": int(code), "message": message},
        },
    }


def _uid_of(data: object) -> str:
    if isinstance(data, Mapping):
        request = data.get("request")
        if isinstance(request, Mapping):
            uid = request.get("uid")
            if isinstance(uid, str):
                return uid
    return ""


def shape_problem(data: object) -> str | None:
    """What makes ``data`` not an AdmissionReview v1 request kopf can dispatch, if anything."""
    if not isinstance(data, Mapping):
        return "the body is not a JSON object"
    if data.get("apiVersion") != REVIEW_VERSION or data.get("kind") != "AdmissionReview":
        return f"expected apiVersion {REVIEW_VERSION} and kind AdmissionReview"
    request = data.get("request")
    if not isinstance(request, Mapping):
        return "request is missing or not an object"
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        return "request.uid is missing"
    resource = request.get("resource")
    if not isinstance(resource, Mapping) or not all(
        isinstance(resource.get(key), str) for key in ("group", "version", "resource")
    ):
        return "request.resource must name group, version and resource"
    if not isinstance(request.get("operation"), str):
        return "request.operation is missing"
    if not isinstance(request.get("userInfo"), Mapping):
        return "request.userInfo is missing"
    if not isinstance(request.get("object"), Mapping) and not isinstance(
        request.get("oldObject"), Mapping
    ):
        return "request.object and request.oldObject are both missing"
    sub = request.get("subResource")
    if sub is not None and not isinstance(sub, str):
        return "request.subResource must be a string"
    return None


async def respond(
    fn: kopf.WebhookFn,
    *,
    payload: bytes,
    webhook: str,
    known: Collection[str] = HANDLERS,
    headers: Mapping[str, str] | None = None,
    sslpeer: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The answer to one HTTP request: always an AdmissionReview, never an exception."""
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return denial("", "the ichor admission webhook cannot read this request: not JSON")
    uid = _uid_of(data)
    problem = shape_problem(data)
    if problem is not None:
        return denial(uid, f"the ichor admission webhook cannot read this request: {problem}")
    if webhook not in known:
        names = ", ".join(f"/{name}" for name in known)
        return denial(uid, f"the ichor admission webhook has no handler at /{webhook} ({names})")
    try:
        response: Any = await fn(
            data,
            webhook=webhook,
            headers=dict(headers or {}),
            sslpeer=dict(sslpeer or {}),
        )
    except Exception as error:
        _log.warning("admission review %s failed: %s: %s", uid, type(error).__name__, error)
        return denial(
            uid,
            f"the ichor admission webhook could not decide ({type(error).__name__}: {error}); "
            "nothing was changed",
            code=admission.Code.UNAVAILABLE,
        )
    body = response.get("response") if isinstance(response, Mapping) else None
    if not isinstance(body, Mapping) or not isinstance(body.get("allowed"), bool):
        return denial(uid, "the ichor admission webhook gave no answer", code=503)
    answer = dict(response)
    answer["apiVersion"] = REVIEW_VERSION
    answer["kind"] = "AdmissionReview"
    answer["response"] = dict(body, uid=uid)
    if not body["allowed"]:
        status = body.get("status")
        if not isinstance(status, Mapping) or not status.get("message"):
            answer["response"]["status"] = {
                "code": int(admission.Code.FORBIDDEN),
                "message": "the ichor admission webhook refused the write",
            }
    return answer


def _digest(paths: Collection[Path]) -> str:
    hasher = hashlib.sha256()
    for path in paths:
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


async def _changed(files: Collection[Path], *, interval: float) -> None:
    """Return once the content of ``files`` differs from what it is now."""
    initial = await asyncio.to_thread(_digest, files)
    while True:
        await asyncio.sleep(interval)
        if await asyncio.to_thread(_digest, files) != initial:
            return


class AdmissionServer:
    """kopf's webhook server protocol over HTTPS, answering every request with a review.

    The certificate files are re-read when they change (cert-manager renews them in
    place); the listening socket is then reopened with the new certificate.
    """

    def __init__(
        self,
        *,
        port: int,
        certfile: Path,
        pkeyfile: Path,
        cafile: Path | None = None,
        addr: str = "127.0.0.1",
        host: str | None = None,
        file_check_interval: float = 60.0,
    ) -> None:
        self.port = port
        self.certfile = certfile
        self.pkeyfile = pkeyfile
        self.cafile = cafile
        self.addr = addr
        self.host = host or ("127.0.0.1" if addr in ("0.0.0.0", "") else addr)
        self.file_check_interval = file_check_interval

    @property
    def url(self) -> str:
        """The base URL the configuration points at (handler ids are appended)."""
        return f"https://{self.host}:{self.port}"

    def ca_bundle(self) -> bytes:
        return (self.cafile or self.certfile).read_bytes()

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.certfile), str(self.pkeyfile))
        return context

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncGenerator[kopf.WebhookClientConfig, None]:
        async def handle(request: aiohttp.web.Request) -> aiohttp.web.Response:
            payload = await request.read()
            peer = request.transport.get_extra_info("peercert") if request.transport else None
            answer = await respond(
                fn,
                payload=payload,
                webhook=request.match_info.get("id", ""),
                headers=dict(request.headers),
                sslpeer=peer if isinstance(peer, Mapping) else None,
            )
            return aiohttp.web.json_response(answer)

        files = [p for p in (self.certfile, self.pkeyfile, self.cafile) if p is not None]
        while True:
            app = aiohttp.web.Application(client_max_size=MAX_REVIEW_BYTES)
            app.add_routes([aiohttp.web.post("/{id:.*}", handle)])
            runner = aiohttp.web.AppRunner(app, handle_signals=False, access_log=None)
            await runner.setup()
            try:
                site = aiohttp.web.TCPSite(
                    runner, self.addr, self.port, ssl_context=self._context(), reuse_address=True
                )
                await site.start()
                _log.info("admission webhook listening on %s:%s", self.addr, self.port)
                yield kopf.WebhookClientConfig(
                    url=self.url, caBundle=base64.b64encode(self.ca_bundle()).decode("ascii")
                )
                await _changed(files, interval=self.file_check_interval)
                _log.info("admission webhook certificate changed: reopening the endpoint")
            finally:
                await runner.cleanup()


class RefusalsAreAnswers(logging.Filter):
    """kopf logs every ``AdmissionError`` as "failed permanently" at ERROR; a refusal is the
    webhook's answer, not a failure of the operator, so it is logged at INFO."""

    PREFIXES = tuple(f"Webhook {handler!r} failed permanently" for handler in HANDLERS)

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.levelno == logging.ERROR
            and isinstance(record.msg, str)
            and record.msg.startswith(self.PREFIXES)
        ):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def quiet_refusals() -> None:
    """Install ``RefusalsAreAnswers`` on kopf's object logger (once)."""
    objects = logging.getLogger("kopf.objects")
    if not any(isinstance(f, RefusalsAreAnswers) for f in objects.filters):
        objects.addFilter(RefusalsAreAnswers())


def configure(
    settings: kopf.OperatorSettings,
    *,
    port: int,
    certfile: Path,
    pkeyfile: Path,
    cafile: Path | None = None,
    addr: str = "127.0.0.1",
    host: str | None = None,
) -> AdmissionServer:
    """Point kopf at the admission server; the configuration is fixed, not kopf-managed."""
    quiet_refusals()
    server = AdmissionServer(
        port=port, certfile=certfile, pkeyfile=pkeyfile, cafile=cafile, addr=addr, host=host
    )
    settings.admission.server = server
    settings.admission.managed = None
    return server


class Rule(TypedDict):
    apiGroups: list[str]
    apiVersions: list[str]
    operations: list[str]
    resources: list[str]
    scope: str


class ClientConfig(TypedDict):
    url: str
    caBundle: str


class Webhook(TypedDict):
    name: str
    clientConfig: ClientConfig
    rules: list[Rule]
    failurePolicy: str
    matchPolicy: str
    sideEffects: str
    timeoutSeconds: int
    admissionReviewVersions: list[str]


class Metadata(TypedDict):
    name: str
    labels: NotRequired[dict[str, str]]


class ValidatingWebhookConfiguration(TypedDict):
    apiVersion: str
    kind: str
    metadata: Metadata
    webhooks: list[Webhook]


def render_configuration(
    *,
    url: str,
    ca_bundle: bytes,
    name: str = "ichor-webhook",
    timeout_seconds: int = TIMEOUT_SECONDS,
) -> ValidatingWebhookConfiguration:
    """The ValidatingWebhookConfiguration for a server at ``url`` whose CA is ``ca_bundle``.

    One webhook per kind (path = kopf handler id), each matching only group ichor.dev.
    DELETE is not matched, so clusters and operations can be removed while the operator
    is down; the status subresource is not matched, so the controller's writes never wait
    for the webhook.
    """
    base = url.rstrip("/")
    bundle = base64.b64encode(ca_bundle).decode("ascii")

    def webhook(handler: str, plural: kinds.Plural, operations: list[str]) -> Webhook:
        return Webhook(
            name=f"{handler}.{kinds.GROUP}",
            clientConfig=ClientConfig(url=f"{base}/{handler}", caBundle=bundle),
            rules=[
                Rule(
                    apiGroups=[kinds.GROUP],
                    apiVersions=["*"],
                    operations=operations,
                    resources=[plural.value],
                    scope="Namespaced",
                )
            ],
            failurePolicy="Fail",
            matchPolicy="Equivalent",
            sideEffects="NoneOnDryRun",
            timeoutSeconds=timeout_seconds,
            admissionReviewVersions=["v1"],
        )

    return ValidatingWebhookConfiguration(
        apiVersion="admissionregistration.k8s.io/v1",
        kind="ValidatingWebhookConfiguration",
        metadata=Metadata(
            name=name,
            labels={"app.kubernetes.io/name": "ichor", "app.kubernetes.io/component": "webhook"},
        ),
        webhooks=[
            webhook(CLUSTER_HANDLER, kinds.Plural.TALOS_CLUSTERS, ["CREATE", "UPDATE"]),
            webhook(OPERATION_HANDLER, kinds.Plural.TALOS_OPERATIONS, ["CREATE"]),
        ],
    )
