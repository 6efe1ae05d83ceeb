"""The node refuses a work folder its own mount namespace would hide.

In the node's mount namespace ``/var/log`` is the work folder's ``var-log``
(tests/harness/node.py, tests/harness/mountns.py): a work folder under ``/var/log`` would
vanish for the node's own parts, so it is refused before anything is made.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import node


@pytest.mark.parametrize("workdir", ["/var/log", "/var/log/ichor-node", "/var/log/../log/a"])
def test_a_work_folder_under_var_log_is_refused(workdir: str) -> None:
    with pytest.raises(node.NodeError, match="under /var/log"):
        node.Node(workdir=Path(workdir), registry_port=1)


def test_a_link_into_var_log_is_followed(tmp_path: Path) -> None:
    (tmp_path / "logs").symlink_to("/var/log")
    with pytest.raises(node.NodeError, match="choose one elsewhere"):
        node.Node(workdir=tmp_path / "logs" / "node", registry_port=1)
    assert not Path("/var/log/node").exists()


def test_a_work_folder_beside_it_is_taken(tmp_path: Path) -> None:
    assert node.Node(workdir=tmp_path / "var" / "log", registry_port=1).workdir.name == "log"
    assert not (tmp_path / "var").exists(), "nothing is made before the start"
