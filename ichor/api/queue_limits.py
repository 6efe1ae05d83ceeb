"""How many operations one TalosCluster queues: a plain constant, no model.

Apart from ``ichor.api.talosoperation`` so that the settings, and the ``ichor`` command
that reads its own settings, need not load the API models to know it.
"""

from __future__ import annotations

#: Operations of one TalosCluster not finished yet past which another is refused (the
#: default of ``ICHOR_MAX_QUEUED_OPERATIONS``).
MAX_QUEUED = 20
