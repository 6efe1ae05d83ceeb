"""The executor's read Job, its containers run by the real talosctl (v1.13.9) against the
Talos API stand-in, and what the executor makes of their output: each node's own
installer, or the refusal.

Each container of the Job ``talosread.read_job`` builds is run here as the kubelet would
run it, with the same arguments and a talosconfig of the stand-in's CA; its output and
exit code are what the executor reads back from the Pod. Five nodes, all different: two
schematics, a private Image Factory, four platforms, one SecureBoot node, and one not
built by an Image Factory (no extensions).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ichor.api.talosoperation import OperationType
from ichor.controller.talosoperation import jobs, talosread
from ichor.settings import ExecutorSettings
from ichor.upgrade import node_images
from tests.component.talos_standin import support
from tests.harness import controlplane, talos_standin
from tests.harness.talos_standin import Extension, TalosNode

pytestmark = pytest.mark.component

ISCSI = Extension("iscsi-tools", "v0.2.0")
NVIDIA = Extension("nonfree-kmod-nvidia-production", "570.172.08-v1.14.3")
STORAGE = "c9078f9419961640c712a8bf2bb9174933dfcf1da383fd8ea2b7dc21493f8bac"
GPU = "0b2b2c0f8a6e1d3b7d1d6d9a4c5e0f3e9d2a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"

CP1 = TalosNode("rd-cp-1", "10.201.4.10")
CP2 = TalosNode(
    "rd-cp-2", "10.201.4.11", platform="aws", secure_boot=True, schematic=STORAGE,
    factory="https://factory.example.com", extensions=(ISCSI,),
)  # fmt: skip
WORKER = TalosNode(
    "rd-worker-1", "10.201.4.12", platform="gcp", schematic=GPU, extensions=(NVIDIA,)
)
PLAIN = TalosNode("rd-worker-2", "10.201.4.13", platform="nocloud", schematic=None)
NODES = (CP1, CP2, WORKER, PLAIN)
TARGET = "v1.14.4"
REF = jobs.OperationRef(
    namespace="team-a", name="up", uid="0000-1111", cluster="prod", type=OperationType.TALOS
)


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    yield from support.workload_plane(tmp_path_factory.mktemp("workload"))


@pytest.fixture
def api(workload: controlplane.ControlPlane, tmp_path: Path) -> Iterator[talos_standin.TalosApi]:
    for node in NODES:
        support.create_node(workload, node, cp=node in (CP1, CP2), talos="v1.14.3")
    support.binary_or_fail()
    standin = talos_standin.TalosApi(
        workdir=tmp_path / "talos", endpoint_host="127.0.0.1", nodes=NODES,
        kubeconfig=workload.kubeconfig, served_kubeconfig=workload.kubeconfig.read_text(),
    )  # fmt: skip
    with standin:
        yield standin


def _run_read_job(
    api: talos_standin.TalosApi, tmp_path: Path
) -> tuple[talosread.ReadOutput, float]:
    """Each container of the read Job, run as the kubelet would; (output, seconds)."""
    manifest = talosread.read_job(
        operation=REF, name="ichor-read-up", talos_version="v1.14.3",
        addresses=[n.address for n in NODES],
        talosconfig=jobs.SecretMount(secret="prod-talosconfig", key="talosconfig"),
        settings=ExecutorSettings(),
    )  # fmt: skip
    config = api.talosconfig(endpoint=f"127.0.0.1:{api.port}")
    logs, codes = {}, {}
    started = time.monotonic()
    for container in manifest["spec"]["template"]["spec"]["containers"]:
        result = support.talosctl(config, container["args"], tmp_path)
        # the kubelet keeps stdout and stderr in one log
        logs[container["name"]] = result.stdout + result.stderr
        codes[container["name"]] = result.returncode
    return talosread.ReadOutput(logs=logs, exit_codes=codes), time.monotonic() - started


def _readings(
    workload: controlplane.ControlPlane, output: talosread.ReadOutput
) -> tuple[node_images.NodeReading, ...]:
    state = talosread.image_state(
        output.logs, addresses=[n.address for n in NODES], exit_codes=output.exit_codes
    )
    items = [support.read_node(workload, n.name) for n in NODES]
    return talosread.readings(items, state, addresses={n.name: n.address for n in NODES})


def test_each_node_is_read_and_given_its_own_installer(
    api: talos_standin.TalosApi, workload: controlplane.ControlPlane, tmp_path: Path
) -> None:
    output, seconds = _run_read_job(api, tmp_path)
    assert set(output.exit_codes.values()) == {0}, output.logs
    readings = _readings(workload, output)
    # the stand-in wrote each factory node's schematic annotation, as Talos does: it agrees
    assert {r.name: r.annotation for r in readings}[CP2.name] == STORAGE
    plan = node_images.plan_images(readings, version=TARGET, default_factory="factory.talos.dev")
    assert plan.refusals == ()
    assert {p.name: p.image for p in plan.nodes} == {
        CP1.name: f"factory.talos.dev/metal-installer/{talos_standin.DEFAULT_SCHEMATIC}:{TARGET}",
        CP2.name: f"factory.example.com/aws-installer-secureboot/{STORAGE}:{TARGET}",
        WORKER.name: f"factory.talos.dev/gcp-installer/{GPU}:{TARGET}",
        PLAIN.name: (f"factory.talos.dev/nocloud-installer/{node_images.PLAIN_SCHEMATIC}:{TARGET}"),
    }
    assert {p.name: p.own.extensions for p in plan.nodes}[CP2.name] == ("iscsi-tools",)
    status = talosread.node_image_status(readings, now=datetime.now(UTC))
    assert status.summary == "4 images"
    print(f"\nread of {len(NODES)} nodes, 3 talosctl get run one after another: {seconds:.2f} s")


def test_an_unreachable_node_is_refused_by_name_with_talosctls_words(
    api: talos_standin.TalosApi, workload: controlplane.ControlPlane, tmp_path: Path
) -> None:
    api.set_node(WORKER.name, reachable=False)
    output, _ = _run_read_job(api, tmp_path)
    assert set(output.exit_codes.values()) == {1}
    plan = node_images.plan_images(
        _readings(workload, output), version=TARGET, default_factory="factory.talos.dev"
    )
    assert plan.nodes == ()
    messages = " ".join(plan.refusals)
    assert f"Node {WORKER.name}: cannot be read through the Talos API" in messages, messages
    # the node without extensions stays readable only because its container ended
    # cleanly: here it did not, so it is refused too rather than guessed
    assert PLAIN.name in messages
    assert CP1.name not in messages
    assert CP2.name not in messages


def _run_etcd_check(api: talos_standin.TalosApi, tmp_path: Path) -> talosread.ReadOutput:
    manifest = talosread.etcd_job(
        operation=REF, name="ichor-talos-up-check-1", talos_version="v1.14.3",
        addresses=[CP1.address, CP2.address],
        talosconfig=jobs.SecretMount(secret="prod-talosconfig", key="talosconfig"),
        settings=ExecutorSettings(),
    )  # fmt: skip
    config = api.talosconfig(endpoint=f"127.0.0.1:{api.port}")
    logs, codes = {}, {}
    for container in manifest["spec"]["template"]["spec"]["containers"]:
        result = support.talosctl(config, container["args"], tmp_path)
        logs[container["name"]] = result.stdout + result.stderr
        codes[container["name"]] = result.returncode
    return talosread.ReadOutput(logs=logs, exit_codes=codes)


CONTROL_PLANE = {CP1.address: CP1.name, CP2.address: CP2.name}


def test_etcd_is_judged_healthy_with_every_member_as_talosctl_health_does(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    healthy = talosread.etcd_health(_run_etcd_check(api, tmp_path), control_plane=CONTROL_PLANE)
    assert healthy.problems == ()
    assert healthy.members == 2
    api.set_member(CP2.name, errors=["raft: slow disk"])
    erring = talosread.etcd_health(_run_etcd_check(api, tmp_path), control_plane=CONTROL_PLANE)
    assert erring.problems == (f"etcd on {CP2.name} reports: raft: slow disk",)
    # after an upgrade only that node's own member must be back
    mine = talosread.etcd_health(
        _run_etcd_check(api, tmp_path), control_plane=CONTROL_PLANE, only=[CP1.name]
    )
    assert mine.healthy, mine.problems
    # one of two members down: no quorum, so neither lists the members
    api.set_member(CP2.name, errors=[], state="down")
    down = talosread.etcd_health(_run_etcd_check(api, tmp_path), control_plane=CONTROL_PLANE)
    assert any(p.startswith(f"etcd on {CP2.name} does not answer") for p in down.problems), down
    api.set_member(CP2.name, state="healthy", alarms=["NOSPACE"])
    alarmed = talosread.etcd_health(_run_etcd_check(api, tmp_path), control_plane=CONTROL_PLANE)
    assert any("alarm:NOSPACE" in p for p in alarmed.problems), alarmed.problems
    api.set_member(CP2.name, alarms=[], learner=True)
    learner = talosread.etcd_health(_run_etcd_check(api, tmp_path), control_plane=CONTROL_PLANE)
    assert any("learner" in p for p in learner.problems), learner.problems
    api.set_member(CP2.name, learner=False, state="removed")
    removed = talosread.etcd_health(_run_etcd_check(api, tmp_path), control_plane=CONTROL_PLANE)
    assert any(f"{CP2.name} is not an etcd member" in p for p in removed.problems), removed
