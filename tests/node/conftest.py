"""The node tier: a real one-node Kubernetes (tests/harness/node.py) shared by the tests
that need it, the open registry it pulls from, and the images pushed there.

Started lazily by the first test that asks, once per session. A part ``make testenv``
has not built fails the test with what to build; nothing here is ever skipped.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.component.chart import helm, readme
from tests.harness import binaries, controlplane, images, machine, node, workload
from tests.harness.registry import OFFLINE_REPOSITORIES

_figures: dict[str, str] = {}


@dataclass
class _TierClock:
    """The node tier's wall time: from its first test's setup to the shared node's stop."""

    started: float | None = None
    #: the end of the last node test's teardown (the shared node's stop is in it when the
    #: tier runs alone or last)
    last_end: float | None = None
    stopped_at: float | None = None
    stop_seconds: float = 0.0

    def seconds(self) -> float | None:
        if self.started is None or self.last_end is None:
            return None
        if self.stopped_at is not None and self.stopped_at > self.last_end:
            # in a whole `make test` the session's fixtures end after the later tiers:
            # count the node's stop, not the other tiers' tests in between
            return self.last_end - self.started + self.stop_seconds
        return self.last_end - self.started


_clock = _TierClock()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """(This conftest's runtest hooks see only the node tier's tests.)"""
    if _clock.started is None:
        _clock.started = time.monotonic()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    _clock.last_end = time.monotonic()


@dataclass(frozen=True)
class NodeImages:
    """Images in the node's registry, as Pods name them."""

    pause: str
    helm: str
    talosctl: str


def _fail_missing(error: binaries.MissingBinaryError) -> None:
    pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def node_registry() -> Iterator[images.NodeRegistry]:
    try:
        registry = images.NodeRegistry()
    except binaries.MissingBinaryError as error:
        _fail_missing(error)
        raise
    try:
        registry.start()
        yield registry
    finally:
        registry.close()


def _push(
    registry: images.NodeRegistry, *, binary: str, repository: str, tag: str, path: str
) -> str:
    """A static binary of ``make testenv`` as a FROM-scratch image; the name a Pod pulls."""
    try:
        found = binaries.find(binary)
    except binaries.MissingBinaryError as error:
        _fail_missing(error)
        raise
    started = time.monotonic()
    pushed = images.push_binary_image(
        registry, repository=repository, tag=tag, binary=found, path=path
    )
    record(f"{binary} image", f"{time.monotonic() - started:.1f} s")
    return pushed.reference.replace(registry.host, f"{node.NODE_IP}:{registry.port}", 1)


@pytest.fixture(scope="session")
def pause_image(node_registry: images.NodeRegistry) -> str:
    """The node's sandbox image (containerd's pinned ``sandbox`` names it)."""
    repository, _, tag = node.PAUSE_IMAGE_PATH.partition(":")
    return _push(node_registry, binary="pause", repository=repository, tag=tag, path="/pause")


@pytest.fixture(scope="session")
def helm_image(node_registry: images.NodeRegistry) -> str:
    return _push(
        node_registry, binary="helm", repository="ichor/helm", tag="test",
        path="/usr/local/bin/helm",
    )  # fmt: skip


@pytest.fixture(scope="session")
def talosctl_image(node_registry: images.NodeRegistry) -> str:
    return _push(
        node_registry, binary="talosctl", repository="ichor/talosctl", tag="test",
        path="/usr/local/bin/talosctl",
    )  # fmt: skip


@pytest.fixture(scope="session")
def node_images(pause_image: str, helm_image: str, talosctl_image: str) -> NodeImages:
    return NodeImages(pause=pause_image, helm=helm_image, talosctl=talosctl_image)


