"""The real talosctl, with the executor's own command lines, against the Talos API stand-in.

The commands are those of the Job the executor builds (``jobs.talos_job`` and
``jobs.kubernetes_job``), run here on the machine with the talosconfig a TalosCluster's
Secret would hold; the stand-in answers for two workload Nodes (a second API server of
this test). What ``talosctl upgrade`` does with its defaults is what a Talos node sees:
the image pulled, the installer run, the node cordoned and drained, rebooted, waited for
until it is back with a new boot ID, and uncordoned. The stand-in then reports the new
version in the Node's ``osImage``, as the kubelet of a booted node would.

And where it must fail: a client certificate another CA signed, one without a Talos
role, a server the talosconfig's CA did not sign, a node the endpoint does not serve, an
installer that exits 1 (no reboot follows), and ``upgrade-k8s``, which the stand-in cannot
serve (talosctl's own message). A node that boots its previous version back shows the
limit of talosctl's wait: it succeeds, and only the Node's ``osImage`` tells.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ichor.api.talosoperation import OperationType
from ichor.controller.talosoperation import jobs
from ichor.settings import ExecutorSettings
from ichor.upgrade import node_images
from tests.harness import binaries, certs, controlplane, talos_standin
from tests.support import nodes

CP = talos_standin.TalosNode("ichor-cp-1", "10.201.1.10")
WORKER = talos_standin.TalosNode("ichor-worker-1", "10.201.1.11")
RUNNING = "v1.14.3"
TARGET = "v1.14.4"
KUBELET = "v1.36.6"
TALOSCTL_TIMEOUT = 240


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """A workload API server of this module alone (its Nodes are cluster-scoped)."""
    plane = controlplane.ControlPlane(workdir=tmp_path_factory.mktemp("workload"))
    try:
        plane.start()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


def _node(
    plane: controlplane.ControlPlane, talos_node: talos_standin.TalosNode, *, cp: bool
) -> None:
    labels = {jobs.CONTROL_PLANE_LABEL: ""} if cp else {}
    plane.kubectl("delete", "node", talos_node.name, "--ignore-not-found")
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": talos_node.name, "labels": labels},
    }
    plane.kubectl("create", "-f", "-", input=json.dumps(body))
    status = {
        "addresses": [{"type": "InternalIP", "address": talos_node.address}],
        "nodeInfo": nodes.talos_node_info(talos=RUNNING, kubelet=KUBELET),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    plane.kubectl(
        "patch", "node", talos_node.name, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def _read(plane: controlplane.ControlPlane, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(plane.kubectl("get", "node", name, "-o", "json").stdout)
    return found


def _ready(body: dict[str, Any]) -> str:
    return next(
        (c["status"] for c in body["status"].get("conditions", []) if c["type"] == "Ready"), ""
    )


@pytest.fixture
def cluster(workload: controlplane.ControlPlane) -> controlplane.ControlPlane:
    _node(workload, CP, cp=True)
    _node(workload, WORKER, cp=False)
    return workload


def _standin(
    plane: controlplane.ControlPlane, tmp_path: Path, **options: Any
) -> talos_standin.TalosApi:
    try:
        talos_standin.binary()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    return talos_standin.TalosApi(
        workdir=tmp_path / "talos",
        endpoint_host="127.0.0.1",
        nodes=[CP, WORKER],
        kubeconfig=plane.kubeconfig,
        served_kubeconfig=plane.kubeconfig.read_text(),
        down=1.0,
        **options,
    )


def _talosctl(config: str, args: Sequence[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "talosconfig"
    path.write_text(config)
    env = controlplane.loopback_env({"TALOSCONFIG": str(path), "HOME": str(tmp_path)})
    try:
        talosctl = binaries.find("talosctl")
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    return subprocess.run(
        [str(talosctl), *args], env=env, capture_output=True, text=True,
        timeout=TALOSCTL_TIMEOUT, check=False,
    )  # fmt: skip


_OPERATION = jobs.OperationRef(
    namespace="team-a", name="upgrade", uid="0000-1111", cluster="prod", type=OperationType.TALOS
)
_TALOSCONFIG = jobs.SecretMount(secret="prod-talosconfig", key="talosconfig")


def _talos_commands() -> list[tuple[str, list[str]]]:
    """The containers of the executor's Talos Job, in the order they run: (name, args)."""
    targets = [
        jobs.TargetNode(name=WORKER.name, address=WORKER.address, role=jobs.NodeRole.WORKER),
        jobs.TargetNode(name=CP.name, address=CP.address, role=jobs.NodeRole.CONTROL_PLANE),
    ]
    installer = node_images.installer_image(
        factory="factory.talos.dev", platform="metal", secure_boot=False,
        schematic=node_images.PLAIN_SCHEMATIC, version=TARGET,
    )  # fmt: skip
    manifest = jobs.talos_job(
        operation=_OPERATION, version=TARGET, nodes=targets,
        images={WORKER.name: installer, CP.name: installer},
        talosconfig=_TALOSCONFIG, settings=ExecutorSettings(),
    )  # fmt: skip
    pod = manifest["spec"]["template"]["spec"]
    return [(c["name"], list(c["args"])) for c in [*pod["initContainers"], *pod["containers"]]]


