"""The webhook served in-process and called by the real API server, and two users.

``olivia`` holds the override verb through a ClusterRole; ``nadia`` may write clusters
and operations but does not hold it. Both are reached with ``kubectl --as``, as a person
would try them. The webhook's configuration lives only while this folder's tests run, so
other tests (the controller's) write TalosClusters without it.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import yaml

from ichor.api import records
from tests.component.webhook import harness
from tests.harness import account, controlplane
from tests.support import rbac

HOLDER = "olivia"
PLAIN = "nadia"
EDITOR_ROLE = "ichor-webhook-test-editor"
OVERRIDE_ROLE = "ichor-webhook-test-override"


@pytest.fixture(scope="package")
def webhook(
    control_plane: controlplane.ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    with harness.running(
        control_plane, tmp_path_factory.mktemp("webhook"), operator_account
    ) as running:
        yield running


def _rbac() -> list[dict[str, Any]]:
    editor = rbac.cluster_role(
        EDITOR_ROLE,
        [
            {
                "apiGroups": ["ichor.dev"],
                "resources": ["talosclusters", "talosoperations"],
                "verbs": ["get", "list", "watch", "create", "update", "patch"],
            }
        ],
    )
    return [
        editor,
        rbac.override_role(OVERRIDE_ROLE),
        rbac.binding(EDITOR_ROLE, [HOLDER, PLAIN]),
        rbac.binding(OVERRIDE_ROLE, [HOLDER]),
    ]


@pytest.fixture(scope="package")
def users(control_plane: controlplane.ControlPlane) -> Iterator[None]:
    manifest = yaml.safe_dump_all(_rbac())
    control_plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


class Api:
    """kubectl as a user, the way a person tries the webhook."""

    def __init__(
        self, plane: controlplane.ControlPlane, namespace: str, operator: account.Account
    ) -> None:
        self.plane = plane
        self.namespace = namespace
        self.operator = operator

    def create(
        self,
        body: dict[str, Any],
        *,
        user: str | None,
        dry_run: bool = False,
        groups: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        args = ["create", "-n", self.namespace, "-f", "-"]
        if dry_run:
            args.append("--dry-run=server")
        return self.plane.kubectl(
            *args, input=json.dumps(body), as_user=user, as_groups=groups, check=False
        )

    def patch_spec(
        self,
        name: str,
        spec: dict[str, Any],
        *,
        user: str | None,
        dry_run: bool = False,
        groups: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        args = ["patch", "taloscluster", name, "-n", self.namespace, "--type=merge"]
        args += ["-p", json.dumps({"spec": spec})]
        if dry_run:
            args.append("--dry-run=server")
        return self.plane.kubectl(*args, as_user=user, as_groups=groups, check=False)

    def set_cilium(self, name: str, version: str) -> None:
        """What the operator would have observed (only its account may write status)."""
        self.operator.patch_status(
            server=self.plane.server, ca_file=self.plane.ca_file, plural="talosclusters",
            name=name, namespace=self.namespace,
            status={"cni": {"detected": "cilium", "detectedVersion": version}},
        )  # fmt: skip

    def cluster(self, name: str) -> dict[str, Any] | None:
        result = self.plane.kubectl(
            "get", "taloscluster", name, "-n", self.namespace, "-o", "json", check=False
        )
        if result.returncode != 0:
            assert "NotFound" in result.stderr, result.stderr
            return None
        found: dict[str, Any] = json.loads(result.stdout)
        return found

    def settle(self, *, within: float = 20.0) -> None:
        """Until no object of the namespace holds an admission record the operator has not
        posted yet: every Event of what was stored is there by then."""
        deadline = time.monotonic() + within
        while pending := records_pending(self.plane, self.namespace):
            if time.monotonic() > deadline:
                raise AssertionError(f"admission records not posted within {within} s: {pending}")
            time.sleep(0.2)

    def override_events(self, name: str) -> list[dict[str, Any]]:
        self.settle()
        result = self.plane.kubectl(
            "get", "events", "-n", self.namespace, "-o", "json",
            f"--field-selector=involvedObject.name={name},reason=Override",
        )  # fmt: skip
        items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
        return items


def records_pending(plane: controlplane.ControlPlane, namespace: str) -> list[str]:
    """Objects of ``namespace`` that still hold admission records."""
    listed = plane.kubectl("get", "talosclusters,talosoperations", "-n", namespace, "-o", "json")
    return [
        f"{item['kind']} {item['metadata']['name']}"
        for item in json.loads(listed.stdout)["items"]
        if records.RECORDS in (item["metadata"].get("annotations") or {})
    ]


@pytest.fixture
def api(
    control_plane: controlplane.ControlPlane, webhook: harness.Webhook, users: None, namespace: str
) -> Api:
    return Api(control_plane, namespace, webhook.operator)
