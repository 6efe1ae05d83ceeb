"""The crash sweep's stack: a control plane of its own, the operator in a process of its
own behind the counting proxy, Jobs played as a kubelet would run them, and the runs.

``Stack`` starts a control plane for the sweep alone (it is stopped and started in the
outage runs), a second one for the workload cluster that talosctl's drain reaches (it
stays up, as a workload cluster does when the management cluster's API server goes
away), the CRDs, the operator's account (the chart's ClusterRole), a holder of the
override verb, the webhook's configurations naming the operator's port, the Talos API
stand-in with its Nodes, and ``python -m ichor.operator`` as the chart runs it, whose
kubeconfig names the proxy (``tests.harness.apiproxy``). ``run`` drives one flow
(``tests.support.crash_flows``) with one fault: the proxy counts from the flow's start,
kills the operator at the chosen call, the operator starts again (without a fault) and
the flow must complete; then its checks say what is wrong, if anything.

The Jobs are played by ``JobPlayer``, which also records every Job created (a watch), so
a Job made twice shows. A Talos operation goes node by node: its read Job and its etcd
check Jobs print what the operator reads back from their Pods' logs, which no API call
can play, so the operator runs as ``tests.harness.played_operator`` (``ichor.operator``
with the ``read_output`` seam answered in talosctl's format; each node the stand-in's
plain image); each node's upgrade Job runs the real talosctl against the stand-in (which
counts each node's upgrade calls and moves its Node when it boots). Then the Job's status
is written as the Job controller would; a Kubernetes Job sets the kubelets' version, a
Cilium Job just succeeds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import aiohttp
import yaml
from kubernetes.aio import client, config, watch
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.api import kinds
from ichor.controller.talosoperation import jobs
from ichor.webhook import configuration
from tests.harness import account, apiproxy, binaries, certs, checkout, controlplane, talos_standin
from tests.harness import registry as test_registry
from tests.harness.apiproxy import Action, Call, Fault
from tests.support import nodes, operator, rbac

#: A holder of the override verb and an editor without it.
HOLDER = "olivia"
EDITOR_ROLE = "ichor-crash-editor"
OVERRIDE_ROLE = "ichor-crash-override"
OPERATOR_ROLE = "ichor-crash-operator"
ACCOUNT_NAMESPACE = "ichor-crash"
#: The workload's Nodes, answered for by the stand-in: one control plane node, one worker.
TALOS_NODES = (
    talos_standin.TalosNode("crash-cp-1", "10.0.9.1", control_plane=True),
    talos_standin.TalosNode("crash-worker-1", "10.0.9.11", control_plane=False),
)
#: Seconds the operator takes to answer once started, at most.
READY_TIMEOUT = 90.0
#: Seconds a flow has to complete after the operator's restart: else it is stuck.
COMPLETE_TIMEOUT = 90.0
#: Seconds within which the fault must fire once the flow started (else: not reached).
REACH_TIMEOUT = 60.0
#: Seconds the Job player waits for one answer: a call sent as the API server went away
#: may never be answered, and the player must look again.
PLAYER_CALL_SECONDS = 10.0
#: How long a run waits, at its end, for an outage a held call started to be over.
OUTAGE_WAIT = 120.0
MERGE = "application/merge-patch+json"
#: The stack's registry: the releases its repositories list (the chart's is not seeded).
REPOSITORIES = "crash"
RELEASES = {"installer-base": ["v1.14.3", "v1.14.4"], "kubelet": ["v1.36.6"]}

#: The operator's settings: quick steps, so a run takes seconds.
OPERATOR_ENV = {
    "ICHOR_LOG_LEVEL": "INFO",
    "ICHOR_OBSERVE_INTERVAL": "3",
    "ICHOR_BACKOFF_INITIAL": "0.5",
    "ICHOR_BACKOFF_MAX": "2",
    "ICHOR_OBSERVE_TIMEOUT": "10",
    "ICHOR_OPERATION_RESYNC": "2",
    "ICHOR_OPERATION_RETRY": "0.5",
    "ICHOR_NODE_VERSION_DEADLINE": "60",
    "ICHOR_RELEASE_RETRY": "5",
    "ICHOR_RELEASE_MAX_INTERVAL": "3600",
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The operator's module: ``ichor.operator`` with its read Jobs' output played.
OPERATOR_MODULE = "tests.harness.played_operator"


class OperatorProcess:
    """``python -m tests.harness.played_operator`` (``ichor.operator`` with the read Jobs'
    output played) with ``env``; ``kill`` is SIGKILL, from any thread."""

    def __init__(self, env: dict[str, str], *, log: Path, healthz: str, workdir: Path) -> None:
        self.env = env
        self.log = log
        self.healthz = healthz
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.start_seconds: list[float] = []

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None
        started = time.monotonic()
        with self.log.open("ab") as sink:
            sink.write(f"\n=== start {self.starts + 1} at {_now()}\n".encode())
            sink.flush()
            self.process = subprocess.Popen(
                [sys.executable, "-m", OPERATOR_MODULE],
                env=self.env, stdout=sink, stderr=subprocess.STDOUT, cwd=self.workdir,
                start_new_session=True,
            )  # fmt: skip
        self.starts += 1
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the operator exited {self.process.returncode} at start")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(self.healthz, timeout=2) as answer,
            ):
                if answer.status == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the operator did not answer {self.healthz}")
            time.sleep(0.1)
        self.start_seconds.append(time.monotonic() - started)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)

    def wait_dead(self, timeout: float = 20.0) -> None:
        if self.process is not None:
            self.process.wait(timeout)

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(5)  # a test's operator: no need to wait out kopf's shutdown
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@dataclass
class Context:
    """One run of one flow: its namespace and clients, and what it recorded."""

    stack: Stack
    namespace: str
    admin: ApiClient
    holder: ApiClient
    #: The cluster's generation once prepared (the spec moves are counted from it).
    generation: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    #: Every Job created in the namespace during the run (the player's watch), in order.
    created: list[Made] = field(default_factory=list)
    #: Whether the run's fault fired: a kill, a 409 or the API server away lost or refused
    #: a write, and the step is decided again from what is stored, so a read-only Job
    #: (a read, a check) may be made anew.
    faulted: bool = False

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.admin)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.admin)

    async def cluster(self, name: str = "prod") -> dict[str, Any]:
        found: Any = await self.custom.get_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_CLUSTERS, name
        )
        return cast(dict[str, Any], found)

    async def operations(self) -> list[dict[str, Any]]:
        listed: Any = await self.custom.list_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_OPERATIONS
        )
        items: list[dict[str, Any]] = listed["items"]
        return items

    async def jobs(self) -> list[dict[str, Any]]:
        listed = await client.BatchV1Api(self.admin).list_namespaced_job(self.namespace)
        items: list[dict[str, Any]] = self.admin.sanitize_for_serialization(listed)["items"]
        return items

    async def events(self) -> list[dict[str, Any]]:
        listed = await self.core.list_namespaced_event(self.namespace)
        items: list[dict[str, Any]] = self.admin.sanitize_for_serialization(listed)["items"]
        return items

    async def installation(self) -> dict[str, Any]:
        found: Any = await self.custom.get_cluster_custom_object(
            kinds.GROUP, kinds.VERSION, kinds.Plural.ICHOR_INSTALLATIONS, kinds.INSTALLATION_NAME
        )
        return cast(dict[str, Any], found)

    async def installation_events(self) -> list[dict[str, Any]]:
        listed = await self.core.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={kinds.INSTALLATION_NAME}"
        )
        items: list[dict[str, Any]] = self.admin.sanitize_for_serialization(listed)["items"]
        return items

    async def create_as_holder(self, plural: str, body: dict[str, Any]) -> None:
        """Create ``body`` as the holder of the override verb, unless it exists (a start
        repeated after the webhook was down)."""
        api = client.CustomObjectsApi(self.holder)
        name = body["metadata"]["name"]
        try:
            await api.get_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, plural, name
            )
            return  # the first start took: the webhook would judge a repeat afresh
        except ApiException as error:
            if error.status != 404:
                raise
        try:
            await api.create_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, self.namespace, plural, body
            )
        except ApiException as error:
            if error.status != 409:
                raise

    async def patch_cluster_spec(self, spec: dict[str, Any], name: str = "prod") -> None:
        await client.CustomObjectsApi(self.holder).patch_namespaced_custom_object(
            kinds.GROUP, kinds.VERSION, self.namespace, kinds.Plural.TALOS_CLUSTERS, name,
            {"spec": spec}, _content_type=MERGE,
        )  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """What one run came to."""

    flow: str
    fault: Fault | None
    #: The call the fault acted on (None: the flow completed before it was reached).
    call: Call | None
    calls: tuple[Call, ...]
    problems: tuple[str, ...]
    seconds: float

    @property
    def reached(self) -> bool:
        return self.call is not None

    def line(self) -> str:
        what = f"{self.fault.action} at {self.fault.at}" if self.fault else "no fault"
        at = f" on {self.call}" if self.call else " (not reached)" if self.fault else ""
        verdict = "ok" if not self.problems else "; ".join(self.problems)
        return f"{self.flow}: {what}{at}: {verdict} ({self.seconds:.1f} s)"


#: What a read-only Job's containers run (``talosctl get``, ``talosctl etcd``): the read
#: of each node's image and the etcd checks. They change nothing; the others act.
READ_COMMANDS = frozenset({"get", "etcd"})


def read_only(job: dict[str, Any]) -> bool:
    """Whether every container of the Job only reads (``READ_COMMANDS``)."""
    pod = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    commands = [
        str((container.get("args") or [""])[0])
        for container in (*(pod.get("initContainers") or ()), *(pod.get("containers") or ()))
    ]
    return bool(commands) and all(c in READ_COMMANDS for c in commands)


@dataclass(frozen=True)
class Made:
    """One Job as it was created: its name, uid, owner, and what it is for."""

    name: str
    uid: str
    owner: str
    #: The Node a Talos operation's Job upgrades (``""``: not a node's Job).
    node: str
    #: Whether it only reads (the read of the nodes' images, an etcd check).
    read_only: bool
    #: Whether Kubernetes removes it once finished (``ttlSecondsAfterFinished``).
    expires: bool = False

    @classmethod
    def of(cls, job: dict[str, Any]) -> Made:
        meta = job["metadata"]
        owners = [o["uid"] for o in meta.get("ownerReferences") or ()]
        return cls(
            name=meta["name"], uid=meta["uid"], owner=owners[0] if owners else "",
            node=(meta.get("annotations") or {}).get(jobs.NODE_ANNOTATION, ""),
            read_only=read_only(job),
            expires=(job.get("spec") or {}).get("ttlSecondsAfterFinished") is not None,
        )  # fmt: skip

    @property
    def step(self) -> str:
        """What the Job is for: ``node <name>``, or its name (a step's Job has the name
        of its operation and step)."""
        return f"node {self.node}" if self.node else self.name


class JobPlayer:
    """Plays the Jobs of one namespace as the Job controller and a kubelet would, and
    records in ``created`` every Job created there (a watch, so a Job the operator
    deletes at once is seen too)."""

    def __init__(self, stack: Stack, namespace: str, created: list[Made]) -> None:
        self.stack = stack
        self.namespace = namespace
        self.played: dict[str, str] = {}  # Job uid -> outcome
        self.created = created
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run()), asyncio.create_task(self._watch())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _saw(self, job: dict[str, Any]) -> None:
        if job["metadata"]["uid"] not in {m.uid for m in self.created}:
            self.created.append(Made.of(job))

    async def _watch(self) -> None:
        """Every Job created, from the namespace's first on: a watch from the last
        resourceVersion seen, listed again when the API server forgot it (410)."""
        batch = client.BatchV1Api(self.stack.admin)
        version: str | None = None
        while True:
            try:
                if version is None:
                    listed = self.stack.admin.sanitize_for_serialization(
                        await batch.list_namespaced_job(self.namespace)
                    )
                    for job in listed["items"]:
                        self._saw(job)
                    version = listed["metadata"]["resourceVersion"]
                stream = watch.Watch()
                async with stream.stream(
                    batch.list_namespaced_job, self.namespace, resource_version=version,
                    timeout_seconds=60, allow_watch_bookmarks=True,
                ) as events:  # fmt: skip
                    async for event in events:
                        raw = event["raw_object"]
                        if event["type"] == "ERROR":
                            if raw.get("code") == 410:
                                version = None
                            break
                        version = raw["metadata"]["resourceVersion"]
                        if event["type"] == "ADDED":
                            self._saw(raw)
            except ApiException as error:
                if error.status == 410:
                    version = None
                await asyncio.sleep(0.2)
            except (OSError, TimeoutError, ValueError, aiohttp.ClientError):
                await asyncio.sleep(0.2)  # the API server may be away (an outage run)
            except Exception as error:  # a bug of the watch's must show
                self.played["error"] = f"the Jobs' watch: {error!r}"
                await asyncio.sleep(0.2)

    async def _run(self) -> None:
        batch = client.BatchV1Api(self.stack.admin)
        while True:
            try:
                listed = await batch.list_namespaced_job(
                    self.namespace, _request_timeout=PLAYER_CALL_SECONDS
                )
                for job in self.stack.admin.sanitize_for_serialization(listed)["items"]:
                    uid = job["metadata"]["uid"]
                    if (job.get("status") or {}).get("conditions"):
                        continue
                    if uid not in self.played:  # its containers run once
                        self.played[uid] = await self._play(job)
                    # written until it holds (the API server may have been away)
                    await self._write_status(
                        job["metadata"]["name"], succeeded=self.played[uid] == "succeeded"
                    )
            except (ApiException, OSError, TimeoutError, aiohttp.ClientError):
                pass  # the API server may be away (an outage run): look again
            except Exception as error:  # a bug of the player's must show
                self.played["error"] = repr(error)
            await asyncio.sleep(0.2)

    async def _play(self, job: dict[str, Any]) -> str:
        """Each container in order: ``talosctl upgrade`` runs for real against the
        stand-in; ``talosctl upgrade-k8s`` sets the kubelets' version; a read's or a
        check's talosctl and Cilium's helm just succeed (what a read prints is played in
        the operator, ``played_operator``)."""
        name = job["metadata"]["name"]
        kind = (job["metadata"].get("annotations") or {}).get(jobs.TYPE_ANNOTATION)
        pod = job["spec"]["template"]["spec"]
        succeeded = True
        for container in (*(pod.get("initContainers") or ()), *pod["containers"]):
            args = list(container.get("args") or ())
            if kind == "talos" and args[:1] == ["upgrade"]:
                done = await asyncio.to_thread(self.stack.talosctl, args)
                if done.returncode != 0:
                    self.played[f"{name} output"] = done.stderr[-2000:]
                    succeeded = False
                    break
            elif args[:1] == ["upgrade-k8s"]:
                await self.stack.set_nodes(kubelet=args[args.index("--to") + 1])
        return "succeeded" if succeeded else "failed"

    async def _write_status(self, name: str, *, succeeded: bool) -> None:
        batch = client.BatchV1Api(self.stack.admin)
        now = _now()
        await batch.patch_namespaced_job_status(
            name, self.namespace, {"status": {"startTime": now, "active": 1, "ready": 0}},
            _request_timeout=PLAYER_CALL_SECONDS,
        )  # fmt: skip

        def condition(type_: str, reason: str) -> dict[str, str]:
            return {"type": type_, "status": "True", "reason": reason, "message": reason,
                    "lastProbeTime": now, "lastTransitionTime": now}  # fmt: skip

        if succeeded:
            status: dict[str, Any] = {
                "active": 0, "ready": 0, "terminating": 0, "succeeded": 1,
                "completionTime": now, "uncountedTerminatedPods": {},
                "conditions": [condition("SuccessCriteriaMet", "CompletionsReached"),
                               condition("Complete", "CompletionsReached")],
            }  # fmt: skip
        else:
            status = {
                "active": 0, "ready": 0, "terminating": 0, "failed": 1,
                "uncountedTerminatedPods": {},
                "conditions": [condition("FailureTarget", "BackoffLimitExceeded"),
                               condition("Failed", "BackoffLimitExceeded")],
            }  # fmt: skip
        await batch.patch_namespaced_job_status(
            name, self.namespace, {"status": status}, _request_timeout=PLAYER_CALL_SECONDS
        )


class Stack:
    """Everything a run needs; ``async with Stack(workdir) as stack``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.registry: test_registry.LocalRegistry | None = None
        self.plane = controlplane.ControlPlane(workdir=workdir / "plane")
        #: The API server talosctl's drain reaches (``MachineService.Kubeconfig``): a
        #: workload cluster's own, which stays up when the management cluster's goes away.
        self.workload = controlplane.ControlPlane(workdir=workdir / "workload")
        self.admin: ApiClient = None  # type: ignore[assignment]
        self.workload_admin: ApiClient = None  # type: ignore[assignment]
        self.holder: ApiClient = None  # type: ignore[assignment]
        self.account: account.Account | None = None
        self.proxy: apiproxy.ApiProxy | None = None
        self.standin: talos_standin.TalosApi | None = None
        self.operator: OperatorProcess | None = None
        self.talosconfig = ""
        self.webhook_port = 0
        self.outage_part = "kube-apiserver"
        self.outage_seconds: list[float] = []
        self._outage_over = threading.Event()
        self._outage_over.set()
        self._standins = 0

    # --- start and stop --------------------------------------------------------------

    async def __aenter__(self) -> Stack:
        await asyncio.to_thread(self._start_parts)
        self.admin = await config.new_client_from_config(config_file=str(self.plane.kubeconfig))
        self.workload_admin = await config.new_client_from_config(
            config_file=str(self.workload.kubeconfig)
        )
        holder = self.plane.user_kubeconfig(HOLDER, groups=["ichor-crash-users"])
        self.holder = await config.new_client_from_config(config_file=str(holder))
        await self._nodes()
        await asyncio.to_thread(self.restart_standin)
        await operator.apply_installation(client.CustomObjectsApi(self.admin), {"enabled": False})
        await asyncio.to_thread(self.start_operator)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.operator is not None:
            await asyncio.to_thread(self.operator.stop)
        for api in (self.admin, self.holder, self.workload_admin):
            if api is not None:
                await api.close()
        if self.standin is not None:
            self.standin.stop()
        if self.proxy is not None:
            self.proxy.close()
        if self.registry is not None:
            self.registry.close()
        self.plane.stop()
        self.workload.stop()

    def _start_parts(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.registry = test_registry.LocalRegistry(workdir=self.workdir / "registry")
        self.registry.start()
        for what, tags in RELEASES.items():
            self.registry.seed(f"{REPOSITORIES}/{what}", tags)
        self.plane.start()
        self.workload.start()
        operator.apply_crds(self.plane)
        self.account = account.grant(
            self.plane, role=OPERATOR_ROLE, directory=self.workdir / "account",
            namespace=ACCOUNT_NAMESPACE,
        )  # fmt: skip
        editor = rbac.cluster_role(EDITOR_ROLE, [{
            "apiGroups": [kinds.GROUP], "resources": ["talosclusters", "talosoperations"],
            "verbs": ["get", "list", "watch", "create", "update", "patch"],
        }, {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])  # fmt: skip
        manifest = [
            editor, rbac.override_role(OVERRIDE_ROLE),
            rbac.binding(EDITOR_ROLE, [HOLDER]), rbac.binding(OVERRIDE_ROLE, [HOLDER]),
        ]  # fmt: skip
        self.plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifest))
        self.proxy = apiproxy.ApiProxy(
            server=self.plane.server, ca_file=self.plane.ca_file, cert=self.account.cert,
            key=self.account.key, workdir=self.workdir, kill=self._kill,
            on_outage=self._outage,
        ).start()  # fmt: skip
        tls = certs.write_serving_certificate(self.workdir / "webhook-tls")
        self.webhook_port = controlplane.free_port()
        healthz = controlplane.free_port()
        url = f"https://127.0.0.1:{self.webhook_port}"
        for rendered in (
            configuration.render_mutating_configuration(url=url, ca_bundle=tls.ca.read_bytes()),
            configuration.render_configuration(url=url, ca_bundle=tls.ca.read_bytes()),
        ):
            self.plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(dict(rendered)))
        env = controlplane.loopback_env({
            **OPERATOR_ENV,
            "KUBECONFIG": str(self.proxy.kubeconfig(self.workdir / "operator.kubeconfig")),
            "ICHOR_WEBHOOK_CERT": str(tls.cert), "ICHOR_WEBHOOK_KEY": str(tls.key),
            "ICHOR_WEBHOOK_ADDR": "127.0.0.1", "ICHOR_WEBHOOK_PORT": str(self.webhook_port),
            "ICHOR_WEBHOOK_CLIENT_CA": str(self.plane.webhook_client_ca),
            "ICHOR_WEBHOOK_CLIENT_NAMES": controlplane.WEBHOOK_CLIENT,
            "ICHOR_LIVENESS_ENDPOINT": f"http://127.0.0.1:{healthz}/healthz",
            "POD_ID": "ichor-crash-0",
        })  # fmt: skip
        env = checkout.python_env(env)  # for python -m tests.harness.played_operator
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self.operator = OperatorProcess(
            env, log=self.workdir / "operator.log",
            healthz=f"http://127.0.0.1:{healthz}/healthz", workdir=self.workdir,
        )  # fmt: skip

    def references(self) -> dict[str, str]:
        """The release check's repositories in the stack's registry: talos, kubernetes,
        chart (never seeded: its listing fails)."""
        assert self.registry is not None
        return {
            "talos": self.registry.reference(f"{REPOSITORIES}/installer-base"),
            "kubernetes": self.registry.reference(f"{REPOSITORIES}/kubelet"),
            "chart": self.registry.reference(f"{REPOSITORIES}/charts/ichor"),
        }

    async def release_check(self, *, enabled: bool) -> None:
        """The installation's release check on or off, on the stack's registry."""
        found = self.references()
        await client.CustomObjectsApi(self.admin).patch_cluster_custom_object(
            kinds.GROUP, kinds.VERSION, kinds.Plural.ICHOR_INSTALLATIONS,
            kinds.INSTALLATION_NAME,
            {"spec": {"releaseCheck": {
                "enabled": enabled, "interval": "1h", "talosRepository": found["talos"],
                "kubernetesRepository": found["kubernetes"], "chartRepository": found["chart"],
            }}},
            _content_type=MERGE,
        )  # fmt: skip

    def restart_standin(self) -> None:
        """A fresh stand-in: its nodes on v1.14.3, its records empty."""
        if self.standin is not None:
            self.standin.stop()
        self._standins += 1
        self.standin = talos_standin.TalosApi(
            workdir=self.workdir / f"talos-{self._standins}", endpoint_host="127.0.0.1",
            nodes=TALOS_NODES, kubeconfig=self.plane.kubeconfig,
            served_kubeconfig=self.workload.kubeconfig.read_text(), down=1.5,
        ).start()  # fmt: skip
        self.talosconfig = self.standin.talosconfig(endpoint=f"127.0.0.1:{self.standin.port}")
        (self.workdir / "talosconfig").write_text(self.talosconfig)

    def talosctl(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        """The real talosctl, as the Job's container runs it, against the stand-in."""
        binary = binaries.find("talosctl")
        env = controlplane.loopback_env(
            {"TALOSCONFIG": str(self.workdir / "talosconfig"), "HOME": str(self.workdir)}
        )
        return subprocess.run(
            [str(binary), *args], env=env, capture_output=True, text=True, timeout=240,
            check=False,
        )  # fmt: skip

    def start_operator(self) -> None:
        assert self.operator is not None
        self.operator.start()
        self.wait_webhook()

    def wait_webhook(self) -> None:
        from tests.component.webhook import harness

        assert self.operator is not None
        harness.wait_until_answering(self.plane, alive=lambda: self.operator is not None
                                     and self.operator.alive)  # fmt: skip

    def _kill(self) -> None:
        if self.operator is not None:
            self.operator.kill()

    def _outage(self) -> None:
        self._outage_over.clear()
        try:
            self.outage_seconds.append(self.plane.restart(self.outage_part, down=1.0))
        finally:
            self._outage_over.set()

    async def outage_over(self) -> None:
        """Once an outage a held call started is over (the part back), or at once."""
        await asyncio.to_thread(self._outage_over.wait, OUTAGE_WAIT)

    # --- the workload's Nodes ----------------------------------------------------------

    async def _nodes(self) -> None:
        """The Nodes the operator reads (and the stand-in moves), and their copies in the
        workload API server, which talosctl's drain cordons and uncordons."""
        for api in (self.admin, self.workload_admin):
            core = client.CoreV1Api(api)
            for node in TALOS_NODES:
                labels = {jobs.CONTROL_PLANE_LABEL: ""} if node.control_plane else {}
                body = {"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": node.name, "labels": labels}}  # fmt: skip
                with contextlib.suppress(ApiException):
                    await core.create_node(body)  # type: ignore[arg-type]
        await self.set_nodes(talos="v1.14.3", kubelet="v1.36.6")
        await self.set_nodes(talos="v1.14.3", kubelet="v1.36.6", api=self.workload_admin)

    async def set_nodes(
        self,
        *,
        talos: str | None = None,
        kubelet: str | None = None,
        api: ApiClient | None = None,
    ) -> None:
        """The Nodes' versions and Ready, in the management API server (``api``: another)."""
        api = api or self.admin
        core = client.CoreV1Api(api)
        for node in TALOS_NODES:
            found = await core.read_node(node.name)
            info = api.sanitize_for_serialization(found).get("status", {}).get(
                "nodeInfo"
            ) or nodes.talos_node_info(talos="v1.14.3", kubelet="v1.36.6")
            if talos is not None:
                info["osImage"] = f"Talos ({talos})"
            if kubelet is not None:
                info["kubeletVersion"] = kubelet
            status = {
                "addresses": [{"type": "InternalIP", "address": node.address},
                              {"type": "Hostname", "address": node.name}],
                "nodeInfo": info,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "ok", "lastHeartbeatTime": _now(),
                                "lastTransitionTime": _now()}],
            }  # fmt: skip
            await core.patch_node_status(node.name, {"status": status})

    # --- one run -----------------------------------------------------------------------

    async def namespace(self, flow: str) -> Context:
        name = f"crash-{flow}-{uuid.uuid4().hex[:6]}"
        await self.core.create_namespace({"metadata": {"name": name}})  # type: ignore[arg-type]
        await asyncio.to_thread(account.bind_tenant_reader, self.plane, namespace=name)
        secret = {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "prod-talosconfig"},
            "data": {"talosconfig": base64.b64encode(self.talosconfig.encode()).decode()},
        }  # fmt: skip
        await self.core.create_namespaced_secret(name, secret)  # type: ignore[arg-type]
        return Context(stack=self, namespace=name, admin=self.admin, holder=self.holder)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.admin)

    async def clean(self, context: Context) -> None:
        """Remove the run's objects, so the operator no longer looks at them."""
        custom = context.custom
        for plural in (kinds.Plural.TALOS_OPERATIONS, kinds.Plural.TALOS_CLUSTERS):
            listed: Any = await custom.list_namespaced_custom_object(
                kinds.GROUP, kinds.VERSION, context.namespace, plural
            )
            for item in listed["items"]:
                name = item["metadata"]["name"]
                if item["metadata"].get("finalizers"):
                    await custom.patch_namespaced_custom_object(
                        kinds.GROUP, kinds.VERSION, context.namespace, plural, name,
                        {"metadata": {"finalizers": None}},
                        _content_type=MERGE,
                    )  # fmt: skip
                with contextlib.suppress(ApiException):
                    await custom.delete_namespaced_custom_object(
                        kinds.GROUP, kinds.VERSION, context.namespace, plural, name
                    )
        batch = client.BatchV1Api(self.admin)
        for job in await context.jobs():
            with contextlib.suppress(ApiException):
                await batch.delete_namespaced_job(job["metadata"]["name"], context.namespace)
        binding = f"{account.TENANT_READER}-{context.namespace}-default"[:253]
        await asyncio.to_thread(account.unbind, self.plane, binding)