def test_the_executors_talos_job_upgrades_every_node_control_plane_first(
    cluster: controlplane.ControlPlane, tmp_path: Path
) -> None:
    before = {n.name: _read(cluster, n.name)["status"]["nodeInfo"]["bootID"] for n in (CP, WORKER)}
    with _standin(cluster, tmp_path) as api:
        config = api.talosconfig(endpoint=f"127.0.0.1:{api.port}")
        commands = _talos_commands()
        assert [name for name, _ in commands] == ["upgrade-000", "upgrade-001", "versions"]
        outputs = []
        for name, args in commands:
            started = time.monotonic()
            result = _talosctl(config, args, tmp_path)
            assert result.returncode == 0, (name, args, result.stderr, api.log())
            outputs.append((name, f"{time.monotonic() - started:.1f} s", result))
        log = api.calls()
    for talos_node in (CP, WORKER):
        body = _read(cluster, talos_node.name)
        assert body["status"]["nodeInfo"]["osImage"] == f"Talos ({TARGET})", body["status"]
        assert body["status"]["nodeInfo"]["bootID"] != before[talos_node.name]
        assert _ready(body) == "True"
        assert not body["spec"].get("unschedulable"), "talosctl left the node cordoned"
    # one at a time, control plane first: every call for the worker after the control
    # plane's boot; each rebooted once, after its image was pulled and installed
    calls = [(line["call"], line.get("node")) for line in log]
    cp_boot = calls.index(("boot", CP.name))
    worker_calls = [i for i, (_, name) in enumerate(calls) if name == WORKER.name]
    first_worker_write = calls.index(("pull", WORKER.name))
    assert cp_boot < first_worker_write, calls
    for talos_node in (CP, WORKER):
        mine = [call for call, name in calls if name == talos_node.name]
        assert mine.count("reboot") == 1, mine
        assert (
            mine.index("pull") < mine.index("upgrade") < mine.index("reboot") < mine.index("boot")
        )
        # drained before its reboot: talosctl asked for its Kubernetes name
        assert "cosi-get" in mine[: mine.index("reboot")], mine
    assert worker_calls, calls
    versions = outputs[-1][2].stdout
    assert versions.count(f"Tag:         {TARGET}") == 2, versions
    installer = [a for a in commands[0][1] if a.startswith("factory.talos.dev/")]
    assert [line["image"] for line in log if line["call"] == "pull"] == installer * 2


