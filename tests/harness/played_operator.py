"""The operator of ``ICHOR_DEMO_JOBS=played``: ``ichor.operator`` with its read Jobs played.

On a machine without the node no kubelet runs a Pod, so no Job of the operator runs and
the demo plays each Job's outcome. A Talos operation's read and etcd check Jobs are read
back from their Pods' logs, which nothing can play through the API; this process runs the
real operator with one seam set, ``OperationController.read_output``, answered in
talosctl's format for each Job's own arguments (``tests/support/talos_reads.py``), from
what ``ICHOR_DEMO_NODE_IMAGES`` (JSON: address -> NodeImage fields) says each node runs.
The demo says so at the step. Never shipped: the image runs ``ichor.operator``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ichor import operator
from ichor.controller.talosoperation import executor
from ichor.upgrade.node_images import NodeImage
from tests.support.talos_reads import PlayedReads

IMAGES_ENV = "ICHOR_DEMO_NODE_IMAGES"


def _reads() -> PlayedReads:
    raw: dict[str, Any] = json.loads(os.environ.get(IMAGES_ENV) or "{}")
    images = {
        address: NodeImage(
            platform=str(fields["platform"]),
            secure_boot=bool(fields.get("secure_boot", False)),
            schematic=fields.get("schematic"),
            factory=fields.get("factory"),
            extensions=tuple(fields.get("extensions") or ()),
        )
        for address, fields in raw.items()
    }
    return PlayedReads(images=images)


def main() -> int:
    reads = _reads()
    constructor = executor.OperationController.__init__

    def played(self: executor.OperationController, *args: Any, **kwargs: Any) -> None:
        constructor(self, *args, **kwargs)
        self.read_output = reads.output

    executor.OperationController.__init__ = played  # type: ignore[method-assign,assignment]
    operator.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
