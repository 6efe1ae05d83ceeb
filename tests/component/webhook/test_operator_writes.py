"""Which identity a write is judged as: the operator's follow-up spec write carries an
operation's override only under the conditions the webhook reads from the stored
operation, never from the write.

The webhook runs as the chart's ServiceAccount, which holds no ``override`` verb. After an
overridden operation's Job succeeds the executor moves the cluster's spec to the target;
that write meets the same compatibility refusal and passes only because an operation of
that cluster, admitted with ``override: true``, has its Job recorded as succeeded by the
operator and targets exactly that version. Each test below removes one of those and
expects the refusal.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest

from tests.component.webhook import harness
from tests.component.webhook.conftest import HOLDER, PLAIN, Api

pytestmark = pytest.mark.component

REFUSAL = "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36"


def _operation(api: Api, version: str, *, override: bool, user: str = HOLDER) -> str:
    name = f"k8s-{uuid.uuid4().hex[:5]}"
    body = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"name": name, "namespace": api.namespace},
        "spec": {
            "clusterRef": {"name": "prod"},
            "type": "kubernetes",
            "version": version,
            "override": override,
        },
    }
    created = api.create(body, user=user)
    assert created.returncode == 0, created.stderr
    return name


def _job_succeeded(api: Api, name: str) -> None:
    """What the executor writes once the Job succeeded, before it moves the spec."""
    api.operator.patch_status(
        server=api.plane.server, ca_file=api.plane.ca_file, plural="talosoperations",
        name=name, namespace=api.namespace,
        status={
            "phase": "Running",
            "conditions": [
                {
                    "type": "Complete", "status": "False", "reason": "SpecUpdating",
                    "message": "the Job succeeded", "lastTransitionTime": "2026-12-03T08:00:00Z",
                }
            ],
        },
    )  # fmt: skip


def _as_operator(api: Api, spec: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return api.plane.kubectl(
        "patch", "taloscluster", "prod", "-n", api.namespace, "--type=merge",
        "-p", json.dumps({"spec": spec}),
        as_user=api.operator.username, as_groups=api.operator.groups, check=False,
    )  # fmt: skip


@pytest.fixture
def prod(api: Api) -> Api:
    created = api.create(harness.cluster_manifest("prod", api.namespace), user=None)
    assert created.returncode == 0, created.stderr
    api.set_cilium("prod", "1.20.4")
    return api


def _kubernetes(api: Api) -> str:
    cluster = api.cluster("prod")
    assert cluster is not None
    return str(cluster["spec"]["kubernetesVersion"])


def test_the_operator_carries_the_override_of_an_operation_whose_job_succeeded(
    prod: Api,
) -> None:
    name = _operation(prod, "v1.37.2", override=True)
    # the Job has not succeeded yet: the operator's write is judged as any other
    early = _as_operator(prod, {"kubernetesVersion": "v1.37.2"})
    assert early.returncode != 0, early.stdout
    assert REFUSAL in early.stderr
    assert prod.operator.username in early.stderr
    assert _kubernetes(prod) == "v1.36.6"

    _job_succeeded(prod, name)
    carried = _as_operator(prod, {"kubernetesVersion": "v1.37.2"})
    assert carried.returncode == 0, carried.stderr
    assert f"override by {prod.operator.username}" in carried.stderr
    assert _kubernetes(prod) == "v1.37.2"


@pytest.mark.parametrize(
    ("override", "target", "write"),
    [
        (False, "v1.36.7", {"kubernetesVersion": "v1.37.2"}),
        (True, "v1.37.1", {"kubernetesVersion": "v1.37.2"}),
        (True, "v1.37.2", {"kubernetesVersion": "v1.37.2", "talosVersion": "v1.14.4"}),
    ],
    ids=["operation-without-override", "another-target", "moves-two-fields"],
)
def test_nothing_else_is_carried(
    prod: Api, override: bool, target: str, write: dict[str, str]
) -> None:
    name = _operation(prod, target, override=override)
    _job_succeeded(prod, name)
    result = _as_operator(prod, write)
    assert result.returncode != 0, result.stdout
    assert REFUSAL in result.stderr or "is refused" in result.stderr, result.stderr
    assert _kubernetes(prod) == "v1.36.6"


def test_a_person_never_carries_an_operations_override(prod: Api) -> None:
    """The rule is the operator's: a person's identical write is judged as theirs."""
    name = _operation(prod, "v1.37.2", override=True)
    _job_succeeded(prod, name)
    result = prod.patch_spec("prod", {"kubernetesVersion": "v1.37.2"}, user=PLAIN)
    assert result.returncode != 0, result.stdout
    assert f"user '{PLAIN}' does not" in result.stderr, result.stderr
    assert _kubernetes(prod) == "v1.36.6"


def test_an_operation_of_another_cluster_is_not_carried(prod: Api) -> None:
    other = harness.cluster_manifest("other", prod.namespace)
    created = prod.create(other, user=None)
    assert created.returncode == 0, created.stderr
    prod.set_cilium("other", "1.20.4")
    body = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"name": "elsewhere", "namespace": prod.namespace},
        "spec": {
            "clusterRef": {"name": "other"},
            "type": "kubernetes",
            "version": "v1.37.2",
            "override": True,
        },
    }
    assert prod.create(body, user=HOLDER).returncode == 0
    _job_succeeded(prod, "elsewhere")
    result = _as_operator(prod, {"kubernetesVersion": "v1.37.2"})
    assert result.returncode != 0, result.stdout
    assert _kubernetes(prod) == "v1.36.6"
