"""The real talosctl (v1.13.9) reads from the Talos API stand-in what each node runs, as
it reads it from Talos: its extensions and Image Factory schematic, platform and boot
mode (``talosctl get ... -o json``), its etcd member's health, and which role may do
what. The stand-in records the installer each node was asked for and counts the calls,
and a control line changes a node or a member while talosctl watches.

Five nodes, all different: three control plane nodes (metal on the plain schematic; aws
with SecureBoot on a storage schematic of a private Image Factory; nocloud), a gcp GPU
worker, and an azure worker on Talos 1.13 that was not installed from an Image Factory.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.harness import certs, controlplane, talos_standin
from tests.harness.talos_standin import Extension, TalosNode

from . import support

ISCSI = Extension("iscsi-tools", "v0.2.0")
UTIL_LINUX = Extension("util-linux-tools", "2.41.1")
NVIDIA = Extension("nonfree-kmod-nvidia-production", "570.172.08-v1.14.3")
TOOLKIT = Extension("nvidia-container-toolkit-production", "570.172.08-v1.17.8")
STORAGE = "c9078f9419961640c712a8bf2bb9174933dfcf1da383fd8ea2b7dc21493f8bac"
GPU = "0b2b2c0f8a6e1d3b7d1d6d9a4c5e0f3e9d2a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"
PRIVATE_FACTORY = "https://factory.example.com"

CP1 = TalosNode("std-cp-1", "10.201.3.10")
CP2 = TalosNode(
    "std-cp-2", "10.201.3.11", platform="aws", secure_boot=True, schematic=STORAGE,
    factory=PRIVATE_FACTORY, extensions=(ISCSI, UTIL_LINUX),
)  # fmt: skip
CP3 = TalosNode("std-cp-3", "10.201.3.12", platform="nocloud")
WORKER = TalosNode(
    "std-worker-1", "10.201.3.13", platform="gcp", schematic=GPU, extensions=(NVIDIA, TOOLKIT)
)
OLD = TalosNode("std-worker-2", "10.201.3.14", platform="azure", schematic=None)
NODES = (CP1, CP2, CP3, WORKER, OLD)
CONTROL_PLANE = (CP1, CP2, CP3)
RUNNING = "v1.14.3"
OLD_RUNNING = "v1.13.5"
TARGET = "v1.14.4"


def installer(node: TalosNode, *, platform: str | None = None, schematic: str | None = None) -> str:
    """The installer a node's own upgrade names (the naming upstream builds, with the
    node's factory host)."""
    host = node.factory.removeprefix("https://")
    kind = f"{platform or node.platform}-installer" + ("-secureboot" if node.secure_boot else "")
    return f"{host}/{kind}/{schematic or node.schematic}:{TARGET}"


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    yield from support.workload_plane(tmp_path_factory.mktemp("workload"))


@pytest.fixture
def cluster(workload: controlplane.ControlPlane) -> controlplane.ControlPlane:
    for node in NODES:
        talos = OLD_RUNNING if node is OLD else RUNNING
        support.create_node(workload, node, cp=node in CONTROL_PLANE, talos=talos)
    return workload


@pytest.fixture
def api(cluster: controlplane.ControlPlane, tmp_path: Path) -> Iterator[talos_standin.TalosApi]:
    support.binary_or_fail()
    standin = talos_standin.TalosApi(
        workdir=tmp_path / "talos", endpoint_host="127.0.0.1", nodes=NODES,
        kubeconfig=cluster.kubeconfig, served_kubeconfig=cluster.kubeconfig.read_text(),
        down=1.0, schematics={STORAGE: (ISCSI, UTIL_LINUX), GPU: (NVIDIA, TOOLKIT)},
        etcd_rejoin=1.5,
    )  # fmt: skip
    with standin:
        yield standin


def _config(api: talos_standin.TalosApi, **options: Any) -> str:
    return api.talosconfig(endpoint=f"127.0.0.1:{api.port}", **options)


def _get(
    api: talos_standin.TalosApi, tmp_path: Path, node: TalosNode, *args: str
) -> list[dict[str, Any]]:
    result = support.talosctl(
        _config(api), ["-n", node.address, "get", *args, "-o", "json"], tmp_path
    )
    assert result.returncode == 0, (args, result.stderr)
    return support.json_documents(result.stdout)


