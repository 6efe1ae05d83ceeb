"""The TalosCluster controller: observe each workload cluster and write its status.

``wiring`` registers it with kopf (registration only). Pure: ``status`` (the status and
Events from spec, observation and release lists; the observation is
``ichor.controller.observe``). I/O: ``reconciler`` (reads the workload clusters, writes
the status, posts the Events).
"""