Check = Callable[[Context], Awaitable[list[str]]]
#: The crash points of a flow, from its clean life's calls.
PointsOf = Callable[[tuple["Call", ...]], list["Point"]]


async def eventually(
    probe: Callable[[], Awaitable[bool]], *, within: float, step: float = 0.2
) -> bool:
    """Whether ``probe`` held within ``within`` seconds (an API error, or the API server
    away, is a no)."""
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(ApiException, OSError, TimeoutError, aiohttp.ClientError):
            if await probe():
                return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)


@contextlib.asynccontextmanager
async def playing(stack: Stack, context: Context) -> AsyncIterator[JobPlayer]:
    player = JobPlayer(stack, context.namespace, context.created)
    player.start()
    try:
        yield player
    finally:
        await player.stop()


def dump(path: Path, outcomes: list[Outcome]) -> None:
    """Every run's line, for the report and for a person reading a failure."""
    path.write_text("\n".join(o.line() for o in outcomes) + "\n")


def fault_for(
    action: Action,
    at: int,
    *,
    writes: bool | None = None,
    match: Callable[[str, str, bytes], bool] | None = None,
) -> Fault:
    """The fault ``action`` at call ``at`` (``writes``: at the ``at``-th write, the default
    for ``conflict``; ``match``: at the ``at``-th call it says yes to)."""
    counted = action is Action.CONFLICT if writes is None else writes
    return Fault(action=action, at=at, writes=counted, match=match)