@pytest.fixture(scope="session")
def one_node(
    tmp_path_factory: pytest.TempPathFactory,
    node_registry: images.NodeRegistry,
    pause_image: str,
) -> Iterator[node.Node]:
    """The shared node: control plane, containerd, kubelet, controller-manager, scheduler
    and kube-proxy, Ready, with the default ServiceAccount.

    Its teardown fails when the machine is not as it was before the start
    (:class:`machine.Snapshot`: sysctls, links, rules, mounts, cgroups, default paths,
    kernel modules), after the whole tier ran on it."""
    cluster = node.Node(workdir=tmp_path_factory.mktemp("node"), registry_port=node_registry.port)
    snapshots: list[machine.Snapshot] = []
    lasting: list[tuple[machine.Snapshot, list[str]]] = []
    try:
        # taken under the machine-wide lock: never with another run's node in it
        cluster.start(locked=lambda: snapshots.append(machine.Snapshot.take()))
    except binaries.MissingBinaryError as error:
        _fail_missing(error)
    _figures["node ready"] = f"{cluster.timings.node_ready:.1f} s"
    _figures["default ServiceAccount"] = f"{cluster.timings.service_account:.1f} s"
    try:
        yield cluster
    finally:
        # the after-snapshot too under the lock: never with another run's node in it
        cluster.stop(locked=lambda: lasting.append(machine.lasting_diff(snapshots[0])))
        _clock.stopped_at = time.monotonic()
        _clock.stop_seconds = cluster.timings.stop
        _figures["node stop"] = f"{cluster.timings.stop:.1f} s"
    (before,) = snapshots
    # (a node stopped before the teardown ran no call: taken now, without the lock)
    after, changes = lasting[0] if lasting else machine.lasting_diff(before)
    allowed = before.allowed_modules(after)
    if allowed:
        record("kernel modules loaded (allowed to stay)", " ".join(allowed))
    if changes:
        pytest.fail(
            "the shared node's stop left the machine changed:\n" + "\n".join(changes),
            pytrace=False,
        )


def record(name: str, value: str) -> None:
    """A figure for the end of the run (``node: ...`` in pytest's summary)."""
    _figures[name] = value


def pytest_terminal_summary(terminalreporter: Any) -> None:
    figures = dict(_figures)
    tier = _clock.seconds()
    if tier is not None:
        figures["node tier"] = f"{tier:.1f} s"
    if figures:
        terminalreporter.write_line(
            "node: " + ", ".join(f"{name} {value}" for name, value in figures.items())
        )


ROOT = Path(__file__).resolve().parents[2]
IMAGE_TIMEOUT = 1200.0


@pytest.fixture(scope="session")
def operator_image(node_registry: images.NodeRegistry) -> str:
    """The operator's image, built from the repository's Dockerfile by ``make image``'s
    script and pushed to the node's registry; returns the name a Pod pulls.

    buildah on the base made from Debian's packages, so nothing asks a registry other than
    the node's; an image of the same sources built earlier (the image test's, in the same
    run) is reused, not built again."""
    script = ROOT / "hack" / "image.sh"
    if not script.exists():
        pytest.fail(f"{script} is missing: the node tests need `make image`", pytrace=False)
    reference = f"{node_registry.host}/ichor/operator:test"
    started = time.monotonic()
    result = subprocess.run(
        ["bash", str(script), "build"],
        env=controlplane.loopback_env(
            {
                "IMAGE_PUSH": reference,
                "IMAGE": "localhost/ichor-operator:test",
                "IMAGE_ENGINE": "buildah",
                "IMAGE_BASE": "debian",
            }
        ),
        capture_output=True,
        text=True,
        timeout=IMAGE_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"`make image` (hack/image.sh build) failed ({result.returncode}):\n"
            f"{result.stderr[-4000:]}",
            pytrace=False,
        )
    reused = "reused" if "build: reused" in result.stderr else "built"
    record("operator image", f"{time.monotonic() - started:.1f} s ({reused})")
    return reference.replace(node_registry.host, f"{node.NODE_IP}:{node_registry.port}", 1)


RELEASE = helm.RELEASE
CILIUM_CHART_PATH = Path(__file__).resolve().parent / "charts" / "cilium"


