"""``make image``'s automatic choices (``IMAGE_ENGINE=auto``, ``IMAGE_BASE=auto``), offline.

On a machine without a Docker engine, ``hack/image.sh`` builds with buildah; when the
Dockerfile's pinned base cannot be pulled (no registry reachable, as here), it builds on
the base made from Debian's packages and says why. The test runs the script itself with
fakes first on PATH: a ``docker`` whose engine does not answer, a ``buildah`` that records
its calls, fails the pull of the pinned base as a registry out of reach does (or succeeds,
for the other branch) and builds nothing, and a ``dpkg-query`` that reports buildah
installed (so nothing is installed). Nothing is pulled or built; it takes about a second.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PUBLISHED = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
assert PUBLISHED is not None
PUBLISHED_BASE = PUBLISHED[1]
#: What buildah prints when the registry cannot be reached (its last line is the reason).
PULL_ERROR = (
    f"Error: initializing source docker://{PUBLISHED_BASE}: pinging container registry"
    ' registry-1.docker.io: Get "https://registry-1.docker.io/v2/": dial tcp: lookup'
    " registry-1.docker.io: no such host"
)

FAKE_BUILDAH = r"""#!/usr/bin/env bash
printf '%s\n' "$*" >>"$FAKE_LOG"
case $1 in
  pull)
    if [[ $FAKE_PULL == ok ]]; then echo "sha256:0123"; exit 0; fi
    echo "Trying to pull ${*: -1}..." >&2
    echo "$FAKE_PULL_ERROR" >&2
    exit 125 ;;
  inspect)
    # the Debian base is in the store; the published base and any cached build are not
    [[ ${*: -1} == localhost/ichor-base:* ]] && exit 0
    exit 125 ;;
  images)
    if [[ $* == *CreatedAtRaw* ]]; then
      echo "2026-01-01 00:00:00 +0000 UTC|localhost/ichor-operator-cache:0000"
    else
      echo "389 MB"
    fi ;;
  *) exit 0 ;;
esac
"""
FAKES = {
    "buildah": FAKE_BUILDAH,
    # a docker CLI whose engine does not answer
    "docker": '#!/usr/bin/env bash\necho "docker $*" >>"$FAKE_LOG"\n'
    'echo "Cannot connect to the Docker daemon" >&2\nexit 1\n',
    "dpkg-query": "#!/usr/bin/env bash\nprintf 'install ok installed'\n",
    # nothing may be installed
    "apt-get": '#!/usr/bin/env bash\necho "apt-get $*" >>"$FAKE_LOG"\nexit 1\n',
    # the host's rules are read before and after a build: none, here
    "iptables-save": "#!/usr/bin/env bash\nexit 0\n",
}


def _run(tmp_path: Path, *, pull: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    fakes = tmp_path / "bin"
    fakes.mkdir()
    for name, text in FAKES.items():
        path = fakes / name
        path.write_text(text)
        path.chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    env = {
        "PATH": f"{fakes}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "ICHOR_CACHE": str(tmp_path / "cache"),
        "FAKE_LOG": str(log),
        "FAKE_PULL": pull,
        "FAKE_PULL_ERROR": PULL_ERROR,
        "IMAGE": "localhost/ichor-operator:fallback-test",
    }
    result = subprocess.run(
        ["bash", str(ROOT / "hack" / "image.sh"), "build"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result, log.read_text().splitlines()


def test_the_pinned_base_out_of_reach_falls_back_to_the_debian_base_saying_why(
    tmp_path: Path,
) -> None:
    result, calls = _run(tmp_path, pull="fails")
    assert result.returncode == 0, result.stderr
    said = result.stderr
    assert "engine: buildah" in said, said
    # the reason is the pull's last line, as buildah printed it
    assert f"base: {PUBLISHED_BASE} could not be pulled: {PULL_ERROR}" in said, said
    assert "base: using the Debian base instead" in said, said
    cached = re.search(r"base: (localhost/ichor-base:[0-9a-f]{12}) cached", said)
    assert cached is not None, said
    debian = cached[1]
    assert f"pull --quiet {PUBLISHED_BASE}" in calls, calls
    (build,) = [call for call in calls if call.startswith("bud ")]
    assert f"--build-arg PYTHON_IMAGE={debian} " in build, build
    assert "--pull=never" in build, build
    assert not [call for call in calls if call.startswith("apt-get")], calls


def test_a_pinned_base_that_pulls_is_the_one_built_on(tmp_path: Path) -> None:
    result, calls = _run(tmp_path, pull="ok")
    assert result.returncode == 0, result.stderr
    assert "Debian base" not in result.stderr, result.stderr
    (build,) = [call for call in calls if call.startswith("bud ")]
    assert f"--build-arg PYTHON_IMAGE={PUBLISHED_BASE} " in build, build