#: The faults that end the operator: it starts again without one.
KILLS = frozenset({Action.BEFORE, Action.INFLIGHT, Action.AFTER})


@dataclass(frozen=True)
class Flow:
    """One life the sweep crashes at every call: how to set it up, start it, know it is
    over, and what must hold then."""

    name: str
    #: Before the count: the objects the flow starts from, seen by the operator.
    prepare: Callable[[Context], Awaitable[None]]
    #: The start of its life; called again after a restart (idempotent), since a kill
    #: inside the webhook's call of a person's write fails that write.
    start: Callable[[Context], Awaitable[None]]
    #: Whether the life is over: everything done, every owed Event posted.
    complete: Callable[[Context], Awaitable[bool]]
    #: The problems at the end (none: every invariant holds).
    check: Check
    #: The Nodes' versions before it runs (the Nodes are shared by the runs).
    talos: str = "v1.14.3"
    kubelet: str = "v1.36.6"


async def run(
    stack: Stack, flow: Flow, fault: Fault | None, *, dead: Check | None = None
) -> Outcome:
    """``flow`` once, with ``fault`` (None: counted only); ``dead``: what must hold while
    the operator it killed is down (its problems are the run's)."""
    assert stack.proxy is not None
    assert stack.operator is not None
    started = time.monotonic()
    if not stack.operator.alive:  # an earlier run's end found it down: that run failed
        await asyncio.to_thread(stack.start_operator)
    stack.restart_standin()
    await stack.set_nodes(talos=flow.talos, kubelet=flow.kubelet)
    context = await stack.namespace(flow.name)
    problems: list[str] = []
    calls: list[Call] = []
    try:
        await flow.prepare(context)
        async with playing(stack, context) as player:
            stack.proxy.arm(fault)
            with contextlib.suppress(ApiException):
                await flow.start(context)
            if fault is not None and fault.action in KILLS:
                await eventually(
                    lambda: _fired_or(fault, flow, context), within=REACH_TIMEOUT, step=0.05
                )
                if fault.fired.is_set():
                    await asyncio.to_thread(stack.operator.wait_dead)
                    calls = stack.proxy.disarm()
                    if dead is not None:
                        problems += await dead(context)
                    await asyncio.to_thread(stack.start_operator)
                    await flow.start(context)
            if not await eventually(lambda: flow.complete(context), within=COMPLETE_TIMEOUT):
                problems.append(f"stuck: not complete {COMPLETE_TIMEOUT:.0f} s after the start")
            if not calls:
                calls = stack.proxy.disarm()
            context.faulted = fault is not None and fault.fired.is_set()
            if not stack.operator.alive:
                problems.append("the operator is not running at the end")
            if "error" in player.played:
                problems.append(f"the Job player failed: {player.played['error']}")
            problems += await flow.check(context)
    except Exception as error:  # a run that breaks is a finding, not the sweep's end
        problems.append(f"the run failed: {type(error).__name__}: {error}")
        stack.proxy.disarm()
        if not stack.operator.alive:
            await asyncio.to_thread(stack.start_operator)
    finally:
        await stack.outage_over()  # a run that failed inside one leaves none to the next
        with contextlib.suppress(ApiException, OSError):
            await stack.clean(context)
    return Outcome(
        flow=flow.name, fault=fault, call=fault.call if fault is not None else None,
        calls=tuple(calls), problems=tuple(problems), seconds=time.monotonic() - started,
    )  # fmt: skip


