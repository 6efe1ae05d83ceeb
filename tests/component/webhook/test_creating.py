"""The operation the controller starts by itself, against the real API server and webhook,
with the operator's identity (the chart's ServiceAccount and ClusterRole).

The starter is judged exactly as a person's create is: a version the rules refuse stays
refused (the operator holds no override verb, and the starter cannot ask for one); a
restart that starts the same request meets the first operation, never a second; nobody
but the operator can mark an operation as the controller's own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes.aio import config
from kubernetes.aio.client.api_client import ApiClient

from ichor.api import kinds
from ichor.api.talosoperation import OperationType, StartedBy
from ichor.controller.talosoperation import creating, start_request
from tests.component.webhook import harness
from tests.component.webhook.conftest import HOLDER, PLAIN, Api
from tests.support import table

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session")
async def operator_api(api: Api) -> AsyncIterator[ApiClient]:
    made = await config.new_client_from_config(config_file=str(api.operator.kubeconfig))
    try:
        yield made
    finally:
        await made.close()


def _prod(api: Api) -> start_request.ClusterTarget:
    created = api.create(harness.cluster_manifest("prod", api.namespace), user=None)
    assert created.returncode == 0, created.stderr
    api.set_cilium("prod", "1.20.4")
    body = api.cluster("prod")
    assert body is not None
    return start_request.ClusterTarget.from_body(body)


def _request(cluster: start_request.ClusterTarget, kind: OperationType, version: str) -> Any:
    return start_request.StartRequest(
        cluster=cluster, type=kind, version=version, started_by=StartedBy.AUTO_PATCH
    )


def _operations(api: Api) -> list[dict[str, Any]]:
    listed = api.plane.kubectl("get", "talosoperations", "-n", api.namespace, "-o", "json")
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


async def test_a_start_is_admitted_as_the_operators_and_a_restart_makes_no_second(
    api: Api, operator_api: ApiClient
) -> None:
    cluster = _prod(api)
    request = _request(cluster, OperationType.TALOS, "v1.14.4")
    first = await creating.start_operation(operator_api, request=request)
    assert first.created
    assert first.name == start_request.operation_name(request)
    again = await creating.start_operation(operator_api, request=request)
    assert not again.created
    assert again.body["metadata"]["uid"] == first.body["metadata"]["uid"]
    (stored,) = _operations(api)
    assert stored["metadata"]["labels"][start_request.STARTED_BY] == "auto-patch"
    assert stored["metadata"]["ownerReferences"][0]["uid"] == cluster.uid
    assert stored["spec"]["override"] is False
    # no override was admitted, so nothing is recorded for anyone
    assert "ichor.dev/override-by" not in (stored["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    ("kind", "version", "says"),
    [
        # Cilium 1.20 runs Kubernetes up to 1.36: a compatibility refusal (overridable
        # for a holder of the verb, which the operator is not)
        (OperationType.KUBERNETES, "v1.37.1", "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36"),
        # a minor this build does not know: never overridable
        (OperationType.TALOS, table.unknown_talos(), f"Talos {table.unknown_talos()} is refused"),
        # not newer than what runs
        (OperationType.TALOS, "v1.14.2", "v1.14.2"),
    ],
    ids=["incompatible", "unknown", "downgrade"],
)
async def test_a_version_the_rules_refuse_is_refused_for_the_operator_too(
    api: Api, operator_api: ApiClient, kind: OperationType, version: str, says: str
) -> None:
    cluster = _prod(api)
    with pytest.raises(creating.StartRefused) as refused:
        await creating.start_operation(operator_api, request=_request(cluster, kind, version))
    assert says in refused.value.message, refused.value.message
    assert refused.value.status == 403
    assert _operations(api) == []


async def test_the_operators_identity_holds_no_override(api: Api) -> None:
    """Even a hand-made create with ``override: true`` in the operator's name is refused
    for the verb: the identity auto-patch runs as is no override-holder."""
    _prod(api)
    body = {
        "apiVersion": kinds.API_VERSION,
        "kind": "TalosOperation",
        "metadata": {"name": "forced", "namespace": api.namespace},
        "spec": {
            "clusterRef": {"name": "prod"},
            "type": "kubernetes",
            "version": "v1.37.1",
            "override": True,
        },
    }
    result = api.plane.kubectl(
        "create", "-f", "-", input=json.dumps(body),
        as_user=api.operator.username, as_groups=api.operator.groups, check=False,
    )  # fmt: skip
    assert result.returncode != 0, result.stdout
    assert f"user {api.operator.username!r} does not hold" in result.stderr, result.stderr
    assert _operations(api) == []


def _marked(api: Api, name: str, value: str = "auto-patch") -> dict[str, Any]:
    return {
        "apiVersion": kinds.API_VERSION,
        "kind": "TalosOperation",
        "metadata": {
            "name": name,
            "namespace": api.namespace,
            "labels": {start_request.STARTED_BY: value},
        },
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"},
    }


@pytest.mark.parametrize("user", [PLAIN, HOLDER], ids=["user", "holder-of-the-verb"])
async def test_nobody_but_the_operator_marks_an_operation_as_the_controllers(
    api: Api, user: str
) -> None:
    _prod(api)
    created = api.create(_marked(api, "forged"), user=user)
    assert created.returncode != 0, created.stdout
    assert "ichor.dev/started-by" in created.stderr, created.stderr
    assert "only by the operator" in created.stderr
    # nor on an operation of their own, later
    plain = _marked(api, "plain")
    del plain["metadata"]["labels"]
    assert api.create(plain, user=user).returncode == 0
    labelled = api.plane.kubectl(
        "label", "talosoperation", "plain", "-n", api.namespace,
        f"{start_request.STARTED_BY}=auto-patch", as_user=user, check=False,
    )  # fmt: skip
    assert labelled.returncode != 0, labelled.stdout
    assert "added, changed or removed only by the operator" in labelled.stderr


async def test_a_namesake_a_person_made_is_never_taken_for_the_controllers(
    api: Api, operator_api: ApiClient
) -> None:
    """A person who guesses the name can only block the start (it says so), never make
    the controller adopt their operation."""
    cluster = _prod(api)
    request = _request(cluster, OperationType.TALOS, "v1.14.4")
    namesake = _marked(api, start_request.operation_name(request))
    del namesake["metadata"]["labels"]
    assert api.create(namesake, user=PLAIN).returncode == 0
    with pytest.raises(creating.StartRefused) as refused:
        await creating.start_operation(operator_api, request=request)
    assert "was not started by auto-patch" in refused.value.message
    assert refused.value.status == 409
    (stored,) = _operations(api)
    assert start_request.STARTED_BY not in (stored["metadata"].get("labels") or {})