def _schematic_extension(node: TalosNode) -> dict[str, Any]:
    return {
        "name": "schematic",
        "version": node.schematic,
        "author": f"Image Factory ({node.factory})",
        "description": (
            "Virtual extension which specifies the schematic of the image built with schematic."
        ),
        "compatibility": {"talos": {"version": ">= 1.0.0"}},
    }


def test_talosctl_get_reads_each_nodes_extensions_platform_and_boot_mode(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    for node in NODES:
        extensions = _get(api, tmp_path, node, "extensions")
        # IDs are the extension's index; the schematic meta-extension comes last
        layers = [e.to_json() for e in node.extensions]
        if node.schematic:
            layers.append(_schematic_extension(node))
        assert [d["metadata"]["id"] for d in extensions] == list(range(len(layers))), extensions
        for document, layer in zip(extensions, layers, strict=True):
            assert document["node"] == node.address
            assert document["metadata"]["type"] == "ExtensionStatuses.runtime.talos.dev"
            assert document["metadata"]["namespace"] == "runtime"
            spec = document["spec"]
            assert spec["image"] == f"{document['metadata']['id']}.sqsh"
            assert {k: spec["metadata"][k] for k in ("name", "version", "author")} == {
                k: layer[k] for k in ("name", "version", "author")
            }
        if node.schematic:
            assert extensions[-1]["spec"]["metadata"] == _schematic_extension(node)

        (platform,) = _get(api, tmp_path, node, "platformmetadata")
        assert platform["metadata"]["id"] == "platformmetadata"
        assert platform["metadata"]["type"] == "PlatformMetadatas.talos.dev"
        assert platform["spec"] == {"platform": node.platform, "hostname": node.name}

        (security,) = _get(api, tmp_path, node, "securitystate")
        assert security["metadata"]["id"] == "securitystate"
        assert security["spec"]["secureBoot"] is node.secure_boot

    # a Get by ID, as a COSI client reads them (upstream's QueryMachineContext)
    for kind, ident, field, value in [
        ("platformmetadata", "platformmetadata", "platform", "aws"),
        ("securitystate", "securitystate", "secureBoot", True),
        ("imagefactoryschematic", "image-factory-schematic", "schematicId", STORAGE),
    ]:
        (found,) = _get(api, tmp_path, CP2, kind, ident)
        assert found["spec"][field] == value, found

    # Talos 1.14 surfaces the schematic as its own resource, with the factory's URL
    (schematic,) = _get(api, tmp_path, CP2, "imagefactoryschematic")
    assert schematic["metadata"]["id"] == "image-factory-schematic"
    assert schematic["spec"] == {
        "schematicId": STORAGE, "flavor": "Image Factory", "apiUrl": PRIVATE_FACTORY,
    }  # fmt: skip
    assert _get(api, tmp_path, CP1, "imagefactoryschematic")[0]["spec"]["schematicId"] == (
        talos_standin.DEFAULT_SCHEMATIC
    )
    # a 1.14 node not installed from an Image Factory has none (and no meta-extension)
    api.set_node(CP3.name, schematic="")
    assert _get(api, tmp_path, CP3, "imagefactoryschematic") == []
    assert _get(api, tmp_path, CP3, "extensions") == []
    # Talos 1.13 has no such type: talosctl says so
    result = support.talosctl(
        _config(api), ["-n", OLD.address, "get", "imagefactoryschematic"], tmp_path
    )
    assert result.returncode == 1
    assert 'resource "imagefactoryschematic" is not registered' in result.stderr, result.stderr

    # several nodes at once: one document per node, each naming its node
    many = support.talosctl(
        _config(api),
        ["-n", ",".join(n.address for n in NODES), "get", "platformmetadata", "-o", "json"],
        tmp_path,
    )
    assert many.returncode == 0, many.stderr
    by_node = {d["node"]: d["spec"]["platform"] for d in support.json_documents(many.stdout)}
    assert by_node == {n.address: n.platform for n in NODES}


def test_talos_writes_extensions_on_its_node_and_leaves_a_foreign_value(
    cluster: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """As Talos's node controllers do: a version that is a label value is a label, the
    64-digit schematic ID an annotation; a key someone else set is not taken over."""
    cluster.kubectl("annotate", "node", OLD.name, "extensions.talos.dev/schematic=hand-set")
    support.binary_or_fail()
    standin = talos_standin.TalosApi(
        workdir=tmp_path / "talos", endpoint_host="127.0.0.1", nodes=NODES,
        kubeconfig=cluster.kubeconfig, served_kubeconfig=cluster.kubeconfig.read_text(),
    )  # fmt: skip
    with standin as api:
        metadata = support.read_node(cluster, CP2.name)["metadata"]
        assert metadata["labels"]["extensions.talos.dev/iscsi-tools"] == "v0.2.0"
        assert metadata["labels"]["extensions.talos.dev/util-linux-tools"] == "2.41.1"
        assert metadata["annotations"]["extensions.talos.dev/schematic"] == STORAGE
        assert "extensions.talos.dev/schematic" not in metadata["labels"]
        old = support.read_node(cluster, OLD.name)["metadata"]
        assert old["annotations"]["extensions.talos.dev/schematic"] == "hand-set"
        api.set_node(OLD.name, schematic=STORAGE)
        old = support.read_node(cluster, OLD.name)["metadata"]
        # the node's API says STORAGE; the Node keeps what someone else wrote
        assert old["annotations"]["extensions.talos.dev/schematic"] == "hand-set"
        # extensions removed from a node leave the Node too
        api.set_node(CP2.name, extensions=[])
        labels = support.read_node(cluster, CP2.name)["metadata"]["labels"]
        assert not [k for k in labels if k.startswith("extensions.talos.dev/")], labels


def test_a_resource_set_missing_or_unsupported_answers_as_talos_does(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    config = _config(api)
    api.set_node(
        WORKER.name, resources={"platformmetadata": "missing", "securitystate": "unsupported"}
    )
    # missing: the list is empty, a get by ID is NotFound
    listed = support.talosctl(
        config, ["-n", WORKER.address, "get", "platformmetadata", "-o", "json"], tmp_path
    )
    assert (listed.returncode, listed.stdout.strip()) == (0, ""), listed
    one = support.talosctl(
        config, ["-n", WORKER.address, "get", "platformmetadata", "platformmetadata"], tmp_path
    )
    assert one.returncode == 1
    assert "code = NotFound" in one.stderr, one.stderr
    assert "doesn't exist" in one.stderr, one.stderr
    # unsupported: the type is not registered (an older Talos)
    unsupported = support.talosctl(config, ["-n", WORKER.address, "get", "securitystate"], tmp_path)
    assert unsupported.returncode == 1
    assert 'resource "securitystate" is not registered' in unsupported.stderr, unsupported.stderr
    # the other nodes answer as before
    assert _get(api, tmp_path, CP1, "securitystate")[0]["spec"]["secureBoot"] is False
    # extensions missing: an empty list, as on a node without any
    api.set_node(CP2.name, resources={"extensions": "missing"})
    assert _get(api, tmp_path, CP2, "extensions") == []
    # back to present: served again
    api.set_node(WORKER.name, resources={"platformmetadata": "present", "securitystate": "present"})
    assert _get(api, tmp_path, WORKER, "platformmetadata")[0]["spec"]["platform"] == "gcp"
    # readiness: the machine status Talos reports
    assert _get(api, tmp_path, CP3, "machinestatus")[0]["spec"]["status"]["ready"] is True
    api.set_node(CP3.name, ready=False)
    (status,) = _get(api, tmp_path, CP3, "machinestatus")
    assert status["spec"]["stage"] == "running"
    assert status["spec"]["status"]["ready"] is False
    assert status["spec"]["status"]["unmetConditions"], status


def test_a_watch_sees_what_a_control_line_changes(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    """``talosctl get -w`` is a COSI Watch: a node's platform changed at run time
    reaches it as an update."""
    args = ["-n", WORKER.address, "get", "platformmetadata", "-w", "-o", "json"]
    watcher = subprocess.Popen(
        [str(support.talosctl_path()), *args], env=support.talosctl_env(_config(api), tmp_path),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    seen: list[str] = []

    def follow(stream: IO[str]) -> None:
        for line in stream:
            seen.append(line)

    assert watcher.stdout is not None
    reader = threading.Thread(target=follow, args=(watcher.stdout,), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while '"platform": "gcp"' not in "".join(seen):
            assert watcher.poll() is None, "".join(seen)
            assert time.monotonic() < deadline, "".join(seen)
            time.sleep(0.1)
        api.set_node(WORKER.name, platform="metal")
        while '"platform": "metal"' not in "".join(seen):
            assert watcher.poll() is None, "".join(seen)
            assert time.monotonic() < deadline, "".join(seen)
            time.sleep(0.1)
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
        reader.join(timeout=5)
        watcher.stdout.close()
    events = support.json_documents("".join(seen))
    assert [e["event"] for e in events] == ["created", "updated"], events
    assert events[-1]["spec"]["platform"] == "metal"
    assert events[-1]["metadata"]["version"] == 2


def _etcd(
    api: talos_standin.TalosApi, tmp_path: Path, nodes: tuple[TalosNode, ...], *args: str
) -> subprocess.CompletedProcess[str]:
    return support.talosctl(
        _config(api), ["-n", ",".join(n.address for n in nodes), "etcd", *args], tmp_path
    )


def _rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()[1:]]


def test_etcd_members_and_status_show_each_members_health(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    ids = {m["node"]: m["id"] for m in api.state()["etcd"]["members"]}
    assert set(ids) == {n.name for n in CONTROL_PLANE}

    members = _etcd(api, tmp_path, (CP1,), "members")
    assert members.returncode == 0, members.stderr
    assert [row[1:3] for row in _rows(members.stdout)] == [
        [ids[n.name], n.name] for n in CONTROL_PLANE
    ]
    status = _etcd(api, tmp_path, CONTROL_PLANE, "status")
    assert status.returncode == 0, status.stderr
    rows = _rows(status.stdout)
    assert [row[0] for row in rows] == [n.address for n in CONTROL_PLANE]
    leader = {row[7] for row in rows}  # after DB SIZE "25 MB" and IN USE "12 MB (45.83%)"
    assert leader == {ids[CP1.name]}, status.stdout  # every member sees the same leader

    # one member down and one alarm: its node's status fails, the others name the alarm
    api.set_member(CP2.name, state="down", alarms=["NOSPACE"])
    status = _etcd(api, tmp_path, CONTROL_PLANE, "status")
    assert status.returncode == 0, status.stderr  # talosctl warns, it does not fail
    assert (
        f"{CP2.address}: rpc error: code = Unknown desc = failed to query etcd status"
        in status.stderr
    )
    rows = _rows(status.stdout)
    assert [row[0] for row in rows] == [CP1.address, CP3.address]
    assert all("alarm:NOSPACE" in " ".join(row) for row in rows), status.stdout
    alarms = _etcd(api, tmp_path, (CP1,), "alarm", "list")
    assert _rows(alarms.stdout) == [[CP1.address, ids[CP2.name], "NOSPACE"]], alarms.stdout
    down = _etcd(api, tmp_path, (CP2,), "members")
    assert down.returncode == 1
    assert "connection refused" in down.stderr, down.stderr
    # still a quorum: the others list all three
    assert len(_rows(_etcd(api, tmp_path, (CP3,), "members").stdout)) == 3

    # a second member down: no quorum, no leader
    api.set_member(CP3.name, state="down")
    lost = _etcd(api, tmp_path, (CP1,), "members")
    assert lost.returncode == 1
    assert "etcdserver: no leader" in lost.stderr, lost.stderr
    no_leader = _etcd(api, tmp_path, (CP1,), "status")
    assert "etcdserver: no leader" in no_leader.stdout, no_leader.stdout

    # removed: gone from the member list; back to healthy, a quorum again
    api.set_member(CP2.name, state="removed", alarms=[])
    api.set_member(CP3.name, state="healthy")
    members = _etcd(api, tmp_path, (CP1,), "members")
    assert [row[2] for row in _rows(members.stdout)] == [CP1.name, CP3.name], members.stdout
    # a learner says so
    api.set_member(CP3.name, learner=True)
    assert _rows(_etcd(api, tmp_path, (CP1,), "members").stdout)[-1][-1] == "true"

    # a worker runs no etcd
    worker = _etcd(api, tmp_path, (WORKER,), "status")
    assert worker.returncode == 1
    assert "etcd status is only available on control plane nodes" in worker.stderr, worker.stderr


def _upgrade_args(node: TalosNode, image: str) -> list[str]:
    return ["upgrade", "--nodes", node.address, "--image", image, "--wait", "--timeout", "3m"]


def test_a_rebooting_control_plane_nodes_member_leaves_and_comes_back(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    seen: list[str] = []
    done = threading.Event()

    def follow() -> None:
        while not done.is_set():
            member = next(m for m in api.state()["etcd"]["members"] if m["node"] == CP2.name)
            if not seen or seen[-1] != member["state"]:
                seen.append(member["state"])
            time.sleep(0.05)

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    try:
        result = support.talosctl(_config(api), _upgrade_args(CP2, installer(CP2)), tmp_path)
        assert result.returncode == 0, (result.stderr, api.log())
        deadline = time.monotonic() + 30
        while seen[-1] != "healthy" and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        done.set()
        follower.join(timeout=10)
    assert seen == ["healthy", "down", "healthy"], seen
    calls = [line["call"] for line in api.calls() if line.get("node") == CP2.name]
    assert calls.index("down") < calls.index("boot") < calls.index("etcd-rejoined"), calls
    boot = api.calls("boot")[-1]
    rejoined = api.calls("etcd-rejoined")[-1]
    gap = datetime.datetime.fromisoformat(rejoined["time"]) - datetime.datetime.fromisoformat(
        boot["time"]
    )
    assert gap >= datetime.timedelta(seconds=1.4), gap  # etcd_rejoin after the boot
    status = _etcd(api, tmp_path, CONTROL_PLANE, "status")
    assert status.returncode == 0
    assert not status.stderr.strip(), status.stderr


def test_upgrade_records_the_image_for_that_node_only_and_counts(
    api: talos_standin.TalosApi, cluster: controlplane.ControlPlane, tmp_path: Path
) -> None:
    config = _config(api)
    own = installer(WORKER)
    for attempt in (1, 2):
        result = support.talosctl(config, _upgrade_args(WORKER, own), tmp_path)
        assert result.returncode == 0, (result.stderr, api.log())
        records = api.records()
        assert records[WORKER.name].images == (own,) * attempt
        assert records[WORKER.name].upgrades == attempt
        assert records[WORKER.name].reboots == attempt
        for other in NODES:
            if other is not WORKER:
                assert other.name not in records or records[other.name].upgrades == 0
        assert api.node_state(WORKER.name)["upgrades"] == attempt
    # it booted its own image: the same schematic, extensions, platform
    assert [e["spec"]["metadata"]["name"] for e in _get(api, tmp_path, WORKER, "extensions")] == [
        NVIDIA.name,
        TOOLKIT.name,
        "schematic",
    ]
    assert _get(api, tmp_path, WORKER, "platformmetadata")[0]["spec"]["platform"] == "gcp"
    assert (
        support.read_node(cluster, WORKER.name)["status"]["nodeInfo"]["osImage"]
        == f"Talos ({TARGET})"
    )


def test_a_cluster_wide_metal_image_drops_what_a_node_ran(
    api: talos_standin.TalosApi, cluster: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """A cluster-wide image, as the stand-in plays it: the azure node of no Image
    Factory given the plain metal installer boots with metal's platform, and the GPU
    worker given the plain schematic boots without its extensions."""
    plain = f"factory.talos.dev/metal-installer/{talos_standin.DEFAULT_SCHEMATIC}:{TARGET}"
    for node in (OLD, WORKER):
        result = support.talosctl(_config(api), _upgrade_args(node, plain), tmp_path)
        assert result.returncode == 0, (result.stderr, api.log())
        assert api.record(node.name).images == (plain,)
    old = api.node_state(OLD.name)
    assert (old["platform"], old["schematic"], old["extensions"]) == (
        "metal",
        talos_standin.DEFAULT_SCHEMATIC,
        [],
    )
    # now on 1.14: the schematic resource exists
    assert _get(api, tmp_path, OLD, "imagefactoryschematic")[0]["spec"]["schematicId"] == (
        talos_standin.DEFAULT_SCHEMATIC
    )
    extensions = _get(api, tmp_path, WORKER, "extensions")
    assert [e["spec"]["metadata"]["name"] for e in extensions] == ["schematic"]
    labels = support.read_node(cluster, WORKER.name)["metadata"].get("labels", {})
    assert not [k for k in labels if k.startswith("extensions.talos.dev/")], labels


def _roles_config(api: talos_standin.TalosApi, *organizations: str) -> str:
    client = api.authority.issue_client(user="someone", groups=organizations)
    return _config(api, client=client)


@pytest.mark.parametrize("role", ["os:reader", "os:operator", "os:admin", "no Talos role"])
def test_each_role_may_do_what_talos_lets_it(
    api: talos_standin.TalosApi, tmp_path: Path, role: str
) -> None:
    """Talos's own table (machined.go): a reader reads (version, resources, etcd) and
    cannot pull or read the kubeconfig; an operator pulls and cannot install; an admin
    upgrades; a certificate of no Talos role may do nothing."""
    config = _roles_config(api, *([] if role == "no Talos role" else [role]), "ichor:tenant")
    reads = [
        ["-n", CP1.address, "version"],
        ["-n", CP1.address, "get", "extensions", "-o", "json"],
        ["-n", CP1.address, "get", "platformmetadata"],
        ["-n", CP1.address, "etcd", "members"],
        ["-n", CP1.address, "etcd", "status"],
    ]
    for args in reads:
        result = support.talosctl(config, args, tmp_path)
        if role == "no Talos role":
            assert result.returncode == 1, args
            assert "PermissionDenied" in result.stderr, result.stderr
            assert "not authorized" in result.stderr, result.stderr
        else:
            assert result.returncode == 0, (args, result.stderr)
    kubeconfig = support.talosctl(
        config, ["-n", CP1.address, "kubeconfig", str(tmp_path / "kc")], tmp_path
    )
    assert (kubeconfig.returncode == 0) is (role == "os:admin"), kubeconfig.stderr

    image = installer(CP1)
    upgrade = support.talosctl(config, _upgrade_args(CP1, image), tmp_path)
    record = api.record(CP1.name)
    if role == "os:admin":
        assert upgrade.returncode == 0, upgrade.stderr
        assert record.images == (image,)
        return
    assert upgrade.returncode == 1
    assert "code = PermissionDenied desc = not authorized" in upgrade.stderr, upgrade.stderr
    assert record.upgrades == 0, record
    assert record.reboots == 0, record
    if role == "os:operator":
        assert record.pulls == (image,)
        assert record.refused[-1] == "/machine.LifecycleService/Upgrade"
    elif role == "os:reader":
        assert record.pulls == ()
        assert record.refused[-1] == "/machine.ImageService/Pull"
    else:
        assert record.refused[-1] == "/machine.MachineService/Version"


def test_an_expired_client_certificate_fails_the_handshake(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    expired = api.authority.issue_client(
        user="os:admin", groups=("os:admin",),
        not_after=datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1),
    )  # fmt: skip
    config = _config(api, client=expired)
    for args in (["-n", CP1.address, "version"], _upgrade_args(CP1, installer(CP1))):
        result = support.talosctl(config, args, tmp_path)
        assert result.returncode == 1
        # TLS 1.3: talosctl meets the server's alert or the closed connection
        assert ("expired certificate" in result.stderr) or (
            "code = Unavailable" in result.stderr
        ), result.stderr
    refused = api.calls("handshake-refused")
    assert refused
    assert all("certificate has expired" in r["error"] for r in refused), refused
    assert api.record(CP1.name) == talos_standin.NodeRecord()
    assert not [
        c for c in api.calls() if c.get("node") == CP1.name and c["call"] != "node-metadata"
    ]


def test_a_node_set_unreachable_does_not_answer(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    config = _config(api)
    api.set_node(WORKER.name, reachable=False)
    alone = support.talosctl(config, ["-n", WORKER.address, "version"], tmp_path)
    assert alone.returncode == 1
    assert f"dial tcp {WORKER.address}:50000: connect: no route to host" in alone.stderr, (
        alone.stderr
    )
    # with another node, talosctl prints what answered and warns for the rest (exit 0)
    both = support.talosctl(config, ["-n", f"{CP1.address},{WORKER.address}", "version"], tmp_path)
    assert both.returncode == 0, both.stderr
    assert f"NODE:        {CP1.address}" in both.stdout
    assert f"{WORKER.address}: rpc error: code = Unavailable" in both.stderr, both.stderr
    read = support.talosctl(config, ["-n", WORKER.address, "get", "extensions"], tmp_path)
    assert read.returncode == 1
    assert "code = Unavailable" in read.stderr, read.stderr
    upgrade = support.talosctl(config, _upgrade_args(WORKER, installer(WORKER)), tmp_path)
    assert upgrade.returncode == 1
    assert api.record(WORKER.name).upgrades == 0
    api.set_node(WORKER.name, reachable=True)
    assert support.talosctl(config, ["-n", WORKER.address, "version"], tmp_path).returncode == 0


@pytest.mark.parametrize(
    ("op", "node", "settings", "reason"),
    [
        ("node", "nobody", {"platform": "aws"}, 'no node "nobody"'),
        ("node", CP1.name, {"schematic": "not-an-id"}, "is not an Image Factory schematic ID"),
        ("node", CP1.name, {"platform": "aws; rm -rf /"}, "is not a Talos platform name"),
        ("node", CP1.name, {"factory": "factory.example.com"}, "is not an Image Factory URL"),
        (
            "node",
            CP1.name,
            {"extensions": [{"name": "schematic", "version": "x"}]},
            "a name other than schematic",
        ),
        (
            "node",
            CP1.name,
            {"resources": {"secrets": "missing"}},
            'resource "secrets" is not one of',
        ),
        (
            "node",
            CP1.name,
            {"resources": {"extensions": "gone"}},
            "is not present, missing or unsupported",
        ),
        ("node", CP1.name, {"platfrom": "aws"}, 'unknown field "platfrom"'),
        ("member", WORKER.name, {"state": "down"}, "has no etcd member"),
        ("member", CP1.name, {"state": "sick"}, "is not healthy, down or removed"),
        ("member", CP1.name, {"alarms": ["NONE"]}, "is not NOSPACE or CORRUPT"),
        ("reboot", CP1.name, {}, 'op "reboot" is not state, node or member'),
    ],
)
def test_the_control_channel_refuses_what_it_cannot_apply(
    api: talos_standin.TalosApi, op: str, node: str, settings: dict[str, Any], reason: str
) -> None:
    before = api.state()
    with pytest.raises(talos_standin.StandinControlError, match=reason):
        api.control(op, node, **settings)
    assert api.state() == before  # nothing of a refused line applied


def test_the_control_channel_survives_garbage_and_a_huge_line(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    before = api.state()
    garbage = api.send_raw("{not json")
    assert garbage["ok"] is False
    assert "invalid character" in garbage["error"], garbage
    huge = api.send_raw(json.dumps({"id": 0, "op": "state", "pad": "x" * (2 << 20)}))
    assert huge["ok"] is False
    assert "control line longer than" in huge["error"], huge
    # still serving, unchanged
    assert api.state() == before
    assert support.talosctl(_config(api), ["-n", CP1.address, "version"], tmp_path).returncode == 0


def test_a_client_certificate_of_another_ca_is_refused_in_the_handshake(
    api: talos_standin.TalosApi, tmp_path: Path
) -> None:
    stranger = certs.Authority.create("stranger").issue_client(
        user="os:admin", groups=("os:admin",)
    )
    result = support.talosctl(
        _config(api, client=stranger), ["-n", CP1.address, "version"], tmp_path
    )
    assert result.returncode == 1
    # the server names its CA in the handshake; Go's client (talosctl's) then sends no
    # certificate the CA did not sign, and the server refuses a client without one
    refused = api.calls("handshake-refused")
    assert refused
    assert "client didn't provide a certificate" in refused[-1]["error"], refused
    assert not [c for c in api.calls() if c.get("node") and c["call"] != "node-metadata"]
