"""`helm install` into the real API server: every object accepted, and the operator the chart
describes (run on loopback as the chart's ServiceAccount) refusing and passing writes as
the webhook does, with the override verb granted the way docs/install.md says."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.component.chart import helm, readme
from tests.component.chart.conftest import Installed
from tests.component.chart.release import run_helm
from tests.component.webhook import harness
from tests.component.webhook.conftest import records_pending

#: The start of each line the operator logs (``2026-12-03 16:05:50,403 ``).
_LOG_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")

pytestmark = pytest.mark.component

EDITOR_ROLE = "ichor-chart-test-editor"
REFUSAL = "Talos 1.14 runs Kubernetes 1.33 to 1.37"
VERB_WORDS = "the RBAC verb `override` on `talosclusters` in API group `ichor.dev`"
INCOMPATIBLE = {"kubernetesVersion": "v1.31.9"}
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "IchorInstallation",
    "CustomResourceDefinition",
}


@pytest.fixture(scope="module")
def users(installed: Installed) -> Iterator[tuple[str, str]]:
    """Two users who may write clusters; only the first is bound to ``ichor-override``,
    by the install page's command."""
    suffix = uuid.uuid4().hex[:6]
    holder, plain = f"holly-{suffix}", f"paul-{suffix}"
    installed.kubectl(
        "create", "clusterrole", EDITOR_ROLE,
        "--verb=get,list,watch,create,update,patch", "--resource=talosclusters.ichor.dev",
    )  # fmt: skip
    installed.kubectl(
        "create", "clusterrolebinding", EDITOR_ROLE, f"--clusterrole={EDITOR_ROLE}",
        f"--user={holder}", f"--user={plain}",
    )  # fmt: skip
    # The install page's binding, for this holder instead of olivia.
    words = readme.command("kubectl create clusterrolebinding ichor-override-")
    words = [w.replace("olivia", holder) for w in words]
    binding = words[3]
    installed.kubectl(*words[1:])
    check = readme.command("kubectl auth can-i override")
    answer = installed.kubectl(*[w.replace("olivia", holder) for w in check[1:]], check=False)
    assert answer.stdout.strip() == "yes", answer.stderr
    try:
        yield holder, plain
    finally:
        for name in (binding, EDITOR_ROLE):
            installed.kubectl("delete", "clusterrolebinding", name, "--ignore-not-found")
        installed.kubectl("delete", "clusterrole", EDITOR_ROLE, "--ignore-not-found")


def _create(
    installed: Installed, name: str, *, user: str, dry_run: bool = False
) -> subprocess.CompletedProcess[str]:
    body = harness.cluster_manifest(name, installed.namespace)
    body["spec"].update(INCOMPATIBLE)
    args = ["create", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    return installed.kubectl(*args, input=json.dumps(body), as_user=user, check=False)


def _override_events(installed: Installed, name: str) -> list[dict[str, Any]]:
    """The Override Events of ``name``, once the operator posted every admission record."""
    deadline = time.monotonic() + 30
    while records_pending(installed.plane, installed.namespace):
        assert time.monotonic() < deadline, "the operator did not post the admission records"
        time.sleep(0.2)
    result = installed.kubectl(
        "get", "events", "-n", installed.namespace, "-o", "json",
        f"--field-selector=involvedObject.name={name},reason=Override",
    )  # fmt: skip
    items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
    return items


def _exists(installed: Installed, name: str) -> bool:
    found = installed.kubectl(
        "get", "taloscluster", name, "-n", installed.namespace, "-o", "name", check=False
    )
    return found.returncode == 0


def _metric(installed: Installed, name: str, **labels: str) -> float:
    with urllib.request.urlopen(installed.metrics_url, timeout=5) as response:
        text = response.read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{{re.escape(wanted)}\}})? (\S+)$", re.MULTILINE)
    found = pattern.search(text)
    return float(found[1]) if found else 0.0


def test_every_object_of_the_chart_is_stored(installed: Installed) -> None:
    assert {o["kind"] for o in installed.manifest} >= {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Secret",
        "Service",
        "Deployment",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "NetworkPolicy",
        "IchorInstallation",
    }
    for item in installed.manifest:
        kind, name = item["kind"], item["metadata"]["name"]
        where = [] if kind in CLUSTER_SCOPED else ["-n", installed.namespace]
        group = item["apiVersion"].split("/")[0] if "/" in item["apiVersion"] else ""
        resource = f"{kind.lower()}.{group}" if group else kind.lower()
        installed.kubectl("get", resource, name, *where, "-o", "name")
    for crd in ("talosclusters", "talosoperations", "ichorinstallations"):
        installed.kubectl("get", "crd", f"{crd}.ichor.dev", "-o", "name")


