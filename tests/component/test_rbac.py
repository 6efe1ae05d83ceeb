"""RBAC on the local control plane: impersonated users, client-cert users, custom verbs.

The operator's override rule rests on a custom verb (``override`` on ``talosclusters`` in
``ichor.dev``) answered by a SubjectAccessReview, so that is proven here against the real
authorizer; RBAC needs no CRD for a rule to name a resource.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes.aio import client

from tests.component import throwaway
from tests.harness import controlplane

pytestmark = pytest.mark.component

READER, OPS = "alice", "ops"


@pytest.fixture
def configmap_readers(control_plane: controlplane.ControlPlane, namespace: str) -> str:
    """A Role reading ConfigMaps in ``namespace``, bound to user alice and group ops."""
    control_plane.kubectl(
        "create", "role", "reader", "-n", namespace, "--verb=get,list", "--resource=configmaps"
    )
    control_plane.kubectl(
        "create", "rolebinding", "reader", "-n", namespace, "--role=reader",
        f"--user={READER}", f"--group={OPS}",
    )  # fmt: skip
    control_plane.kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=a=b")
    return namespace


@pytest.mark.parametrize(
    ("user", "groups", "allowed"),
    [
        pytest.param(READER, (), True, id="bound-user"),
        pytest.param("bob", (), False, id="unbound-user"),
        pytest.param("carol", (OPS,), True, id="bound-group"),
        pytest.param("dave", ("devs",), False, id="unbound-group"),
    ],
)
def test_impersonated_user_reads_only_with_a_role(
    control_plane: controlplane.ControlPlane,
    configmap_readers: str,
    user: str,
    groups: Sequence[str],
    allowed: bool,
) -> None:
    result = control_plane.kubectl(
        "get", "configmap", "settings", "-n", configmap_readers, "-o", "name",
        as_user=user, as_groups=groups, check=False,
    )  # fmt: skip
    if allowed:
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "configmap/settings"
    else:
        assert result.returncode != 0
        assert "Forbidden" in result.stderr
        assert f'User "{user}" cannot get resource "configmaps"' in result.stderr


@pytest.mark.parametrize("impersonate", [False, True], ids=["client-cert", "as"])
@pytest.mark.parametrize(
    ("user", "groups", "allowed"),
    [(READER, (), True), ("bob", (), False), ("carol", (OPS,), True)],
)
def test_user_kubeconfig_meets_the_same_rules(
    control_plane: controlplane.ControlPlane,
    configmap_readers: str,
    user_kubeconfig: Callable[..., Path],
    user: str,
    groups: Sequence[str],
    allowed: bool,
    impersonate: bool,
) -> None:
    kubeconfig = user_kubeconfig(user, groups=groups, impersonate=impersonate)
    whoami = control_plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig)
    info = json.loads(whoami.stdout)["status"]["userInfo"]
    assert info["username"] == user
    assert set(groups) <= set(info["groups"])
    result = control_plane.kubectl(
        "get", "configmaps", "-n", configmap_readers, kubeconfig=kubeconfig, check=False
    )
    assert (result.returncode == 0) is allowed, result.stderr


@pytest.fixture
def overriders(control_plane: controlplane.ControlPlane, namespace: str) -> str:
    """`override` on talosclusters.ichor.dev in ``namespace`` for alice and platform-admins."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "override", "namespace": namespace},
        "rules": [
            {"apiGroups": ["ichor.dev"], "resources": ["talosclusters"], "verbs": ["override"]}
        ],
    }
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(role))
    control_plane.kubectl(
        "create", "rolebinding", "override", "-n", namespace, "--role=override",
        f"--user={READER}", "--group=platform-admins",
    )  # fmt: skip
    return namespace


@pytest.mark.parametrize(
    ("user", "groups", "verb", "elsewhere", "allowed"),
    [
        pytest.param(READER, (), "override", False, True, id="bound-user"),
        pytest.param("erin", ("platform-admins",), "override", False, True, id="bound-group"),
        pytest.param("bob", (), "override", False, False, id="unbound-user"),
        pytest.param(READER, (), "update", False, False, id="other-verb"),
        pytest.param(READER, (), "override", True, False, id="other-namespace"),
    ],
)
async def test_subject_access_review_answers_the_custom_override_verb(
    overriders: str,
    kube_api: Any,
    user: str,
    groups: Sequence[str],
    verb: str,
    elsewhere: bool,
    allowed: bool,
) -> None:
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=user,
            groups=list(groups),
            resource_attributes=client.V1ResourceAttributes(
                group="ichor.dev",
                resource="talosclusters",
                verb=verb,
                namespace="default" if elsewhere else overriders,
                name="prod",
            ),
        )
    )
    answer = await client.AuthorizationV1Api(kube_api).create_subject_access_review(review)
    assert answer.status is not None
    assert answer.status.allowed is allowed
    if allowed:
        assert "RBAC: allowed by RoleBinding" in str(answer.status.reason)


@pytest.mark.parametrize(("user", "answer"), [(READER, "yes"), ("bob", "no")])
def test_kubectl_auth_can_i_sees_a_custom_verb_on_an_installed_kind(
    control_plane: controlplane.ControlPlane, namespace: str, user: str, answer: str
) -> None:
    # kubectl maps the resource through discovery first; for a kind the server does not
    # serve it sends the unparsed "plural.group" and the answer is always "no". Hence a
    # throwaway kind here (installing a stand-in talosclusters CRD would clash with the
    # real one other tests apply).
    widgets = throwaway.install(control_plane, "rbac.ichor-test.dev")
    control_plane.kubectl(
        "create", "role", "override", "-n", namespace, "--verb=override",
        f"--resource={widgets}",
    )  # fmt: skip
    control_plane.kubectl(
        "create", "rolebinding", "override", "-n", namespace, "--role=override",
        f"--user={READER}",
    )  # fmt: skip
    result = control_plane.kubectl(
        "auth", "can-i", "override", widgets, "-n", namespace, as_user=user, check=False
    )
    assert result.stdout.strip() == answer
