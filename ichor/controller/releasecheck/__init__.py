"""The release check: the registry's published releases into the IchorInstallation status.

``wiring`` registers it with kopf (registration only). Pure: ``decisions`` (when a check
is due, how lists merge into the status, which Events a change earns). I/O: ``check``
(the task that lists the repositories and writes the status).
"""