def test_a_user_without_the_override_verb_is_refused(
    installed: Installed, users: tuple[str, str]
) -> None:
    _, plain = users
    check = readme.command("kubectl auth can-i override")
    answer = installed.kubectl(*[w.replace("olivia", plain) for w in check[1:]], check=False)
    assert answer.stdout.strip() == "no"
    name = f"refused-{uuid.uuid4().hex[:6]}"
    before = _metric(installed, "ichor_webhook_decisions_total", result="refused")
    result = _create(installed, name, user=plain)
    assert result.returncode != 0
    assert REFUSAL in result.stderr
    assert VERB_WORDS in result.stderr
    assert f"user '{plain}' does not" in result.stderr
    assert not _exists(installed, name)
    assert _override_events(installed, name) == []
    assert _metric(installed, "ichor_webhook_decisions_total", result="refused") == before + 1


def test_a_user_bound_to_ichor_override_passes_and_it_is_recorded(
    installed: Installed, users: tuple[str, str]
) -> None:
    holder, _ = users
    name = f"overridden-{uuid.uuid4().hex[:6]}"
    dry = _create(installed, name, user=holder, dry_run=True)
    assert dry.returncode == 0, dry.stderr
    assert f"Warning: override by {holder}" in dry.stderr
    assert _override_events(installed, name) == [], "a dry run records nothing"

    before = _metric(installed, "ichor_webhook_decisions_total", result="overridden")
    done = _create(installed, name, user=holder)
    assert done.returncode == 0, done.stderr
    assert f"Warning: override by {holder}" in done.stderr
    (event,) = _override_events(installed, name)
    assert event["type"] == "Warning"
    assert f"User {holder} overrode" in event["message"]
    assert REFUSAL in event["message"]
    assert _metric(installed, "ichor_webhook_decisions_total", result="overridden") == before + 1


def test_the_operator_needs_nothing_its_role_lacks(
    installed: Installed, users: tuple[str, str]
) -> None:
    """After the writes, a reconciled cluster and the release check's listing: the
    controller, the release check and the webhook all acted as the chart's ServiceAccount."""
    name = f"reconciled-{uuid.uuid4().hex[:6]}"
    body = harness.cluster_manifest(name, installed.namespace)
    installed.kubectl("create", "-f", "-", input=json.dumps(body))
    deadline = time.monotonic() + 60
    while True:
        cluster = json.loads(
            installed.kubectl(
                "get", "taloscluster", name, "-n", installed.namespace, "-o", "json"
            ).stdout
        )
        if (cluster.get("status") or {}).get("observedGeneration"):
            break
        assert time.monotonic() < deadline, f"no cluster status:\n{installed.log_text()}"
        time.sleep(0.3)
    while True:
        installation = json.loads(
            installed.kubectl("get", "ichorinstallation", "ichor", "-o", "json").stdout
        )
        if (installation.get("status") or {}).get("upgradeTargets"):
            break
        assert time.monotonic() < deadline, f"no release check status:\n{installed.log_text()}"
        time.sleep(0.3)
    targets = installation["status"]["upgradeTargets"]
    assert targets["talosError"], "the release check wrote its listing as the ServiceAccount"
    log = installed.log_text()
    # the timestamp's milliseconds may read 403: look at what follows it
    forbidden = [
        line for line in log.splitlines() if "403" in _LOG_STAMP.sub("", line) or "orbidden" in line
    ]
    assert not forbidden, "\n".join(forbidden)
    assert installed.operator.poll() is None, log


def test_upgrade_keeps_the_generated_certificate(installed: Installed) -> None:
    """A `helm upgrade` reuses the CA and certificate the install generated, so the running
    operator's files and the configuration's caBundle still agree."""

    def tls() -> tuple[str, str]:
        secret = json.loads(
            installed.kubectl(
                "get", "secret", f"{helm.RELEASE}-webhook-tls", "-n", installed.namespace,
                "-o", "json",
            ).stdout
        )  # fmt: skip
        configuration = json.loads(
            installed.kubectl(
                "get", "validatingwebhookconfiguration", f"{helm.RELEASE}-webhook", "-o", "json"
            ).stdout
        )
        return secret["data"]["tls.crt"], configuration["webhooks"][0]["clientConfig"]["caBundle"]

    before = tls()
    run_helm(
        installed.plane, "upgrade", helm.RELEASE, str(helm.CHART), "-n", installed.namespace,
        "-f", str(installed.values_file), *installed.helm_flags,
    )  # fmt: skip
    assert tls() == before
    harness.wait_until_answering(installed.plane, alive=lambda: installed.operator.poll() is None)
