"""How tests/gotools is built: the binary the tests use is the one of these sources, and
the module shares kube.sh's k8s.io versions (so Go's build cache serves those packages).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support import gotools

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "hack" / "testenv" / "gotools.sh"


def test_the_python_lookup_and_the_build_script_agree_on_the_stamp() -> None:
    """Else the tests would look for a folder the build never writes (or an old one)."""
    done = subprocess.run(
        ["bash", str(SCRIPT), "stamp"], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == gotools.stamp()
    assert (gotools.find("kstatus").parent.name, gotools.find("gowebhook").parent.name) == (
        gotools.stamp(),
        gotools.stamp(),
    )


def _requires(gomod: str) -> dict[str, str]:
    return dict(re.findall(r"^\s+(\S+) (v\S+)", gomod, re.MULTILINE))


def test_every_released_k8s_io_module_is_at_kube_sh_s_version() -> None:
    kube = (ROOT / "hack" / "testenv" / "kube.sh").read_text()
    match = re.search(r"^KUBE_VERSION=\$\{KUBE_VERSION:-v1\.(\d+\.\d+)\}$", kube, re.MULTILINE)
    assert match is not None, "kube.sh sets no KUBE_VERSION default"
    staging = f"v0.{match.group(1)}"
    requires = _requires((gotools.SOURCE / "go.mod").read_text())
    released = {
        path: version
        for path, version in requires.items()
        if path.startswith("k8s.io/") and re.fullmatch(r"v0\.\d+\.\d+", version)
    }
    assert {"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"} <= set(released)
    assert released == dict.fromkeys(released, staging), (
        f"tests/gotools/go.mod must pin k8s.io/* at {staging} (kube.sh's build): run "
        "`hack/testenv/gotools.sh pin`"
    )
    assert {"sigs.k8s.io/controller-runtime", "sigs.k8s.io/cli-utils"} <= set(requires)