async def _fired_or(fault: Fault, flow: Flow, context: Context) -> bool:
    return fault.fired.is_set() or await flow.complete(context)


@dataclass(frozen=True, order=True)
class Point:
    """One crash point: ``action`` at the ``at``-th call (``writes``: the ``at``-th write)."""

    at: int
    action: Action
    writes: bool

    def fault(self) -> Fault:
        return fault_for(self.action, self.at, writes=self.writes)

    def __str__(self) -> str:
        return f"{self.action} at {'write' if self.writes else 'call'} {self.at}"


def crash_points(life: tuple[Call, ...]) -> list[Point]:
    """Every kill point of a life: each write killed before it is sent, with it sent and
    its answer unread, and after its answer; each read killed with it in flight (a read
    changes nothing, so before, in flight and after it are one state). Writes are
    counted among writes, which polling reads do not shift."""
    writes = sum(1 for c in life if c.write)
    points = [
        Point(k, a, True)
        for k in range(1, writes + 1)
        for a in (Action.BEFORE, Action.INFLIGHT, Action.AFTER)
    ]
    points += [Point(c.number, Action.INFLIGHT, False) for c in life if not c.write]
    return points


def write_points(life: tuple[Call, ...], action: Action) -> list[Point]:
    """``action`` at each write of a life (``conflict``, ``outage``)."""
    return [Point(k, action, True) for k in range(1, sum(1 for c in life if c.write) + 1)]


