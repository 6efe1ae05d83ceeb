"""The operator image, built from this tree, runs: as the chart's Pod (the Deployment's
environment, ``POD_ID`` from the Pod's name, the ServiceAccount's token, the webhook
Secret at the chart's path) and without ``POD_ID``, as a plain run of the image would.

Each run is the image's user, a read-only root and a writable ``/tmp`` only, against the
test API server on 127.0.0.1 (see ``bundle`` for what runc is given and why runc). It
passes once the liveness endpoint answers and the API server gets the webhook's refusal of
a probe write, with the process still up; it fails at once if the process exits. Then the
container gets SIGTERM, as from a kubelet, and must end cleanly, leaving nothing behind.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.component.chart import helm, release
from tests.component.image import bundle
from tests.component.image.conftest import Built, figure, host_network, listen_port
from tests.component.webhook import harness
from tests.harness import controlplane

pytestmark = [pytest.mark.component, pytest.mark.timeout(1500)]

START_TIMEOUT = 120.0
#: The kubelet's default terminationGracePeriodSeconds.
GRACE = 30.0
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _runc() -> Path:
    found = shutil.which("runc")
    if found is None:
        pytest.fail("runc is not installed: run `make image-base`", pytrace=False)
    return Path(found)


def _pod_spec(rel: release.Release) -> helm.Object:
    spec: helm.Object = helm.one(rel.manifest, "Deployment")["spec"]["template"]["spec"]
    return spec


def _tmp_size(rel: release.Release) -> str:
    """The chart's emptyDir at /tmp (``64Mi``) as a tmpfs size."""
    volume = next(v for v in _pod_spec(rel)["volumes"] if v["name"] == "tmp")
    limit: str = volume["emptyDir"]["sizeLimit"]
    assert limit.endswith("Mi"), limit
    return f"{limit[:-2]}m"


def _volume_files(
    plane: controlplane.ControlPlane, rel: release.Release, volume: helm.Object, directory: Path
) -> Path:
    """A Secret or ConfigMap volume of the Pod, as the kubelet writes it: a file per key."""
    if "secret" in volume:
        kind, name = "secret", volume["secret"]["secretName"]
    else:
        assert "configMap" in volume, f"the test cannot mount volume {volume}"
        kind, name = "configmap", volume["configMap"]["name"]
    found = json.loads(plane.kubectl("get", kind, name, "-n", rel.namespace, "-o", "json").stdout)
    directory.mkdir()
    for key, value in (found.get("data") or {}).items():
        data = base64.b64decode(value) if kind == "secret" else value.encode()
        (directory / key).write_bytes(data)
    return directory


