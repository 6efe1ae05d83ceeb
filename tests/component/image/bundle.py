"""Run a built image without a Docker engine: an OCI image layout unpacked into a root
filesystem, a runtime spec made from the image's config, and runc.

Why runc and not ``buildah run``: buildah runs a working container (a writable copy of
the image) and cannot make its root read-only or leave it without capabilities, and it
does not read the image's command or user the way a kubelet does. runc runs exactly the
bundle written here: the image's user, command and environment, a read-only root, a
writable ``/tmp`` only, no capabilities, no new privileges, its own PID, IPC, UTS and
mount namespaces, and the host's network namespace, so the process reaches the test API
server on 127.0.0.1 and the API server reaches its webhook there. What a kubelet adds and
this does not: a seccomp profile, resource limits, and the Pod's own network namespace.

Nothing here outlives the test: the root filesystem is a directory of the test, runc's
state lives in a folder of its own (``--root``), and ``Container.stop`` deletes the
container (its cgroups with it); an interpreter that exits first deletes it too.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
REF_NAME = "org.opencontainers.image.ref.name"
_PR_SET_PDEATHSIG = 1
#: As runc's and containerd's defaults: hidden, and read-only, parts of /proc and /sys.
MASKED_PATHS = [
    "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
]  # fmt: skip
READONLY_PATHS = [
    "/proc/asound",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
]


@dataclass(frozen=True)
class ImageConfig:
    """What a runtime reads from an image's config to start its process."""

    user: str
    entrypoint: list[str]
    cmd: list[str]
    env: list[str]
    working_dir: str

    @classmethod
    def parse(cls, blob: Mapping[str, Any]) -> ImageConfig:
        config = blob.get("config") or {}
        return cls(
            user=config.get("User") or "0",
            entrypoint=list(config.get("Entrypoint") or []),
            cmd=list(config.get("Cmd") or []),
            env=list(config.get("Env") or []),
            working_dir=config.get("WorkingDir") or "/",
        )

    def ids(self) -> tuple[int, int]:
        """The numeric uid and gid (a runtime would look a name up in the image; ours is
        numeric, and a name fails here on purpose)."""
        uid, _, gid = self.user.partition(":")
        return int(uid), int(gid or uid)


def _blob(layout: Path, digest: str) -> Path:
    algorithm, _, hexdigest = digest.partition(":")
    return layout / "blobs" / algorithm / hexdigest


def _manifest(layout: Path, ref: str) -> dict[str, Any]:
    index = json.loads((layout / "index.json").read_text())
    found = [m for m in index["manifests"] if (m.get("annotations") or {}).get(REF_NAME) == ref]
    assert len(found) == 1, f"{layout} holds {len(found)} manifests named {ref}"
    manifest: dict[str, Any] = json.loads(_blob(layout, found[0]["digest"]).read_text())
    return manifest


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _tar(*args: str) -> str:
    return subprocess.run(
        ["tar", *args], capture_output=True, text=True, check=True, timeout=600
    ).stdout


def _apply_layer(rootfs: Path, layer: Path, media_type: str) -> None:
    """One layer onto ``rootfs`` (the OCI image spec's changeset rule): its whiteouts remove
    what the layers below left, then its other entries are written. GNU tar writes them
    (owners by number, modes, links), many times faster than Python's tarfile."""
    assert media_type.endswith(("tar", "tar+gzip")), f"a layer of type {media_type}"
    for name in _tar("-tf", str(layer)).splitlines():
        path = PurePosixPath(name)
        if path.name == OPAQUE:
            directory = rootfs / path.parent
            for child in directory.iterdir() if directory.is_dir() else ():
                _remove(child)
        elif path.name.startswith(WHITEOUT):
            _remove(rootfs / path.parent / path.name[len(WHITEOUT) :])
    _tar("-xf", str(layer), "-C", str(rootfs), "--numeric-owner", "--same-permissions",
         "--xattrs", f"--exclude={WHITEOUT}*")  # fmt: skip


def unpack(layout: Path, *, ref: str, rootfs: Path) -> ImageConfig:
    """Unpack the image ``ref`` of the OCI layout ``layout`` into ``rootfs``; its config."""
    manifest = _manifest(layout, ref)
    rootfs.mkdir(parents=True)
    for layer in manifest["layers"]:
        _apply_layer(rootfs, _blob(layout, layer["digest"]), layer["mediaType"])
    return ImageConfig.parse(json.loads(_blob(layout, manifest["config"]["digest"]).read_text()))


@dataclass(frozen=True)
class Mount:
    """A host file or folder bound read-only at ``target`` in the container."""

    source: Path
    target: str


