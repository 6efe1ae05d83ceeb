"""A real etcd and kube-apiserver on loopback, for the component tests and the demo.

Admission webhooks, CRD schemas, status subresources, server-side dry runs and RBAC are
only proven against the real API server, so that is what this starts: the binaries
``make testenv`` builds, on free 127.0.0.1 ports, with a fresh certificate authority,
an admin client certificate (``system:masters``) and a service-account key pair.

The API server presents a client certificate of its own to every admission webhook it
calls (an ``AdmissionConfiguration`` whose kubeconfig names it for ``*``), signed by a
second CA, ``webhook_client_ca``: a webhook started with that CA runs with mutual TLS,
as the chart's ``webhook.clientAuth`` sets it up, and a caller without the certificate
is refused at the handshake.

It refuses to be a cluster: there is no kubelet, controller manager or scheduler, so
Pods never run, namespaces deleted stay ``Terminating`` and nothing is garbage-collected.
Other users are impersonated (``kubectl --as``) or given a client certificate of their
own (:meth:`ControlPlane.user_kubeconfig`); both reach RBAC the same way.

Processes started from the main thread die with it (``PR_SET_PDEATHSIG``) and are
stopped at interpreter exit, so a failed or killed test run leaves nothing behind;
``detached=True`` (``make cluster-up``) leaves them running until stopped by pid.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from base64 import b64encode
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import yaml

from tests.harness import binaries, certs

ADMIN_USER = "ichor-admin"
ADMIN_GROUPS = ("system:masters",)
#: The common name of the certificate the API server presents to admission webhooks.
WEBHOOK_CLIENT = "kube-apiserver-webhook-client"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"

_ETCD_READY_TIMEOUT = 30.0
_APISERVER_READY_TIMEOUT = 90.0
_STOP_GRACE = 10.0
_PORT_ATTEMPTS = 3
_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """etcd or kube-apiserver did not start; the message carries the end of its log."""


class KubectlError(subprocess.CalledProcessError):
    """A kubectl call failed; unlike its base class, the message shows what kubectl said."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout: {self.stdout}\nstderr: {self.stderr}"


class ProcessState(TypedDict):
    name: str
    pid: int
    binary: str
    log: str
    #: Seconds ``stack down`` waits after SIGTERM before SIGKILL (default 10).
    grace: NotRequired[float]
    #: True for a process holding a node (tests/harness/node.py): after it stops,
    #: ``stack down`` sweeps whatever of the node a killed holder left.
    holds_node: NotRequired[bool]


class State(TypedDict):
    """What a detached control plane leaves in ``state.json`` for ``down``."""

    server: str
    etcd_url: str
    kubeconfig: str
    ca_file: str
    processes: list[ProcessState]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (callers retry on a clash)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def loopback_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without proxies: everything here talks to 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.pop("KUBECONFIG", None)
    env.update(extra or {})
    return env


def _die_with_parent() -> None:
    # SIGKILL, not SIGTERM: a kube-apiserver told to shut down gracefully after its
    # parent died (and etcd with it) lingered for over a minute; nothing here is worth
    # a graceful end once the tests are gone.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class _Child:
    name: str
    popen: subprocess.Popen[bytes]
    binary: Path
    log: Path
    args: tuple[str, ...] = ()

    def state(self) -> ProcessState:
        return {
            "name": self.name,
            "pid": self.popen.pid,
            "binary": str(self.binary),
            "log": str(self.log),
        }

    def stop(self) -> None:
        if self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(_STOP_GRACE)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


_running: set[ControlPlane] = set()
_running_lock = threading.Lock()


@atexit.register
def _stop_all() -> None:
    with _running_lock:
        planes = list(_running)
    for plane in planes:
        plane.stop()


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    client: certs.Pem,
    impersonate: str | None = None,
    impersonate_groups: Sequence[str] = (),
) -> Path:
    """A self-contained kubeconfig (certificates embedded), optionally impersonating."""
    user_entry: dict[str, Any] = {
        "client-certificate-data": b64encode(client.cert).decode(),
        "client-key-data": b64encode(client.key).decode(),
    }
    if impersonate is not None:
        user_entry["as"] = impersonate
        if impersonate_groups:
            user_entry["as-groups"] = list(impersonate_groups)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "ichor-local",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": user, "context": {"cluster": "ichor-local", "user": user}}],
        "current-context": user,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


