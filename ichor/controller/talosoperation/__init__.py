"""The TalosOperation controller: a TalosOperation becomes a Job, the Job's end its status.

``wiring`` registers it with kopf (registration only). Pure: ``lifecycle`` (which
operation runs, may it run, the status each step writes), ``jobs`` (the Job manifests)
and ``starts`` (an operation the controller itself decides to start). I/O: ``executor``
(reads the objects, creates the Job, writes the status) and ``starter`` (creates a
started operation).
"""
