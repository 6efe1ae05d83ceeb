"""Upgrading Ichor itself on the real node: ``helm upgrade`` from the chart before the
IchorInstallation's ``talosFailingSince`` field existed to this chart (docs/upgrading.md).

The previous chart is taken from git: the parent of the commit that added the field to
``crds/``. It is installed with its own CRDs, running this operator image: the API server
drops the field the operator writes, without an error. ``helm upgrade`` to this chart runs
the CRD hook Job before the Deployment changes; the new schema is in place before the new
Pod starts, and the operator's writes of the field are kept. The shared release is put
back as it was afterwards, for the later tests.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.component.chart import helm
from tests.node.conftest import RELEASE, OnNode, run_helm, wait_available

pytestmark = pytest.mark.timeout(1500)

ROOT = Path(__file__).resolve().parents[2]
CRD = "ichorinstallations.ichor.dev"
CRD_FILE = "crds/ichorinstallations.ichor.dev.yaml"
FIELD = "talosFailingSince"


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=False)


def previous_chart(into: Path) -> tuple[str, Path]:
    """The chart of the commit before the one that added ``FIELD`` to the CRDs."""
    found = _git("log", "--reverse", "--format=%H", f"-S{FIELD}", "--", CRD_FILE)
    commits = found.stdout.decode().split()
    assert found.returncode == 0, found.stderr.decode()
    assert commits, (
        f"git log finds no commit adding {FIELD} to {CRD_FILE}: the test needs the "
        "repository's history (git fetch --unshallow)"
    )
    parent = f"{commits[0]}^"
    archive = into / "previous.tar"
    made = _git("archive", "--format=tar", f"--output={archive}", parent, "charts/ichor")
    assert made.returncode == 0, made.stderr.decode()
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    chart = into / "charts" / "ichor"
    assert FIELD not in (chart / CRD_FILE).read_text(), "the previous chart has the field"
    return parent, chart


def _crd(on_node: OnNode) -> dict[str, Any]:
    crd: dict[str, Any] = json.loads(
        on_node.kubectl("get", "crd", CRD, "-o", "json", "--show-managed-fields").stdout
    )
    return crd


def _schema_has_field(crd: dict[str, Any]) -> bool:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    targets = schema["properties"]["status"]["properties"]["upgradeTargets"]["properties"]
    return FIELD in targets


def _targets(on_node: OnNode) -> dict[str, Any]:
    text = on_node.kubectl(
        "get", "ichorinstallation", "ichor", "-o", "jsonpath={.status.upgradeTargets}",
        check=False,
    ).stdout  # fmt: skip
    found: dict[str, Any] = json.loads(text) if text.strip() else {}
    return found


def _wait_for(on_node: OnNode, check: str, *, within: float = 180) -> dict[str, Any]:
    """Until the recorded ``upgradeTargets`` hold ``check`` (a key); returns them."""
    deadline = time.monotonic() + within
    while True:
        targets = _targets(on_node)
        if check in targets:
            return targets
        if time.monotonic() > deadline:
            raise AssertionError(f"no {check} in {targets} after {within:.0f} s:\n{on_node.logs()}")
        time.sleep(2)


def within_schema(values: Any, schema: dict[str, Any]) -> Any:
    """``values`` without the keys ``schema`` (a chart's values.schema.json) does not
    define: the node tier's values name settings newer than the previous chart (such as
    ``executor.ciliumChart``), which its schema refuses. None of them is read here: this
    test runs no operation, only the release check."""
    properties = schema.get("properties") or {}
    if not isinstance(values, dict):
        return values
    closed = schema.get("additionalProperties") is False
    return {
        key: within_schema(value, properties.get(key, {}))
        for key, value in values.items()
        if key in properties or not closed
    }


def previous_values(on_node: OnNode, previous: Path, into: Path) -> Path:
    schema = json.loads((previous / "values.schema.json").read_text())
    values = yaml.safe_load(on_node.values_file.read_text())
    path = into / "previous-values.yaml"
    path.write_text(yaml.safe_dump(within_schema(values, schema)))
    return path


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_helm_upgrade_from_the_previous_chart_applies_the_crds_before_the_new_operator(
    on_node: OnNode, tmp_path: Path
) -> None:
    parent, previous = previous_chart(tmp_path)
    cluster, namespace = on_node.cluster, on_node.namespace
    run_helm(cluster, "uninstall", RELEASE, "-n", namespace, "--wait")
    try:
        # The CRDs as the previous chart's install left them (helm keeps CRDs on uninstall
        # and never changes existing ones on install): replaced whole, so no field of this
        # chart's schema stays behind.
        on_node.kubectl("replace", "-f", str(previous / "crds"))
        on_node.kubectl("wait", "--for=condition=Established", f"crd/{CRD}")
        assert not _schema_has_field(_crd(on_node))

        run_helm(
            cluster, "install", RELEASE, str(previous), "-n", namespace,
            "-f", str(previous_values(on_node, previous, tmp_path)),
        )  # fmt: skip
        wait_available(cluster, namespace)
        # This operator image writes FIELD with the failed listing; the old schema drops it.
        before = _wait_for(on_node, "talosError")
        assert FIELD not in before, f"the previous chart's schema ({parent}) kept {FIELD}"

        # A new Pod, as a release whose Deployment changed gets (here the image is the
        # same on both sides, so an annotation changes it)
        run_helm(
            cluster, "upgrade", RELEASE, str(helm.CHART), "-n", namespace,
            "-f", str(on_node.values_file), "--set-string", f"podAnnotations.upgraded={parent}",
        )  # fmt: skip
        wait_available(cluster, namespace)
        crd = _crd(on_node)
        assert _schema_has_field(crd)
        chart = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())
        assert crd["metadata"]["annotations"]["ichor.dev/chart-version"] == chart["version"]
        # applied before the new operator's Pod was created
        managed = crd["metadata"]["managedFields"]
        applied = max(_stamp(m["time"]) for m in managed if m["manager"] == "ichor-crds")
        pod = on_node.pod()
        assert pod["metadata"]["annotations"]["upgraded"] == parent, "not the upgraded Pod"
        created = _stamp(pod["metadata"]["creationTimestamp"])
        assert applied <= created, (applied, created)
        # the hook's Job, account and role went once it succeeded
        leftovers = on_node.kubectl(
            "get", "jobs,serviceaccounts,configmaps", "-n", namespace, "-o", "name", check=False
        ).stdout
        assert f"{RELEASE}-crds" not in leftovers, leftovers
        gone = on_node.kubectl("get", "clusterrole", f"{RELEASE}-crds", check=False)
        assert gone.returncode != 0

        # A spec change makes the release check run at once; its write now keeps FIELD.
        on_node.kubectl(
            "patch", "ichorinstallation", "ichor", "--type=merge",
            "-p", json.dumps({"spec": {"releaseCheck": {"interval": "7h"}}}),
        )  # fmt: skip
        after = _wait_for(on_node, FIELD)
        assert _stamp(after[FIELD]) <= _stamp(after["checkedAt"])
    finally:
        # Put the shared release back as the on_node fixture made it (whichever chart, if
        # any, a failure left installed).
        helm.run(
            "--kubeconfig", str(cluster.kubeconfig), "uninstall", RELEASE, "-n", namespace,
            "--wait", check=False,
        )  # fmt: skip
        # helm 4 applies crds/ at install (server-side, without force): take them over from
        # whoever a failure left owning them, so the install does not meet a conflict
        on_node.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(ROOT / "crds"))
        run_helm(
            cluster, "install", RELEASE, str(helm.CHART), "-n", namespace,
            "-f", str(on_node.values_file),
        )  # fmt: skip
        wait_available(cluster, namespace)
        assert _schema_has_field(_crd(on_node))