def sample(points: list[Point], k: int, seed: int) -> list[Point]:
    """``k`` of ``points`` chosen by ``seed``, at least one kill on a write when any."""
    rng = random.Random(seed)
    on_writes = [p for p in points if p.writes]
    if not on_writes or k < 1:
        return sorted(rng.sample(points, min(k, len(points))))
    first = rng.choice(on_writes)
    rest = [p for p in points if p != first]
    return sorted([first, *rng.sample(rest, min(k - 1, len(rest)))])


@dataclass
class Sweep:
    """Every crash point of one flow: its clean life's calls, and each run's outcome."""

    flow: str
    life: tuple[Call, ...] = ()
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def covered(self) -> int:
        return sum(1 for o in self.outcomes if o.reached)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.problems]

    def line(self) -> str:
        actions: dict[str, int] = {}
        for outcome in self.outcomes:
            if outcome.reached and outcome.fault is not None:
                actions[outcome.fault.action] = actions.get(outcome.fault.action, 0) + 1
        each = ", ".join(f"{a} {n}" for a, n in sorted(actions.items()))
        seconds = sum(o.seconds for o in self.outcomes)
        return (
            f"{self.flow}: {len(self.life)} calls in its life, {self.covered} crash points "
            f"covered ({each}), {len(self.failed)} failed, {seconds:.0f} s"
        )


async def life(stack: Stack, flow: Flow) -> tuple[Call, ...]:
    """The calls of ``flow``'s life without a fault; raises when it does not complete."""
    outcome = await run(stack, flow, None)
    if outcome.problems:
        raise AssertionError(f"{flow.name} fails without a fault: {outcome.problems}")
    return outcome.calls


async def sweep(
    stack: Stack,
    flow: Flow,
    *,
    points: PointsOf = crash_points,
    progress: Callable[[Outcome], None] = lambda _: None,
) -> Sweep:
    """``flow`` once per crash point ``points`` finds in its clean life."""
    found = Sweep(flow=flow.name, life=await life(stack, flow))
    for point in points(found.life):
        outcome = await run(stack, flow, point.fault())
        found.outcomes.append(outcome)
        progress(outcome)
    return found


__all__ = [
    "Action", "Context", "Fault", "Flow", "Made", "Outcome", "Point", "Stack", "Sweep",
    "crash_points", "read_only",
    "run", "sample", "sweep", "write_points",
]  # fmt: skip
