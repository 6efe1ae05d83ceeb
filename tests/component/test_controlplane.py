"""The local control plane is a real API server: versions, CRD schemas, status, conflicts."""

from __future__ import annotations

import json
import re
from typing import Any, cast

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from tests.component import throwaway
from tests.harness import controlplane

pytestmark = pytest.mark.component

GROUP = "schema.ichor-test.dev"


@pytest.fixture(scope="module")
def widgets(control_plane: controlplane.ControlPlane) -> str:
    return throwaway.install(control_plane, GROUP)


def _create(
    plane: controlplane.ControlPlane, *, namespace: str, name: str, spec: dict[str, Any]
) -> dict[str, Any]:
    body = throwaway.widget(group=GROUP, name=name, namespace=namespace, spec=spec)
    result = plane.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(body))
    created: dict[str, Any] = json.loads(result.stdout)
    return created


def _get(plane: controlplane.ControlPlane, *, namespace: str, name: str) -> dict[str, Any]:
    result = plane.kubectl("get", f"widgets.{GROUP}", name, "-n", namespace, "-o", "json")
    got: dict[str, Any] = json.loads(result.stdout)
    return got


def test_server_and_kubectl_report_the_release_they_were_built_as(
    control_plane: controlplane.ControlPlane,
) -> None:
    versions = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    server, kubectl = versions["serverVersion"], versions["clientVersion"]
    assert re.fullmatch(r"v1\.\d+\.\d+", server["gitVersion"]), server
    assert server["gitVersion"] == kubectl["gitVersion"]
    assert server["minor"] == server["gitVersion"].split(".")[1]


def test_admin_is_in_system_masters(control_plane: controlplane.ControlPlane) -> None:
    review = json.loads(control_plane.kubectl("auth", "whoami", "-o", "json").stdout)
    assert review["status"]["userInfo"]["username"] == controlplane.ADMIN_USER
    assert "system:masters" in review["status"]["userInfo"]["groups"]


def test_custom_object_round_trips_with_its_status_subresource(
    control_plane: controlplane.ControlPlane, namespace: str, widgets: str
) -> None:
    created = _create(
        control_plane, namespace=namespace, name="w1", spec={"size": "small", "replicas": 2}
    )
    assert created["spec"] == {"size": "small", "replicas": 2}
    assert created["metadata"]["generation"] == 1
    assert "status" not in created

    control_plane.kubectl(
        "patch", widgets, "w1", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"phase": "Ready", "observedGeneration": 1}}),
    )  # fmt: skip
    # Through the main resource, status is ignored and only spec changes (and generation).
    control_plane.kubectl(
        "patch", widgets, "w1", "-n", namespace, "--type=merge",
        "-p", json.dumps({"status": {"phase": "Overwritten"}, "spec": {"replicas": 3}}),
    )  # fmt: skip

    got = _get(control_plane, namespace=namespace, name="w1")
    assert got["status"] == {"phase": "Ready", "observedGeneration": 1}
    assert got["spec"]["replicas"] == 3
    assert got["metadata"]["generation"] == 2


async def test_python_client_reads_status_and_meets_resource_version_conflicts(
    control_plane: controlplane.ControlPlane, namespace: str, widgets: str, kube_api: Any
) -> None:
    _create(control_plane, namespace=namespace, name="w2", spec={"size": "large"})
    api = client.CustomObjectsApi(kube_api)
    where = (GROUP, throwaway.VERSION, namespace, throwaway.PLURAL, "w2")

    stale = cast(dict[str, Any], await api.get_namespaced_custom_object(*where))
    patch = [{"op": "add", "path": "/status", "value": {"phase": "Ready"}}]
    # kubernetes.aio sends a custom object's patch as a merge patch unless told otherwise
    await api.patch_namespaced_custom_object_status(
        *where, patch, _content_type="application/json-patch+json"
    )
    status = cast(dict[str, Any], await api.get_namespaced_custom_object_status(*where))
    assert status["status"] == {"phase": "Ready"}

    stale["spec"]["replicas"] = 5
    with pytest.raises(ApiException) as conflict:
        await api.replace_namespaced_custom_object(*where, stale)
    assert conflict.value.status == 409
    assert "the object has been modified" in str(conflict.value.body)


@pytest.mark.parametrize(
    ("spec", "refusal"),
    [
        pytest.param({"size": "enormous"}, r'spec\.size: Unsupported value: "enormous"', id="enum"),
        pytest.param(
            {"size": "small", "replicas": -1},
            r"spec\.replicas: Invalid value: -1: spec\.replicas in body should be greater than"
            r" or equal to 0",
            id="minimum",
        ),
        pytest.param(
            {"size": "small", "replicas": 11},
            r"spec\.replicas in body should be less than or equal to 10",
            id="maximum",
        ),
        pytest.param(
            {"size": "small", "replicas": "two"},
            r"spec\.replicas in body must be of type integer",
            id="type",
        ),
        pytest.param({"replicas": 1}, r"spec\.size: Required value", id="required"),
    ],
)
def test_schema_refuses_an_invalid_object(
    control_plane: controlplane.ControlPlane,
    namespace: str,
    widgets: str,
    spec: dict[str, Any],
    refusal: str,
) -> None:
    body = throwaway.widget(group=GROUP, name="bad", namespace=namespace, spec=spec)
    result = control_plane.kubectl("create", "-f", "-", input=json.dumps(body), check=False)
    assert result.returncode != 0
    assert "is invalid" in result.stderr
    assert re.search(refusal, result.stderr), result.stderr
    missing = control_plane.kubectl("get", widgets, "bad", "-n", namespace, check=False)
    assert "NotFound" in missing.stderr