class ControlPlane:
    """etcd + kube-apiserver in ``workdir`` (pki/, etcd/, logs/, kubeconfig).

    Start with :meth:`start` or as a context manager; :meth:`stop` is idempotent.
    """

    def __init__(self, *, workdir: Path, detached: bool = False) -> None:
        self.workdir = workdir
        self.detached = detached
        self.pki = workdir / "pki"
        self.logs = workdir / "logs"
        self.kubeconfig = workdir / "kubeconfig"
        self.ca_file = self.pki / "ca.crt"
        #: The CA that signed the API server's webhook client certificate (give it to a
        #: webhook as its client CA), and that certificate with its key.
        self.webhook_client_ca = self.pki / "webhook-client-ca.crt"
        self.webhook_client_cert = self.pki / "webhook-client.crt"
        self.webhook_client_key = self.pki / "webhook-client.key"
        self.server = ""
        self.etcd_url = ""
        self.etcd_start_seconds = 0.0
        self.apiserver_start_seconds = 0.0
        self._authority: certs.Authority | None = None
        self._admin: certs.Pem | None = None
        self._children: list[_Child] = []

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> ControlPlane:
        """Start etcd, then kube-apiserver; return once ``/readyz`` answers ``ok``.

        Raises :class:`tests.harness.binaries.MissingBinaryError` when ``make testenv``
        has not run, and :class:`ControlPlaneError` when a process does not come up.
        """
        etcd_binary = binaries.find("etcd")
        apiserver_binary = binaries.find("kube-apiserver")
        for directory in (self.pki, self.logs):
            directory.mkdir(parents=True, exist_ok=True)
        self._write_pki()
        if not self.detached:
            with _running_lock:
                _running.add(self)
        try:
            self._retry_ports(lambda: self._start_etcd(etcd_binary))
            self._retry_ports(lambda: self._start_apiserver(apiserver_binary))
        except BaseException:
            self.stop()
            raise
        assert self._authority is not None
        assert self._admin is not None
        write_kubeconfig(
            self.kubeconfig,
            server=self.server,
            ca_pem=self._authority.cert_pem,
            user=ADMIN_USER,
            client=self._admin,
        )
        return self

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd, and drop etcd's preallocated data files."""
        for child in reversed(self._children):
            child.stop()
        self._children.clear()
        with _running_lock:
            _running.discard(self)
        shutil.rmtree(self.workdir / "etcd", ignore_errors=True)

    def restart(self, name: str, *, down: float = 1.0) -> float:
        """Stop ``etcd`` or ``kube-apiserver`` (SIGTERM, as a node shutting down does),
        keep it down ``down`` seconds, start it again on the same port with the same
        data, and return once it is ready again: the seconds it was away."""
        child = next(c for c in self._children if c.name == name)
        started = time.monotonic()
        child.stop()
        self._children.remove(child)
        time.sleep(down)
        again = self._spawn(name, child.binary, child.args)
        if name == "etcd":
            self._wait(again, timeout=_ETCD_READY_TIMEOUT,
                       ready=lambda: _etcd_healthy(f"{self.etcd_url}/health"))  # fmt: skip
        apiserver = next(c for c in self._children if c.name == "kube-apiserver")
        context = self.ssl_context()
        self._wait(apiserver, timeout=_APISERVER_READY_TIMEOUT,
                   ready=lambda: _apiserver_ready(f"{self.server}/readyz", context))  # fmt: skip
        return time.monotonic() - started

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return bool(self._children) and all(c.popen.poll() is None for c in self._children)

    def state(self) -> State:
        return {
            "server": self.server,
            "etcd_url": self.etcd_url,
            "kubeconfig": str(self.kubeconfig),
            "ca_file": str(self.ca_file),
            "processes": [child.state() for child in self._children],
        }

    # -- clients ---------------------------------------------------------------------

    def kubectl(
        self,
        *args: str,
        as_user: str | None = None,
        as_groups: Sequence[str] = (),
        input: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl as the admin, or impersonating ``as_user``/``as_groups``."""
        config = kubeconfig or self.kubeconfig
        command = [str(binaries.find("kubectl")), "--kubeconfig", str(config)]
        if as_user is not None:
            command += ["--as", as_user]
        for group in as_groups:
            command += ["--as-group", group]
        command += args
        result = subprocess.run(
            command,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=loopback_env(),
            check=False,
        )
        if check and result.returncode != 0:
            raise KubectlError(result.returncode, command, result.stdout, result.stderr)
        return result

    def user_kubeconfig(
        self, user: str, *, groups: Sequence[str] = (), impersonate: bool = False
    ) -> Path:
        """A kubeconfig the API server reads as ``user`` in ``groups``.

        By default its client certificate names the user (CN) and groups (O), which
        every client honours, the Python ones included. ``impersonate=True`` writes the
        admin's certificate with ``as:``/``as-groups:`` instead, as ``kubectl --as``
        does; client-go honours it, the Python clients do not. RBAC sees the same user.
        """
        if self._authority is None or self._admin is None:
            raise ControlPlaneError("the control plane was not started by this process")
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in user)
        if impersonate:
            return write_kubeconfig(
                self.workdir / "users" / f"{safe}.as.kubeconfig",
                server=self.server,
                ca_pem=self._authority.cert_pem,
                user=user,
                client=self._admin,
                impersonate=user,
                impersonate_groups=groups,
            )
        return write_kubeconfig(
            self.workdir / "users" / f"{safe}.kubeconfig",
            server=self.server,
            ca_pem=self._authority.cert_pem,
            user=user,
            client=self._authority.issue_client(user=user, groups=groups),
        )

    @property
    def authority(self) -> certs.Authority:
        """The CA the API server trusts for clients (also handy to sign webhook certs)."""
        if self._authority is None:
            raise ControlPlaneError("the control plane was not started by this process")
        return self._authority

    def ssl_context(self) -> ssl.SSLContext:
        """Verifies the API server and presents the admin certificate."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
        return context

    def webhook_caller_context(self, *, serving_ca: Path) -> ssl.SSLContext:
        """Calls a webhook as this API server does: verifies the webhook's serving
        certificate against ``serving_ca`` and presents the webhook client certificate."""
        context = ssl.create_default_context(cafile=str(serving_ca))
        context.load_cert_chain(self.webhook_client_cert, self.webhook_client_key)
        return context

    # -- internals -------------------------------------------------------------------

    def _write_pki(self) -> None:
        authority = certs.Authority.create("ichor-local-ca")
        authority.pem.write(cert_path=self.ca_file, key_path=self.pki / "ca.key")
        serving = authority.issue_server(
            hosts=[
                "127.0.0.1",
                "localhost",
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            common_name="kube-apiserver",
        )
        serving.write(cert_path=self.pki / "apiserver.crt", key_path=self.pki / "apiserver.key")
        admin = authority.issue_client(user=ADMIN_USER, groups=ADMIN_GROUPS)
        admin.write(cert_path=self.pki / "admin.crt", key_path=self.pki / "admin.key")
        webhook_authority = certs.Authority.create("ichor-local-webhook-client-ca")
        self.webhook_client_ca.write_bytes(webhook_authority.cert_pem)
        webhook_client = webhook_authority.issue_client(user=WEBHOOK_CLIENT)
        webhook_client.write(cert_path=self.webhook_client_cert, key_path=self.webhook_client_key)
        self._write_admission_configuration()
        signing = certs.SigningKey.create()
        (self.pki / "sa.key").write_bytes(signing.private)
        (self.pki / "sa.key").chmod(0o600)
        (self.pki / "sa.pub").write_bytes(signing.public)
        self._authority = authority
        self._admin = admin

    def _write_admission_configuration(self) -> None:
        """The kube-apiserver admission configuration that presents the webhook client
        certificate to every webhook (user ``*`` of its kubeconfig), as
        docs/install.md shows for a real API server."""
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "users": [
                {
                    "name": "*",
                    "user": {
                        "client-certificate": str(self.webhook_client_cert),
                        "client-key": str(self.webhook_client_key),
                    },
                }
            ],
        }
        (self.pki / "webhook-client.kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        plugins = [
            {
                "name": name,
                "configuration": {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "WebhookAdmissionConfiguration",
                    "kubeConfigFile": str(self.pki / "webhook-client.kubeconfig"),
                },
            }
            for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
        ]
        configuration = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "AdmissionConfiguration",
            "plugins": plugins,
        }
        (self.pki / "admission.yaml").write_text(yaml.safe_dump(configuration))

    def _retry_ports(self, start: Callable[[], None]) -> None:
        """Run ``start`` again with fresh ports if another process took one meanwhile."""
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                start()
                return
            except _PortClash:
                if attempt == _PORT_ATTEMPTS:
                    raise ControlPlaneError("no free loopback port after retries") from None

    def _spawn(self, name: str, binary: Path, args: Sequence[str]) -> _Child:
        log = self.logs / f"{name}.log"
        with log.open("ab") as sink:
            popen = subprocess.Popen(
                [str(binary), *args],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=loopback_env(),
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=None if self._detached_or_thread() else _die_with_parent,
            )
        child = _Child(name=name, popen=popen, binary=binary, log=log, args=tuple(args))
        self._children.append(child)
        return child

    def _detached_or_thread(self) -> bool:
        # PR_SET_PDEATHSIG fires when the starting *thread* ends; only the main thread
        # lives as long as the interpreter.
        return self.detached or threading.current_thread() is not threading.main_thread()

    def _wait(self, child: _Child, *, timeout: float, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if child.popen.poll() is not None:
                tail = _log_tail(child.log)
                self._children.remove(child)
                if "address already in use" in tail:
                    raise _PortClash
                raise ControlPlaneError(
                    f"{child.name} exited with {child.popen.returncode} while starting;"
                    f" end of {child.log}:\n{tail}"
                )
            if ready():
                return
            time.sleep(0.05)
        raise ControlPlaneError(
            f"{child.name} not ready after {timeout:.0f} s; end of {child.log}:\n"
            f"{_log_tail(child.log)}"
        )

    def _start_etcd(self, binary: Path) -> None:
        client, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        data = self.workdir / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        started = time.monotonic()
        child = self._spawn(
            "etcd",
            binary,
            [
                "--name=default",
                f"--data-dir={data}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait(
            child, timeout=_ETCD_READY_TIMEOUT, ready=lambda: _etcd_healthy(f"{client_url}/health")
        )
        self.etcd_url = client_url
        self.etcd_start_seconds = time.monotonic() - started

    def _start_apiserver(self, binary: Path) -> None:
        port = free_port()
        server = f"https://127.0.0.1:{port}"
        started = time.monotonic()
        child = self._spawn(
            "kube-apiserver",
            binary,
            [
                "--advertise-address=127.0.0.1",
                # 1.37 refuses a loopback advertise address for the endpoint reconciler
                # ("may not be in the loopback range"); nothing here needs the
                # default/kubernetes Endpoints it maintains.
                "--endpoint-reconciler-type=none",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.pki / 'apiserver-generated'}",
                f"--tls-cert-file={self.pki / 'apiserver.crt'}",
                f"--tls-private-key-file={self.pki / 'apiserver.key'}",
                f"--client-ca-file={self.ca_file}",
                f"--etcd-servers={self.etcd_url}",
                "--authorization-mode=RBAC",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                "--disable-admission-plugins=ServiceAccount",
                f"--admission-control-config-file={self.pki / 'admission.yaml'}",
                f"--service-account-issuer={server}/",
                f"--service-account-key-file={self.pki / 'sa.pub'}",
                f"--service-account-signing-key-file={self.pki / 'sa.key'}",
            ],
        )
        context = self.ssl_context()
        self._wait(
            child,
            timeout=_APISERVER_READY_TIMEOUT,
            ready=lambda: _apiserver_ready(f"{server}/readyz", context),
        )
        self.server = server
        self.apiserver_start_seconds = time.monotonic() - started


class _PortClash(Exception):
    pass


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _etcd_healthy(url: str) -> bool:
    try:
        with _NO_PROXY.open(url, timeout=2) as response:
            body: dict[str, str] = json.loads(response.read())
            return body.get("health") == "true"
    except (OSError, ValueError):
        return False


def _apiserver_ready(url: str, context: ssl.SSLContext) -> bool:
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    try:
        with opener.open(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False


@contextlib.contextmanager
def running(workdir: Path) -> Iterator[ControlPlane]:
    """A control plane for the duration of a ``with`` block."""
    plane = ControlPlane(workdir=workdir)
    try:
        yield plane.start()
    finally:
        plane.stop()
