"""`helm install` with two replicas, and two operators on loopback as those replicas.

The release brings kopf's peering CRD, the ClusterKopfPeering the operators are told to use
(a post-install hook, since its CRD comes with the same release) and a
PodDisruptionBudget. Two operator processes then run with the Deployment's environment as
the chart's ServiceAccount: one runs the handlers while the other pauses, both serve the
webhook, and when the active one stops the other takes over. An override the standby's
webhook admits is posted as an Event by the leader, and one admitted while no replica
runs the handlers (the handover) is posted by the new leader: the record waits in the
stored object, not in a replica's memory.

The release runs on a control plane of its own. On the session's control plane the
package's release (another operator, another ServiceAccount) also judges every TalosCluster
and refuses status written by anyone but its own operator, as one Ichor per cluster must:
two releases in one cluster would refuse each other's status writes. The release still
leaves out the cluster-wide singletons (``ichor-override``, the IchorInstallation), as a
second install would; its webhook configuration points at the first of the two operators
and is uninstalled with the test.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.component.chart import helm
from tests.component.chart.conftest import pod_name, start_operator, stop_operator
from tests.component.chart.release import run_helm, secret_files
from tests.component.webhook import harness
from tests.harness import controlplane
from tests.support import table

pytestmark = pytest.mark.component

PAUSED = "Pausing operations"
RESUMED = "Resuming operations after the pause"
TIMEOUT = 180.0


def _review(namespace: str) -> bytes:
    body = harness.cluster_manifest("probe", namespace, talos=table.unknown_talos())
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "ichor.dev", "version": "v1alpha1", "kind": "TalosCluster"},
            "resource": {"group": "ichor.dev", "version": "v1alpha1", "resource": "talosclusters"},
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": body,
            "dryRun": True,
        },
    }
    return json.dumps(review).encode()


def _ask(port: int, *, ca: Path, namespace: str) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=str(ca))
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/taloscluster",
        data=_review(namespace),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        answer: dict[str, Any] = json.loads(response.read())["response"]
        return answer


def _is_active(log: str) -> bool:
    last_pause, last_resume = log.rfind(PAUSED), log.rfind(RESUMED)
    return last_resume > last_pause


def _wait(what: str, ready: Any, logs: list[Path], processes: list[subprocess.Popen[str]]) -> None:
    """Until ``ready()``; a replica that exits fails at once, with the logs.

    Under load two operator processes, the API server and pytest share two cores, so
    kopf's peering (a keepalive, a watch event, then the decision) may need well over a
    minute; the deadline is generous and only bounds a run that is stuck.
    """
    deadline = time.monotonic() + TIMEOUT
    while not ready():
        exited = [p.returncode for p in processes if p.poll() is not None]
        if exited or time.monotonic() > deadline:
            text = "\n---\n".join(log.read_text()[-4000:] for log in logs)
            why = f"a replica exited {exited}" if exited else f"not within {TIMEOUT} s"
            raise AssertionError(f"{what}: {why}:\n{text}")
        time.sleep(0.3)


def _point_webhooks_at(plane: controlplane.ControlPlane, name: str, port: int) -> None:
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        found = json.loads(plane.kubectl("get", kind, name, "-o", "json").stdout)
        for hook in found["webhooks"]:
            path = hook["clientConfig"]["url"].rsplit("/", 1)[1]
            hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}/{path}"
        plane.kubectl("replace", "-f", "-", input=json.dumps(found))


def _override(plane: controlplane.ControlPlane, namespace: str, name: str) -> None:
    """The admin (who holds every verb) stores a pair the rules refuse."""
    body = harness.cluster_manifest(name, namespace, kubernetes="v1.31.9")
    created = plane.kubectl("create", "-f", "-", input=json.dumps(body), check=False)
    assert created.returncode == 0, created.stderr
    assert "override by" in created.stderr, created.stderr


def _override_posted(plane: controlplane.ControlPlane, namespace: str, name: str) -> bool:
    found = plane.kubectl(
        "get", "events", "-n", namespace, "-o", "json",
        f"--field-selector=involvedObject.name={name},reason=Override",
    )  # fmt: skip
    return any("overrode a refusal" in e["message"] for e in json.loads(found.stdout)["items"])


@pytest.fixture(scope="module")
def own_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """etcd + kube-apiserver for this module alone: no other Ichor release is installed."""
    plane = controlplane.ControlPlane(workdir=tmp_path_factory.mktemp("replicas-plane"))
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


def test_two_replicas_peer_serve_the_webhook_and_take_over(
    own_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    control_plane = own_plane
    namespace = f"ichor-replicas-{uuid.uuid4().hex[:6]}"
    release = f"ichor-ha-{uuid.uuid4().hex[:4]}"
    ports = [
        {name: controlplane.free_port() for name in ("webhook", "healthz", "metrics")}
        for _ in range(2)
    ]
    values = {
        "replicas": 2,
        "override": {"create": False},
        "installation": {"create": False},
        "webhook": {"url": f"https://127.0.0.1:{ports[0]['webhook']}"},
        "crds": {"upgrade": {"enabled": False}},  # no kubelet runs its hook Job here
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    run_helm(
        control_plane, "install", release, str(helm.CHART), "-n", namespace,
        "--create-namespace", "-f", str(values_file),
    )  # fmt: skip
    operators = []
    try:
        manifest = yaml.safe_load_all(
            run_helm(control_plane, "get", "manifest", release, "-n", namespace).stdout
        )
        objects = [o for o in manifest if o]
        env = helm.env(objects)
        peering_name = env["ICHOR_PEERING"]
        assert peering_name == release
        pdb = json.loads(
            control_plane.kubectl("get", "pdb", release, "-n", namespace, "-o", "json").stdout
        )
        assert pdb["spec"]["minAvailable"] == 1

        pods = [pod_name(objects) for _ in ports]
        for index, replica_ports in enumerate(ports):
            workdir = tmp_path / f"replica-{index}"
            workdir.mkdir()
            operators.append(
                start_operator(
                    control_plane,
                    objects,
                    namespace=namespace,
                    workdir=workdir,
                    ports=replica_ports,
                    release=release,
                    pod=pods[index],
                )
            )
        logs = [log for _, log in operators]
        processes = [process for process, _ in operators]

        def peers() -> set[str]:
            found = control_plane.kubectl(
                "get", "clusterkopfpeering.kopf.dev", peering_name, "-o", "json"
            )
            return set(json.loads(found.stdout).get("status") or {})

        _wait("both replicas in the peering", lambda: len(peers()) == 2, logs, processes)
        # Each replica is known in the peering by its Pod's name (the chart's POD_ID).
        assert peers() == set(pods)

        # A replica starts paused (the peering is mandatory) and logs only when it resumes
        # or pauses again; the active one is the replica whose last word is "resuming".
        def active() -> list[int]:
            return [i for i, log in enumerate(logs) if _is_active(log.read_text())]

        _wait("exactly one active replica", lambda: len(active()) == 1, logs, processes)
        time.sleep(3)
        assert len(active()) == 1, "the choice of the active replica did not hold"

        ca = secret_files(control_plane, namespace, tmp_path, release=release) / "ca.crt"
        for replica_ports in ports:
            answer = _ask(replica_ports["webhook"], ca=ca, namespace=namespace)
            assert answer["allowed"] is False
            assert f"Talos {table.unknown_talos()} is refused" in answer["status"]["message"]

        (leader,) = active()
        standby = 1 - leader
        # The API server now calls the standby's webhook: what it admits, the leader posts.
        _point_webhooks_at(control_plane, f"{release}-webhook", ports[standby]["webhook"])
        _override(control_plane, namespace, "ha-one")
        _wait(
            "the leader posted the override the standby's webhook admitted",
            lambda: _override_posted(control_plane, namespace, "ha-one"),
            logs,
            processes,
        )
        stop_operator(operators[leader][0])
        # Admitted while no replica runs the handlers: the record waits in the object.
        _override(control_plane, namespace, "ha-two")
        _wait(
            "the standby replica resumed",
            lambda: _is_active(logs[standby].read_text()),
            logs,
            [operators[standby][0]],
        )
        _wait(
            "the new leader posted the override admitted during the handover",
            lambda: _override_posted(control_plane, namespace, "ha-two"),
            logs,
            [operators[standby][0]],
        )
        text = "\n".join(log.read_text() for log in logs)
        assert "orbidden" not in text
    finally:
        for operator, _ in operators:
            stop_operator(operator)
        run_helm(control_plane, "uninstall", release, "-n", namespace, "--wait")
        control_plane.kubectl(
            "delete", "clusterkopfpeering.kopf.dev", release, "--ignore-not-found"
        )
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