@dataclass
class OnNode:
    """The chart installed on the node; its operator runs in a Pod there."""

    cluster: node.Node
    namespace: str
    values_file: Path
    registry: images.NodeRegistry

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl(*args, **kwargs)

    def pods(self) -> list[dict[str, Any]]:
        found = json.loads(
            self.kubectl(
                "get", "pods", "-n", self.namespace, "-l",
                "app.kubernetes.io/name=ichor", "-o", "json",
            ).stdout
        )["items"]  # fmt: skip
        return [p for p in found if not p["metadata"].get("deletionTimestamp")]

    def pod(self) -> dict[str, Any]:
        running = self.pods()
        assert len(running) == 1, [p["metadata"]["name"] for p in running]
        return running[0]

    def exec(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        name = self.pod()["metadata"]["name"]
        return self.kubectl(
            "exec", "-n", self.namespace, name, "-c", "operator", "--", *command, check=check
        )

    def logs(self) -> str:
        return self.kubectl(
            "logs", "-n", self.namespace, f"deployment/{RELEASE}", "--all-containers",
            "--tail=200", check=False,
        ).stdout  # fmt: skip


def run_helm(cluster: node.Node, *args: str) -> str:
    result = helm.run("--kubeconfig", str(cluster.kubeconfig), *args, check=False)
    if result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout


def wait_available(cluster: node.Node, namespace: str, *, within: float = 180) -> float:
    """Wait for the operator's Deployment to roll out; the seconds it took."""
    started = time.monotonic()
    result = cluster.kubectl(
        "rollout", "status", f"deployment/{RELEASE}", "-n", namespace,
        f"--timeout={int(within)}s", check=False, timeout=within + 30,
    )  # fmt: skip
    if result.returncode != 0:
        pods = cluster.kubectl("describe", "pods", "-n", namespace, check=False).stdout
        logs = cluster.kubectl(
            "logs", "-n", namespace, f"deployment/{RELEASE}", "--all-containers", check=False
        ).stdout
        raise AssertionError(
            f"the Deployment did not become Available: {result.stderr}\n{pods}\n{logs}"
        )
    _wait_old_pods_gone(cluster, namespace, until=started + within)
    wait_webhook(cluster, within=within)
    return time.monotonic() - started


def _wait_old_pods_gone(cluster: node.Node, namespace: str, *, until: float) -> None:
    """``rollout status`` returns once the new Pods are available, while an old one may
    still be terminating (the chart's preStop delay) and still act on what a test creates
    next, with the old values: wait until only the Deployment's replicas are left."""
    deployment = json.loads(
        cluster.kubectl("get", "deployment", RELEASE, "-n", namespace, "-o", "json").stdout
    )
    replicas = int(deployment["spec"].get("replicas", 1))
    selector = ",".join(
        f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()
    )
    pods: list[Any] = []
    while time.monotonic() < until:
        found = cluster.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
        pods = json.loads(found.stdout)["items"]
        leaving = [p for p in pods if p["metadata"].get("deletionTimestamp")]
        if not leaving and len(pods) == replicas:
            return
        time.sleep(1.0)
    names = [p["metadata"]["name"] for p in pods]
    raise AssertionError(f"old operator Pods still there after the rollout: {names}")


_PROBE = {
    "apiVersion": "ichor.dev/v1alpha1",
    "kind": "TalosCluster",
    "metadata": {"name": "webhook-probe", "namespace": "default"},
    "spec": {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"},
}


def wait_webhook(cluster: node.Node, *, within: float = 60) -> None:
    """Until the API server's call reaches a serving replica: after a rollout, kube-proxy
    may still send a call to the Pod that is going away (a real cluster does the same
    for a moment). A server-side dry run asks the webhook without writing anything."""
    deadline = time.monotonic() + within
    while True:
        result = cluster.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(_PROBE), check=False
        )
        if "failed calling webhook" not in result.stderr:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the webhook did not answer in {within} s: {result.stderr}")
        time.sleep(1)


def install_values(
    *,
    registry: images.NodeRegistry,
    images_: NodeImages,
    operator_image: str,
    client_ca: bytes | None = None,
) -> dict[str, Any]:
    """The chart's values on the node: the image built here, the executor's images and
    chart in the node's registry, and fast loops. What differs from a real install: the
    registry speaks plain HTTP (``--plain-http`` for helm) and the release check has no
    registry to reach (a closed port)."""
    repository, _, tag = operator_image.rpartition(":")
    node_registry = f"{node.NODE_IP}:{registry.port}"
    webhook: dict[str, Any] = {}
    if client_ca is not None:
        # mutual TLS: the node's API server presents its webhook client certificate
        webhook["clientAuth"] = {
            "enabled": True,
            "caBundle": client_ca.decode(),
            "commonNames": [controlplane.WEBHOOK_CLIENT],
        }
    return {
        "image": {"repository": repository, "tag": tag},
        "webhook": webhook,
        "releaseCheck": {
            "registryHost": "127.0.0.1:1",
            **OFFLINE_REPOSITORIES,
        },
        "executor": {
            "helmImage": images_.helm,
            "talosctlImage": images_.talosctl,
            # the air-gap value a real mirror takes, here the node's registry
            "ciliumChart": f"oci://{node_registry}/charts/cilium",
        },
        "extraEnv": [
            {
                "name": "ICHOR_HELM_ARGS",
                "value": "--reset-then-reuse-values --wait --timeout 5m --plain-http",
            },
            {"name": "ICHOR_OBSERVE_INTERVAL", "value": "2"},
            {"name": "ICHOR_OPERATION_RESYNC", "value": "2"},
            {"name": "ICHOR_OPERATION_RETRY", "value": "1"},
            {"name": "ICHOR_NODE_VERSION_DEADLINE", "value": "30"},
        ],
    }


@pytest.fixture(scope="session")
def on_node(
    one_node: node.Node,
    node_registry: images.NodeRegistry,
    node_images: NodeImages,
    operator_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OnNode]:
    """``helm install`` with the install page's command, in a namespace of its own."""
    namespace = f"ichor-system-{uuid.uuid4().hex[:6]}"
    values_file = tmp_path_factory.mktemp("chart-on-node") / "values.yaml"
    values = install_values(
        registry=node_registry,
        images_=node_images,
        operator_image=operator_image,
        client_ca=one_node.webhook_client_ca.read_bytes(),
    )
    values_file.write_text(yaml.safe_dump(values))
    words = readme.command("helm install ")
    assert words[:4] == ["helm", "install", RELEASE, "charts/ichor"], words
    words = [namespace if w == "ichor-system" else w for w in words]
    run_helm(one_node, "install", RELEASE, str(helm.CHART), *words[4:], "-f", str(values_file))
    record("chart Available", f"{wait_available(one_node, namespace):.1f} s")
    yield OnNode(
        cluster=one_node, namespace=namespace, values_file=values_file, registry=node_registry
    )
    run_helm(one_node, "uninstall", RELEASE, "-n", namespace, "--wait")


@pytest.fixture
def workload_plane(
    one_node: node.Node, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[workload.WorkloadPlane]:
    """A workload cluster of its own for the test, reachable from the node's Pods."""
    plane = workload.WorkloadPlane(workdir=tmp_path_factory.mktemp("workload"))
    try:
        plane.start()
    except binaries.MissingBinaryError as error:
        _fail_missing(error)
    try:
        plane.expose(one_node)
        yield plane
    finally:
        plane.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that start a node of their own (``OWN_NODE = True`` in their module) run
    before any test asks for the shared one: one node runs at a time (two kubelets on
    one machine would share /var/lib/kubelet/device-plugins)."""
    here = Path(__file__).resolve().parent

    def own(item: pytest.Item) -> bool:
        module = getattr(item, "module", None)
        return bool(getattr(module, "OWN_NODE", False))

    node_items = [i for i in items if Path(str(i.fspath)).resolve().parent == here]
    if not node_items:
        return
    first = items.index(node_items[0])
    ordered = [i for i in node_items if own(i)] + [i for i in node_items if not own(i)]
    rest = [i for i in items if i not in set(node_items)]
    items[:] = rest[:first] + ordered + rest[first:]