def test_a_node_that_boots_its_previous_version_back_fools_talosctls_wait(
    cluster: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """Talos boots the previous version when the new one does not come up: talosctl's
    wait sees a new boot and a ready machine and succeeds. Only the Node's osImage says
    the upgrade did not happen."""
    with _standin(cluster, tmp_path, boot_old=[CP.name]) as api:
        config = api.talosconfig(endpoint=f"127.0.0.1:{api.port}")
        name, args = _talos_commands()[0]
        assert CP.address in args, (name, args)
        result = _talosctl(config, args, tmp_path)
        assert result.returncode == 0, result.stderr
        (boot,) = api.calls("boot")
    assert boot["version"] == RUNNING
    body = _read(cluster, CP.name)
    assert body["status"]["nodeInfo"]["osImage"] == f"Talos ({RUNNING})"
    assert _ready(body) == "True"


def test_an_installer_that_exits_1_stops_before_the_reboot(
    cluster: controlplane.ControlPlane, tmp_path: Path
) -> None:
    with _standin(cluster, tmp_path, fail_upgrade=[CP.name]) as api:
        config = api.talosconfig(endpoint=f"127.0.0.1:{api.port}")
        result = _talosctl(config, _talos_commands()[0][1], tmp_path)
        assert result.returncode != 0
        assert "upgrade failed with exit code 1" in result.stderr, result.stderr
        assert api.calls("reboot") == []
        assert api.calls("kubeconfig") == [], "drained although the install failed"
    body = _read(cluster, CP.name)
    assert body["status"]["nodeInfo"]["osImage"] == f"Talos ({RUNNING})"
    assert not body["spec"].get("unschedulable")


def _unchanged(plane: controlplane.ControlPlane) -> None:
    for talos_node in (CP, WORKER):
        body = _read(plane, talos_node.name)
        assert body["status"]["nodeInfo"]["osImage"] == f"Talos ({RUNNING})"
        assert not body["spec"].get("unschedulable")


@pytest.mark.parametrize("who", ["another CA's client", "no Talos role", "another CA's server"])
def test_talosctl_without_the_clusters_credentials_changes_nothing(
    cluster: controlplane.ControlPlane, tmp_path: Path, who: str
) -> None:
    with _standin(cluster, tmp_path) as api:
        endpoint = f"127.0.0.1:{api.port}"
        if who == "another CA's client":
            stranger = certs.Authority.create("stranger")
            client = stranger.issue_client(user="os:admin", groups=("os:admin",))
            config = api.talosconfig(endpoint=endpoint, client=client)
        elif who == "no Talos role":
            # an os:reader may ask the version (Talos's role table): test_node_state.py
            # has what each role may do; this certificate has no Talos role at all
            client = api.authority.issue_client(user="tenant", groups=("ichor:tenant",))
            config = api.talosconfig(endpoint=endpoint, client=client)
        else:
            config = api.talosconfig(endpoint=endpoint, authority=certs.Authority.create("x"))
        result = _talosctl(config, _talos_commands()[0][1], tmp_path)
        # what it answered (its own lines aside: where it listens, the Nodes' labels, the
        # handshakes it refused)
        own = ("listening", "node-metadata", "handshake-refused")
        served = [c["call"] for c in api.calls() if c["call"] not in own]
    assert result.returncode != 0
    if who == "no Talos role":
        assert "PermissionDenied" in result.stderr, result.stderr
        assert "not authorized" in result.stderr, result.stderr
        assert set(served) == {"refused"}, served
    elif who == "another CA's client":
        # TLS 1.3: the client's handshake is done before the server has judged its
        # certificate, so talosctl learns of the refusal either as the server's alert or
        # as the connection it closed, whichever its next write meets first
        refused = ("certificate" in result.stderr) or ("code = Unavailable" in result.stderr)
        assert refused, result.stderr
        assert served == [], served
    else:
        assert "certificate" in result.stderr, result.stderr
        assert served == [], served
    _unchanged(cluster)


def test_a_node_the_endpoint_does_not_serve_is_unavailable(
    cluster: controlplane.ControlPlane, tmp_path: Path
) -> None:
    with _standin(cluster, tmp_path) as api:
        config = api.talosconfig(endpoint=f"127.0.0.1:{api.port}")
        result = _talosctl(config, ["version", "--nodes", "10.201.1.99"], tmp_path)
    assert result.returncode != 0
    assert "no Talos node answers at 10.201.1.99" in result.stderr, result.stderr


def test_upgrade_k8s_fails_with_talosctls_own_message(
    cluster: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """The stand-in serves no Kubernetes control plane (no static Pods, no control plane
    resources): the executor's ``upgrade-k8s`` ends with talosctl's own error."""
    manifest = jobs.kubernetes_job(
        operation=_OPERATION, version="v1.36.7", talos=RUNNING,
        control_plane=jobs.TargetNode(
            name=CP.name, address=CP.address, role=jobs.NodeRole.CONTROL_PLANE
        ),
        talosconfig=_TALOSCONFIG, settings=ExecutorSettings(),
    )  # fmt: skip
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    with _standin(cluster, tmp_path) as api:
        config = api.talosconfig(endpoint=f"127.0.0.1:{api.port}")
        result = _talosctl(config, container["args"], tmp_path)
    assert result.returncode == 1
    assert "failed to detect lowest Kubernetes version" in result.stderr, result.stderr
    _unchanged(cluster)


def test_the_standin_listens_on_loopback_only(tmp_path: Path) -> None:
    try:
        found = talos_standin.binary()
    except binaries.MissingBinaryError as error:
        pytest.fail(str(error), pytrace=False)
    result = subprocess.run(
        [str(found), "-listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=30,
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "only a loopback IP address" in result.stderr, result.stderr