@dataclass
class Spec:
    """The container: the image's process as given, and what the runtime adds."""

    config: ImageConfig
    rootfs: Path
    hostname: str
    env: Mapping[str, str]
    binds: Sequence[Mount] = ()
    tmp_size: str = "64m"
    args: Sequence[str] | None = None  # the image's own entrypoint and command when None
    cgroup: str = ""  # linux.cgroupsPath; runc's default when empty

    def environment(self) -> list[str]:
        """The image's variables, then the container's, which win (as a kubelet does)."""
        merged = dict(e.partition("=")[::2] for e in self.config.env)
        merged.update(self.env)
        return [f"{k}={v}" for k, v in merged.items()]

    def render(self) -> dict[str, Any]:
        uid, gid = self.config.ids()
        args = self.config.entrypoint + self.config.cmd if self.args is None else list(self.args)
        no_capabilities: dict[str, list[str]] = {
            k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")
        }
        mounts: list[dict[str, Any]] = [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {
                "destination": "/dev",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
            },
            {
                "destination": "/dev/pts",
                "type": "devpts",
                "source": "devpts",
                "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
            },
            {
                "destination": "/dev/shm",
                "type": "tmpfs",
                "source": "shm",
                "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
            },
            {
                "destination": "/dev/mqueue",
                "type": "mqueue",
                "source": "mqueue",
                "options": ["nosuid", "noexec", "nodev"],
            },
            {
                "destination": "/sys",
                "type": "sysfs",
                "source": "sysfs",
                "options": ["nosuid", "noexec", "nodev", "ro"],
            },
            # The one writable place, as the chart's emptyDir at /tmp.
            {
                "destination": "/tmp",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "nodev", "mode=1777", f"size={self.tmp_size}"],
            },
        ]
        mounts += [
            {
                "destination": bind.target,
                "type": "bind",
                "source": str(bind.source),
                "options": ["rbind", "ro", "nosuid", "nodev"],
            }
            for bind in self.binds
        ]
        spec: dict[str, Any] = {
            "ociVersion": "1.0.2",
            "process": {
                "terminal": False,
                "user": {"uid": uid, "gid": gid, "additionalGids": [gid]},
                "args": args,
                "env": self.environment(),
                "cwd": self.config.working_dir,
                "capabilities": no_capabilities,
                "noNewPrivileges": True,
            },
            "root": {"path": str(self.rootfs), "readonly": True},
            "hostname": self.hostname,
            "mounts": mounts,
            "linux": {
                # No "network": the host's namespace, where 127.0.0.1 is the test's.
                "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
                "maskedPaths": MASKED_PATHS,
                "readonlyPaths": READONLY_PATHS,
            },
        }
        if self.cgroup:
            spec["linux"]["cgroupsPath"] = self.cgroup
        return spec


def _die_with_parent() -> None:
    # SIGTERM: runc passes it to the container, which then stops like a Pod told to.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Container:
    """``runc run`` of a bundle, in the foreground of a child process; ``stop`` ends it the
    way a kubelet does (SIGTERM, then SIGKILL after ``grace`` seconds) and deletes it."""

    def __init__(
        self, *, runc: Path, bundle: Path, spec: Spec, name: str, state: Path, log: Path
    ) -> None:
        self.runc, self.bundle, self.name, self.state, self.log = runc, bundle, name, state, log
        # A cgroup named after the container, one level deep: runc's delete removes it.
        self.cgroup = f"/{name}"
        spec.cgroup = self.cgroup
        (bundle / "config.json").write_text(json.dumps(spec.render(), indent=2))
        self._process: subprocess.Popen[bytes] | None = None

    def _runc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.runc), "--root", str(self.state), *args],
            capture_output=True, text=True, check=check, timeout=60,
        )  # fmt: skip

    def start(self) -> None:
        with self.log.open("wb") as sink:
            self._process = subprocess.Popen(
                [str(self.runc), "--root", str(self.state), "run", "--bundle", str(self.bundle),
                 self.name],
                stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )  # fmt: skip
        atexit.register(self.delete)

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self._process is not None, "not started"
        return self._process

    def exited(self) -> int | None:
        return self.process.poll()

    def pid(self) -> int:
        """The container's first process, as the host sees it."""
        deadline = time.monotonic() + 30
        while True:
            state = self._runc("state", self.name, check=False)
            if state.returncode == 0 and json.loads(state.stdout).get("pid"):
                pid: int = json.loads(state.stdout)["pid"]
                return pid
            assert self.exited() is None, f"runc exited {self.exited()}:\n{self.log_text()}"
            assert time.monotonic() < deadline, f"no container state: {state.stderr}"
            time.sleep(0.2)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, *, grace: float = 30.0) -> int:
        """SIGTERM, SIGKILL after ``grace``; returns the exit status runc reports."""
        if self.exited() is None:
            self._runc("kill", self.name, "TERM", check=False)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self._runc("kill", self.name, "KILL", check=False)
                self.process.wait(30)
        self.delete()
        return self.process.returncode

    def delete(self) -> None:
        if self.state.exists():
            self._runc("delete", "--force", self.name, check=False)

    def leftovers(self) -> Iterator[str]:
        """What would outlive the container: runc's record of it, its cgroups, mounts of
        its bundle."""
        if self.state.exists() and any(self.state.iterdir()):
            listed = self._runc("list", "--format", "json").stdout
            for entry in json.loads(listed or "null") or []:
                yield f"runc still lists {entry['id']} ({entry['status']})"
        for hierarchy in Path("/sys/fs/cgroup").iterdir():
            if (hierarchy / self.cgroup.lstrip("/")).exists():
                yield f"cgroup {hierarchy / self.cgroup.lstrip('/')}"
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            if str(self.bundle) in line:
                yield f"mount {line}"
