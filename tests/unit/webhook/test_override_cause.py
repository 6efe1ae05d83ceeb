"""The plan's denial says in a structured field, not only in words, that ``override:
true`` would pass it; the CLI reads the field, the Headlamp plugin the shared words."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ichor.api import kinds
from ichor.cli import kube as cli_kube
from ichor.kube import apistatus
from ichor.webhook import intake, server
from ichor.webhook.reviews import NamespacedName
from tests.unit.webhook.fakes import FakeBackend, taloscluster, talosoperation, userinfo
from tests.unit.webhook.realkopf import real_kopf

PLAN_TS = Path(__file__).parents[3] / "ui" / "headlamp" / "src" / "mapping" / "plan.ts"


RESOURCE = {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosoperations"}


def plan_review(operation: dict[str, Any], *, user: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-plan",
                "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosOperation"},
                "resource": RESOURCE,
                "namespace": "team-a",
                "operation": "CREATE",
                "userInfo": userinfo(user),
                "object": operation,
                "dryRun": True,
            },
        }
    ).encode()


def backend() -> FakeBackend:
    cluster = taloscluster(cilium="1.20.4")  # Cilium 1.20 runs Kubernetes 1.33 to 1.36
    return FakeBackend(clusters={NamespacedName("team-a", "prod"): cluster}, holders={"olivia"})


async def status_of(operation: dict[str, Any], *, user: str = "nadia") -> dict[str, Any]:
    kopf = real_kopf(backend())
    answer = await server.respond(
        kopf.fn, payload=plan_review(operation, user=user), webhook=intake.OPERATION_HANDLER
    )
    assert answer["response"]["allowed"] is False
    status: dict[str, Any] = answer["response"]["status"]
    return status


async def test_a_refusal_override_would_pass_is_named_in_the_causes() -> None:
    status = await status_of(talosoperation("kubernetes", "v1.37.1"))
    assert status["details"]["causes"] == [
        {
            "reason": kinds.OVERRIDE_WOULD_PASS,
            "field": "spec.override",
            "message": "override: true, set by a holder of the override verb, passes this refusal",
        }
    ]
    assert kinds.OVERRIDE_WOULD_PASS_WORDS in status["message"]


@pytest.mark.parametrize(
    ("operation", "user"),
    [
        (talosoperation("kubernetes", "v1.38.0"), "nadia"),  # skew: no override passes it
        (talosoperation("kubernetes", "v1.37.1", override=True), "nadia"),  # lacks the verb
    ],
    ids=["never-overridable", "override-without-the-verb"],
)
async def test_a_refusal_no_override_passes_names_no_cause(
    operation: dict[str, Any], user: str
) -> None:
    status = await status_of(operation, user=user)
    assert "details" not in status


def api_error(body: object, status: int = 403) -> Any:
    from kubernetes.client.exceptions import ApiException

    error = ApiException(status=status, reason="Forbidden")
    error.body = body if isinstance(body, str) else json.dumps(body)
    return error


DENIED = 'admission webhook "talosoperation.ichor.dev" denied the request: '


def test_the_cli_reads_the_cause_not_the_words() -> None:
    words = f"Cilium refuses it. Setting {kinds.OVERRIDE_WOULD_PASS_WORDS} this refusal."
    cause = {"causes": [{"reason": kinds.OVERRIDE_WOULD_PASS, "field": "spec.override"}]}
    named = cli_kube.failure(api_error({"message": DENIED + words, "details": cause}), what="x")
    assert isinstance(named, cli_kube.Denied)
    assert named.overridable
    # the same words without the cause: a sentence alone suggests no --override
    said = cli_kube.failure(api_error({"message": DENIED + words}), what="x")
    assert isinstance(said, cli_kube.Denied)
    assert not said.overridable
    # the cause in another webhook's denial is no refusal of Ichor's at all
    other = 'admission webhook "policy.example.com" denied the request: no'
    foreign = cli_kube.failure(api_error({"message": other, "details": cause}), what="x")
    assert isinstance(foreign, cli_kube.CliError)


@pytest.mark.parametrize(
    ("body", "message", "causes"),
    [
        (
            '{"message": "m", "details": {"causes": [{"reason": "A"}, {"reason": 5}, "x"]}}',
            "m",
            {"A"},
        ),
        ('{"message": "m", "details": {"causes": "many"}}', "m", set()),
        ("not json", "403 Forbidden", set()),
        (b'{"message": "bytes"}', "bytes", set()),
        (None, "403 Forbidden", set()),
        ("[1, 2]", "403 Forbidden", set()),
    ],
    ids=["causes", "causes-not-a-list", "not-json", "bytes", "none", "not-an-object"],
)
def test_the_status_of_a_failed_call_is_read_leniently(
    body: object, message: str, causes: set[str]
) -> None:
    read = apistatus.read(body, status=403, reason="Forbidden")
    assert read.message == message
    assert read.causes == causes


def test_the_plugin_reads_the_same_words_the_webhook_says() -> None:
    found = re.search(r"export const OVERRIDABLE_MARK = '([^']*)';", PLAN_TS.read_text())
    assert found is not None, "plan.ts no longer names OVERRIDABLE_MARK"
    assert found.group(1) == kinds.OVERRIDE_WOULD_PASS_WORDS
