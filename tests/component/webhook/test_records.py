"""No review causes a write unless the object it admitted was then stored, and the record
of an override is the webhook's alone.

The webhook writes no Event. Its mutating half puts an admission record into the object
it admits; the operator (here: the recorder running beside the webhook, as the chart's
ServiceAccount) posts it as a Warning Event once it sees the stored object, and removes
it. These tests try to leave a trace without storing anything (reviews posted straight
to the HTTPS endpoint, naming olivia or system:masters, for clusters that do not exist,
in kube-system too), and to imitate the record or the stamp a user could write
themselves, with the mutating half in place and without it.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from ichor.api import kinds, records
from tests.component.webhook import harness
from tests.component.webhook.conftest import HOLDER, PLAIN, Api

pytestmark = pytest.mark.component

#: How long the recorder gets to post a record that would exist (it posts within
#: milliseconds of seeing one); nothing may appear within it for a write never stored.
QUIET_SECONDS = 3.0


def _review(
    *,
    operation: str,
    namespace: str,
    name: str,
    user: str,
    groups: list[str],
    old: dict[str, Any] | None = None,
    spec: dict[str, str] | None = None,
) -> dict[str, Any]:
    body = harness.cluster_manifest(name, namespace)
    body["spec"].update(spec or {"kubernetesVersion": "v1.31.9"})
    body["metadata"]["uid"] = str(uuid.uuid4())
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": kinds.GROUP, "version": kinds.VERSION, "kind": "TalosCluster"},
        "resource": {"group": kinds.GROUP, "version": kinds.VERSION, "resource": "talosclusters"},
        "requestKind": {"group": kinds.GROUP, "version": kinds.VERSION, "kind": "TalosCluster"},
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": user, "groups": groups},
        "object": body,
        "dryRun": False,
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def _post(webhook: harness.Webhook, path: str, review: dict[str, Any]) -> dict[str, Any]:
    context: ssl.SSLContext = webhook.plane.webhook_caller_context(serving_ca=webhook.files.ca)
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{webhook.server.url}/{path}", json=review, ssl=context) as reply,
    ):
        assert reply.status == 200
        answer: dict[str, Any] = await reply.json()
    return answer


def _events_about(api: Api, name: str) -> list[dict[str, Any]]:
    listed = api.plane.kubectl(
        "get", "events", "-A", "-o", "json", f"--field-selector=involvedObject.name={name}"
    )
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


FORGERS = {"olivia": (HOLDER, []), "masters": ("mallory", ["system:masters"])}


@pytest.mark.parametrize("where", ["kube-system", "test"])
@pytest.mark.parametrize(("user", "groups"), FORGERS.values(), ids=FORGERS.keys())
def test_a_forged_review_for_a_cluster_that_never_existed_leaves_no_trace(
    api: Api, webhook: harness.Webhook, where: str, user: str, groups: list[str]
) -> None:
    namespace = "kube-system" if where == "kube-system" else api.namespace
    name = f"ghost-{uuid.uuid4().hex[:6]}"
    old = harness.cluster_manifest(name, namespace)
    answers = []
    for path, operation in (
        ("taloscluster-records", "CREATE"),
        ("taloscluster", "CREATE"),
        ("taloscluster-records", "UPDATE"),
        ("taloscluster", "UPDATE"),
    ):
        review = _review(
            operation=operation, namespace=namespace, name=name, user=user, groups=groups,
            old=old if operation == "UPDATE" else None,
        )  # fmt: skip
        answers.append(asyncio.run(_post(webhook, path, review))["response"])
    # the mutating half answered with the record it would store; nothing was stored
    assert answers[0]["allowed"] is True
    assert "patch" in answers[0]
    time.sleep(QUIET_SECONDS)
    assert _events_about(api, name) == []
    found = api.plane.kubectl("get", "taloscluster", name, "-n", namespace, check=False)
    assert found.returncode != 0
    assert "NotFound" in found.stderr


def test_a_forged_review_of_a_stored_cluster_records_nothing(
    api: Api, webhook: harness.Webhook
) -> None:
    """A review of a write that never reached the API server: the stored cluster has no
    record, so nothing is posted about it."""
    created = api.create(harness.cluster_manifest("prod", api.namespace), user=None)
    assert created.returncode == 0, created.stderr
    stored = api.cluster("prod")
    assert stored is not None
    review = _review(
        operation="UPDATE", namespace=api.namespace, name="prod", user=HOLDER, groups=[],
        old=stored,
    )  # fmt: skip
    for path in ("taloscluster-records", "taloscluster"):
        asyncio.run(_post(webhook, path, review))
    time.sleep(QUIET_SECONDS)
    assert api.override_events("prod") == []
    after = api.cluster("prod")
    assert after is not None
    assert after["spec"] == stored["spec"]
    assert records.RECORDS not in records.annotations_of(after)


def _forged_record(user: str) -> str:
    forged = records.Record(
        kind=records.RecordKind.OVERRIDE, user=user, detail="update",
        passed=(records.Passed(rule="TalosKubernetes", message="forged"),),
    )  # fmt: skip
    dumped = records.dump([forged])
    assert dumped is not None
    return dumped


@pytest.fixture
def without_mutating_half(webhook: harness.Webhook) -> Iterator[None]:
    """The MutatingWebhookConfiguration removed: the validating half alone must hold."""
    webhook.plane.kubectl("delete", "mutatingwebhookconfiguration", webhook.name)
    time.sleep(1.0)  # the API server drops a removed webhook within a moment
    try:
        yield
    finally:
        harness.apply_configuration(webhook.plane, webhook.mutating_configuration())
        time.sleep(1.0)


def test_a_record_a_user_writes_is_replaced_by_the_webhooks(api: Api) -> None:
    """nadia sets the records annotation to claim olivia overrode something: the stored
    object carries only what the webhook wrote (nothing), and no Event names olivia."""
    body = harness.cluster_manifest("prod", api.namespace)
    body["metadata"]["annotations"] = {records.RECORDS: _forged_record(HOLDER)}
    created = api.create(body, user=PLAIN)
    assert created.returncode == 0, created.stderr
    stored = api.cluster("prod")
    assert stored is not None
    assert records.RECORDS not in records.annotations_of(stored)
    annotate = api.plane.kubectl(
        "annotate", "taloscluster", "prod", "-n", api.namespace, "--overwrite",
        f"{records.RECORDS}={_forged_record(HOLDER)}", as_user=PLAIN, check=False,
    )  # fmt: skip
    assert annotate.returncode == 0, annotate.stderr
    after = api.cluster("prod")
    assert after is not None
    assert records.RECORDS not in records.annotations_of(after)
    assert api.override_events("prod") == []


def test_without_the_mutating_half_a_forged_record_or_stamp_is_refused(
    api: Api, without_mutating_half: None
) -> None:
    body = harness.cluster_manifest("prod", api.namespace)
    body["metadata"]["annotations"] = {records.RECORDS: _forged_record(HOLDER)}
    forged = api.create(body, user=PLAIN)
    assert forged.returncode != 0, forged.stdout
    assert "written by the ichor admission webhook alone" in forged.stderr, forged.stderr
    # an override with no record at all is refused too: it would go unrecorded
    plain = harness.cluster_manifest("prod", api.namespace, kubernetes="v1.31.9")
    unrecorded = api.create(plain, user=HOLDER)
    assert unrecorded.returncode != 0, unrecorded.stdout
    assert records.RECORDS in unrecorded.stderr
    assert api.cluster("prod") is None

    compatible = api.create(harness.cluster_manifest("prod", api.namespace), user=None)
    assert compatible.returncode == 0, compatible.stderr
    operation = {
        "apiVersion": kinds.API_VERSION,
        "kind": kinds.Kind.TALOS_OPERATION.value,
        "metadata": {
            "name": "up",
            "namespace": api.namespace,
            "annotations": {records.OVERRIDE_BY: HOLDER},
        },
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"},
    }
    stamp = api.create(operation, user=PLAIN)
    assert stamp.returncode != 0, stamp.stdout
    assert records.OVERRIDE_BY in stamp.stderr


def test_the_stamp_of_an_operation_cannot_be_imitated_or_changed(api: Api) -> None:
    created = api.create(harness.cluster_manifest("prod", api.namespace), user=None)
    assert created.returncode == 0, created.stderr

    def operation(name: str, *, override: bool, stamp: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": api.namespace}
        if stamp is not None:
            meta["annotations"] = {records.OVERRIDE_BY: stamp}
        return {
            "apiVersion": kinds.API_VERSION,
            "kind": kinds.Kind.TALOS_OPERATION.value,
            "metadata": meta,
            "spec": {
                "clusterRef": {"name": "prod"},
                "type": "talos",
                "version": "v1.14.4",
                "override": override,
            },
        }

    def stamp_of(name: str) -> str | None:
        found = api.plane.kubectl("get", "talosoperation", name, "-n", api.namespace, "-o", "json")
        value = records.annotations_of(json.loads(found.stdout)).get(records.OVERRIDE_BY)
        return value if isinstance(value, str) else None

    # nadia claims olivia's stamp on her own operation: the webhook writes the truth
    assert api.create(operation("mine", override=False, stamp=HOLDER), user=PLAIN).returncode == 0
    assert stamp_of("mine") is None
    # olivia's override is stamped with olivia, whatever she wrote
    done = api.create(operation("theirs", override=True, stamp="someone-else"), user=HOLDER)
    assert done.returncode == 0, done.stderr
    assert stamp_of("theirs") == HOLDER
    # nadia (who may patch operations) cannot move or remove the stamp
    for value in (PLAIN, None):
        patch = {"metadata": {"annotations": {records.OVERRIDE_BY: value}}}
        api.plane.kubectl(
            "patch", "talosoperation", "theirs", "-n", api.namespace, "--type=merge",
            "-p", json.dumps(patch), as_user=PLAIN, check=False,
        )  # fmt: skip
        assert stamp_of("theirs") == HOLDER


def test_the_adoption_marker_passes_nothing_on_an_update(api: Api) -> None:
    """The marker a user may set on a create is read on a create only: an update that
    carries it is judged as any other, so it cannot move a cluster to an incompatible
    target."""
    created = api.create(
        harness.cluster_manifest("prod", api.namespace, kubernetes="v1.31.5"), user=None
    )
    assert created.returncode == 0, created.stderr
    patch = {
        "metadata": {"annotations": {records.ADOPTION: "true"}},
        "spec": {"kubernetesVersion": "v1.32.0"},
    }
    result = api.plane.kubectl(
        "patch", "taloscluster", "prod", "-n", api.namespace, "--type=merge",
        "-p", json.dumps(patch), as_user=PLAIN, check=False,
    )  # fmt: skip
    assert result.returncode != 0, result.stdout
    assert "Talos 1.14 runs Kubernetes 1.33 to 1.37" in result.stderr
    stored = api.cluster("prod")
    assert stored is not None
    assert stored["spec"]["kubernetesVersion"] == "v1.31.5"


def test_an_adoption_of_a_declarative_spec_is_refused(api: Api) -> None:
    """An adoption stores what runs; a Declarative spec is a desired state: a create that
    is both is refused with the way to adopt (Operations, then switch)."""
    body = harness.cluster_manifest("prod", api.namespace, kubernetes="v1.31.5")
    body["metadata"]["annotations"] = {records.ADOPTION: "true"}
    body["spec"]["upgradeStrategy"] = "Declarative"
    result = api.create(body, user=PLAIN)
    assert result.returncode != 0, result.stdout
    assert "upgradeStrategy: Declarative" in result.stderr
    assert "adopt with upgradeStrategy Operations" in result.stderr
    assert api.cluster("prod") is None
    body["spec"]["upgradeStrategy"] = "Operations"
    adopted = api.create(body, user=PLAIN)
    assert adopted.returncode == 0, adopted.stderr
    assert "adopted as it runs" in adopted.stderr
