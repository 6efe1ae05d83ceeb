"""The ``ichor`` CLI against the real API server, with the webhook answering its plans.

The webhook runs in-process (the webhook tests' harness) and is registered only while
this folder's tests run. Two users reach the API server with client certificates of
their own, as a person's kubeconfig would: ``nadia`` may read clusters and create
operations, ``olivia`` also holds the override verb. No controller runs: a test writes
what the controller would have observed (``status.cni``) and what the release check
would have recorded (``IchorInstallation.status.upgradeTargets``) itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ichor.api import kinds
from ichor.cli.main import main
from tests.component.webhook import harness
from tests.component.webhook.conftest import records_pending
from tests.harness import account, controlplane
from tests.support import rbac, table

PLAIN = "nadia"
HOLDER = "olivia"
EDITOR_ROLE = "ichor-cli-test-editor"
OVERRIDE_ROLE = "ichor-cli-test-override"

TALOS_TAGS = [
    *(f"v1.12.{p}" for p in range(12)),
    *(f"v1.13.{p}" for p in range(10)),
    *(f"v1.14.{p}" for p in range(6)),
    "v1.14.0-rc.1",
    f"{table.unknown_talos()}-alpha.0",
    "1.14.5",
    table.unknown_talos(),  # the first minor this build does not know
]
KUBERNETES_TAGS = [
    *(f"v1.33.{p}" for p in range(9)),
    *(f"v1.34.{p}" for p in range(7)),
    *(f"v1.35.{p}" for p in range(6)),
    *(f"v1.36.{p}" for p in range(8)),
    *(f"v1.37.{p}" for p in range(3)),
    "v1.38.0",
    "v1.37.0-rc.1",
    "1.36.7",
]


@pytest.fixture(scope="package")
def webhook(
    control_plane: controlplane.ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
    operator_account: account.Account,
) -> Iterator[harness.Webhook]:
    with harness.running(
        control_plane, tmp_path_factory.mktemp("cli-webhook"), operator_account
    ) as running:
        yield running


def _rbac() -> list[dict[str, Any]]:
    editor = rbac.cluster_role(
        EDITOR_ROLE,
        [
            {
                "apiGroups": [kinds.GROUP],
                "resources": ["talosclusters", "talosoperations", "ichorinstallations"],
                "verbs": ["get", "list", "watch", "create"],
            },
            # `ichor adopt` stores the workload's kubeconfig in a Secret, and a
            # TalosCluster may name only a Secret its writer may read (the webhook asks)
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "get"]},
        ],
    )
    return [
        editor,
        rbac.override_role(OVERRIDE_ROLE),
        rbac.binding(EDITOR_ROLE, [PLAIN, HOLDER]),
        rbac.binding(OVERRIDE_ROLE, [HOLDER]),
    ]


@pytest.fixture(scope="package")
def user_configs(control_plane: controlplane.ControlPlane) -> Iterator[dict[str, Path]]:
    """Kubeconfigs of the admin, nadia and olivia (client certificates of their own)."""
    manifest = yaml.safe_dump_all(_rbac())
    control_plane.kubectl("apply", "-f", "-", input=manifest)
    try:
        yield {
            "admin": control_plane.kubeconfig,
            PLAIN: control_plane.user_kubeconfig(PLAIN),
            HOLDER: control_plane.user_kubeconfig(HOLDER),
        }
    finally:
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


class Cli:
    """``ichor`` as a user runs it, in this process (``main`` with its exit code)."""

    def __init__(
        self,
        plane: controlplane.ControlPlane,
        namespace: str,
        configs: dict[str, Path],
        capsys: pytest.CaptureFixture[str],
        operator: account.Account,
    ) -> None:
        self.plane = plane
        self.namespace = namespace
        self.configs = configs
        self.capsys = capsys
        self.operator = operator

    def __call__(self, *args: str, user: str = "admin") -> Result:
        self.capsys.readouterr()
        argv = ["--kubeconfig", str(self.configs[user]), "-n", self.namespace, *args]
        code = main(argv)
        captured = self.capsys.readouterr()
        assert "Traceback" not in captured.err, captured.err
        return Result(code=code, out=captured.out, err=captured.err)

    # -- what the controller and the release check would have written ---------------------

    def cluster(
        self,
        name: str,
        *,
        talos: str = "v1.14.3",
        kubernetes: str = "v1.36.6",
        contract: str = "v1.14",
        cilium: str | None = "1.20.4",
        cni: str | None = "cilium",
    ) -> None:
        body = harness.cluster_manifest(
            name, self.namespace, talos=talos, kubernetes=kubernetes, contract=contract
        )
        self.plane.kubectl("create", "-f", "-", input=json.dumps(body))
        if cni is not None:
            status: dict[str, Any] = {"cni": {"detected": cni}}
            if cilium is not None:
                status["cni"]["detectedVersion"] = cilium
            self.set_status(name, status)

    def set_status(
        self, name: str, status: dict[str, Any], *, plural: str = "talosclusters"
    ) -> None:
        """Write ``status`` as the operator would (only its account may)."""
        self.operator.patch_status(
            server=self.plane.server, ca_file=self.plane.ca_file, plural=plural, name=name,
            namespace=self.namespace, status=status,
        )  # fmt: skip

    def get(self, kind: str, name: str | None = None) -> Any:
        args = ["get", kind, "-n", self.namespace, "-o", "json"]
        if name is not None:
            args.insert(2, name)
        result = self.plane.kubectl(*args, check=False)
        if result.returncode != 0:
            return None
        return json.loads(result.stdout)

    def operations(self) -> list[dict[str, Any]]:
        found = self.get("talosoperations")
        return list((found or {}).get("items") or [])

    def events(self, reason: str) -> list[dict[str, Any]]:
        """Events of the namespace, once the operator posted every admission record."""
        deadline = time.monotonic() + 30
        while records_pending(self.plane, self.namespace):
            assert time.monotonic() < deadline, "the admission records were not posted"
            time.sleep(0.2)
        result = self.plane.kubectl(
            "get", "events", "-n", self.namespace, "-o", "json",
            f"--field-selector=reason={reason}",
        )  # fmt: skip
        items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
        return items


@pytest.fixture
def cli(
    control_plane: controlplane.ControlPlane,
    webhook: harness.Webhook,
    user_configs: dict[str, Path],
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> Cli:
    return Cli(control_plane, namespace, user_configs, capsys, webhook.operator)


@pytest.fixture
def recorded(
    control_plane: controlplane.ControlPlane, operator_account: account.Account
) -> Iterator[Any]:
    """``recorded(talos=[...], kubernetes=[...])`` writes the IchorInstallation singleton
    as the release check would have; it is removed after the test."""

    def write(
        *,
        talos: Sequence[str] | None = TALOS_TAGS,
        kubernetes: Sequence[str] | None = KUBERNETES_TAGS,
        talos_error: str | None = None,
        enabled: bool = True,
    ) -> None:
        body = {
            "apiVersion": kinds.API_VERSION,
            "kind": kinds.Kind.ICHOR_INSTALLATION.value,
            "metadata": {"name": kinds.INSTALLATION_NAME},
            "spec": {"releaseCheck": {"enabled": enabled}},
        }
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(body))
        targets: dict[str, Any] = {"checkedAt": "2026-12-03T08:00:00Z"}
        if talos is not None:
            targets["talos"] = list(talos)
        if kubernetes is not None:
            targets["kubernetes"] = list(kubernetes)
        if talos_error is not None:
            targets["talosError"] = talos_error
        operator_account.patch_status(
            server=control_plane.server, ca_file=control_plane.ca_file,
            plural=kinds.Plural.ICHOR_INSTALLATIONS.value, name=kinds.INSTALLATION_NAME,
            namespace=None, status={"upgradeTargets": targets},
        )  # fmt: skip

    try:
        yield write
    finally:
        control_plane.kubectl(
            "delete", "ichorinstallation", kinds.INSTALLATION_NAME, "--ignore-not-found",
            "--wait=false",
        )  # fmt: skip
