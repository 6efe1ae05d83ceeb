"""The TalosOperation controller: a TalosOperation becomes a Job, the Job's end its status.

``wiring`` registers it with kopf (registration only). Pure: ``lifecycle`` (which
operation runs, may it run, the status each step writes), ``jobs`` (the Job manifests)
and ``start_request`` (an operation the controller itself decides to start, as a
manifest). I/O: ``executor`` (reads the objects, creates the Job, writes the status) and
``creating`` (creates such an operation, or finds the one an earlier run created).
"""