def _pod_files(
    plane: controlplane.ControlPlane, rel: release.Release, workdir: Path, pod: str
) -> list[bundle.Mount]:
    """What a kubelet mounts: each of the chart's Secret and ConfigMap volumes at its mount
    path (its emptyDir is the tmpfs at /tmp), the ServiceAccount's token with the cluster's
    CA, and /etc/hosts and /etc/resolv.conf (loopback only)."""
    volumes = {v["name"]: v for v in _pod_spec(rel)["volumes"]}
    binds = []
    for mount in helm.container(rel.manifest)["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            assert mount["mountPath"] == "/tmp", f"an emptyDir the test does not give: {mount}"
            continue
        assert mount.get("readOnly") is True, f"a writable volume outside /tmp: {mount}"
        source = _volume_files(plane, rel, volume, workdir / f"volume-{mount['name']}")
        binds.append(bundle.Mount(source=source, target=mount["mountPath"]))
    account = workdir / "serviceaccount"
    account.mkdir()
    token = plane.kubectl(
        "create", "token", rel.service_account, "-n", rel.namespace, "--duration=1h"
    ).stdout.strip()
    (account / "token").write_text(token)
    (account / "ca.crt").write_bytes(plane.ca_file.read_bytes())
    (account / "namespace").write_text(rel.namespace)
    hosts = workdir / "hosts"
    hosts.write_text(f"127.0.0.1\tlocalhost {pod}\n::1\tlocalhost\n")
    resolv = workdir / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\n")
    return [
        *binds,
        bundle.Mount(source=account, target=SERVICE_ACCOUNT_DIR),
        bundle.Mount(source=hosts, target="/etc/hosts"),
        bundle.Mount(source=resolv, target="/etc/resolv.conf"),
    ]


def _pod_env(
    plane: controlplane.ControlPlane,
    rel: release.Release,
    *,
    pod: str,
    ports: dict[str, int],
    pod_id: bool,
) -> dict[str, str]:
    """The Deployment's environment as the kubelet gives it (its fields filled in, the
    API server's address), with the listeners moved from 0.0.0.0 to 127.0.0.1: the
    container shares the host's network. Without ``pod_id``, no POD_ID."""
    env = helm.env(rel.manifest, pod=pod, namespace=rel.namespace)
    assert "POD_ID" in env, "the chart's Deployment sets no POD_ID"
    if not pod_id:
        del env["POD_ID"]
    api = urllib.parse.urlsplit(plane.server)
    env.update(
        ICHOR_WEBHOOK_ADDR="127.0.0.1",
        ICHOR_WEBHOOK_PORT=str(ports["webhook"]),
        ICHOR_LIVENESS_ENDPOINT=f"http://127.0.0.1:{ports['healthz']}/healthz",
        ICHOR_READINESS_ENDPOINT=f"http://127.0.0.1:{ports['readyz']}/readyz",
        ICHOR_METRICS_ADDR="127.0.0.1",
        ICHOR_METRICS_PORT=str(ports["metrics"]),
        KUBERNETES_SERVICE_HOST=str(api.hostname),
        KUBERNETES_SERVICE_PORT=str(api.port),
        HOSTNAME=pod,
    )
    return env


@contextlib.contextmanager
def _running(spec: bundle.Spec, workdir: Path, name: str) -> Iterator[bundle.Container]:
    state = workdir / "runc-state"
    container = bundle.Container(
        runc=_runc(), bundle=workdir, spec=spec, name=name, state=state, log=workdir / "pod.log"
    )
    container.start()
    try:
        yield container
    finally:
        container.stop(grace=GRACE)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _wait_alive(container: bundle.Container, url: str) -> float:
    started = time.monotonic()
    while not _answers(url):
        if container.exited() is not None:
            raise AssertionError(
                f"the operator exited {container.exited()} while starting:\n{container.log_text()}"
            )
        if time.monotonic() - started > START_TIMEOUT:
            log = container.log_text()
            raise AssertionError(f"{url} did not answer in {START_TIMEOUT} s:\n{log}")
        time.sleep(0.3)
    return time.monotonic() - started


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _exec(container: bundle.Container, code: str) -> str:
    """Python in the running container, as its process runs (user, capabilities, env)."""
    result = subprocess.run(
        [str(container.runc), "--root", str(container.state), "exec", container.name,
         "python", "-c", code],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


WRITES = """
import errno
for path in ("/probe", "/opt/ichor/probe", "/etc/ichor/probe", "/tmp/probe"):
    try:
        open(path, "w").close()
        print(path, "written")
    except OSError as error:
        print(path, errno.errorcode[error.errno])
"""


#: A health check in the image's worker process, as the operator runs one: an ordinary
#: check, then one the deadline stops; nothing written anywhere, /tmp included.
EVALUATES = """
import asyncio, os
from ichor.api.autopatch import HealthCheck
from ichor.controller.autopatch import health
from ichor.controller.autopatch.evaluator import Evaluator

def compiled(expression):
    check = HealthCheck(name="gate", api_version="v1", resource="configmaps",
                        expression=expression)
    (done,), problems = health.compile_checks([check])
    return done

async def main():
    evaluator = Evaluator()
    ready, _ = await evaluator.run(compiled('objects.all(o, o.data.ready == "yes")'),
                                   [{"data": {"ready": "yes"}}], within=60)
    fields = {f"k{i}": "v" * 40 for i in range(150)}
    heavy = [{"data": dict(fields), "metadata": {"name": f"o{n}"}} for n in range(200)]
    stopped, _ = await evaluator.run(compiled("objects.all(a, a in objects)"), heavy, within=2)
    again, _ = await evaluator.run(compiled("objects.size() == 0"), [], within=60)
    await evaluator.close()
    print(ready.result.value, stopped.result.value, again.result.value, evaluator.started)

before = sorted(os.listdir("/tmp"))
asyncio.run(main())
print(sorted(os.listdir("/tmp")) == before)
"""


def test_the_image_names_its_user_and_runs_the_charts_command(built_image: Built) -> None:
    uid, gid = built_image.config.ids()
    context = helm.one(helm.template(), "Deployment")["spec"]["template"]["spec"]
    assert (uid, gid) == (context["securityContext"]["runAsUser"], 65532)
    assert context["securityContext"]["runAsGroup"] == gid
    passwd = (built_image.rootfs / "etc" / "passwd").read_text().splitlines()
    assert any(line.split(":")[2:4] == [str(uid), str(gid)] for line in passwd), passwd
    assert built_image.config.entrypoint == []
    assert built_image.config.cmd == helm.container(helm.template())["args"]


@pytest.mark.parametrize("pod_id", [True, False], ids=["as-the-charts-pod", "without-pod-id"])
def test_the_image_runs_as_its_user_on_a_read_only_root_until_it_serves(
    control_plane: controlplane.ControlPlane,
    built_image: Built,
    chart_release: release.Release,
    webhook_port: int,
    tmp_path: Path,
    pod_id: bool,
) -> None:
    before = host_network()
    pod = f"ichor-{uuid.uuid4().hex[:10]}-{uuid.uuid4().hex[:5]}"
    ports = {"webhook": webhook_port, "healthz": listen_port(avoid=[webhook_port])}
    ports["metrics"] = listen_port(avoid=ports.values())
    ports["readyz"] = listen_port(avoid=ports.values())
    container_spec = helm.container(chart_release.manifest)
    spec = bundle.Spec(
        config=built_image.config,
        rootfs=built_image.rootfs,
        hostname=pod,
        env=_pod_env(control_plane, chart_release, pod=pod, ports=ports, pod_id=pod_id),
        binds=_pod_files(control_plane, chart_release, tmp_path, pod),
        tmp_size=_tmp_size(chart_release),
        # The chart's args replace the image's command, as in the Pod; a plain run has none.
        args=container_spec["args"] if pod_id else None,
    )
    name = f"ichor-image-test-{uuid.uuid4().hex[:8]}"
    with _running(spec, tmp_path, name) as container:
        seconds = _wait_alive(container, f"http://127.0.0.1:{ports['healthz']}/healthz")
        try:
            harness.wait_until_answering(control_plane, alive=lambda: container.exited() is None)
        except RuntimeError as error:
            raise AssertionError(f"{error}:\n{container.log_text()}") from None
        assert _answers(f"http://127.0.0.1:{ports['metrics']}/metrics")
        # Ready once the webhook serves: the API server's call above reached it
        assert _answers(f"http://127.0.0.1:{ports['readyz']}/readyz"), container.log_text()

        status = _status(container.pid())
        uid, gid = built_image.config.ids()
        assert status["Uid"].split() == [str(uid)] * 4
        assert status["Gid"].split() == [str(gid)] * 4
        assert int(status["CapEff"], 16) == 0
        assert int(status["CapPrm"], 16) == 0
        assert status["NoNewPrivs"] == "1"
        writes = dict(line.split() for line in _exec(container, WRITES).splitlines())
        assert writes == {
            "/probe": "EROFS",
            "/opt/ichor/probe": "EROFS",
            "/etc/ichor/probe": "EROFS",
            "/tmp/probe": "written",
        }
        # the health checks' worker runs on this root, and writes nothing
        evaluated = _exec(container, EVALUATES).split()
        assert evaluated == ["true", "timeout", "true", "2", "True"], evaluated
        assert container.exited() is None, container.log_text()
        serving = container.log_text()
        assert "Traceback" not in serving, serving
        code = container.stop(grace=GRACE)
    # Only the exit status counts at shutdown: under load kopf 1.45 may log asyncio's
    # "error occurred during closing of asynchronous generator infinite_watch" (its own
    # watch stream, closed at loop shutdown) and still end with 0.
    log = container.log_text()
    assert code == 0, f"the operator ended {code} on SIGTERM:\n{log}"
    assert list(container.leftovers()) == []
    assert host_network() == before
    figure(f"{pod_id=}: liveness answered {seconds:.1f} s after the container started")
