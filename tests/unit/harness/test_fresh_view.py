"""Which folders a fresh view of the machine covers, and what it reports as written.

A fresh view (tests/harness/machine.py ``FreshView``) covers the nearest existing folder
holding each default path, never ``/run`` (the machine-wide node lock lives there) nor
``/``; what lands in a covered folder's overlay, beyond the view's own removals, is
reported. Entering one needs root and is tested by the node tier.
"""

from __future__ import annotations

from pathlib import Path

from tests.harness import machine


def test_the_nearest_existing_folder_is_covered(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    assert machine.fence_of(str(tmp_path / "lib" / "kubelet")) == tmp_path / "lib"
    assert machine.fence_of(str(tmp_path / "not" / "yet" / "there")) == tmp_path


def test_run_and_the_root_are_never_covered(tmp_path: Path) -> None:
    assert machine.fence_of("/run/netns") is None
    assert machine.fence_of("/run/a/b/c") is None
    assert machine.fence_of("/opt") is None  # its folder is /
    # a link into /run is followed (as /var/run is on most machines)
    (tmp_path / "var-run").symlink_to("/run")
    assert machine.fence_of(str(tmp_path / "var-run" / "nri")) is None


def test_the_default_paths_outside_run_are_covered() -> None:
    covered = {path: machine.fence_of(path) for path in machine.DEFAULT_PATHS}
    assert covered["/var/log/containers"] == Path("/var/log")
    assert covered["/var/log/pods"] == Path("/var/log")
    assert covered["/var/lib/kubelet"] == Path("/var/lib")
    assert covered["/run/containerd"] is None


def test_written_is_what_changed_in_an_upper_folder_since_the_start(tmp_path: Path) -> None:
    upper = tmp_path / "upper"
    (upper / "kept").mkdir(parents=True)
    folder = Path("/var/log")
    view = machine.FreshView(fences={folder: upper}, hidden=[], start={folder: ["kept (folder)"]})
    assert view.written() == []
    (upper / "containers").mkdir()
    (upper / "containers" / "a.log").symlink_to("/nowhere")
    (upper / "kept").rmdir()
    assert view.written() == [
        "/var/log/containers (folder)",
        "/var/log/containers/a.log (link)",
        "/var/log/kept (folder)",
    ]
