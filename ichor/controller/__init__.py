"""The controllers, one package per kind of behaviour, each with its kopf registration
(``wiring``), its pure decisions and its I/O apart: ``taloscluster`` (status of each
TalosCluster), ``talosoperation`` (a TalosOperation to its Job to its status),
``releasecheck`` (the registry to the IchorInstallation status), ``recorder`` (admitted
overrides to Events) and ``autopatch``. Shared: ``queue`` (the work queue) and ``observe``
(what a workload cluster's Nodes and CNI say, pure; the TalosCluster controller and the
executor both read it). ``ichor.operator`` wires them explicitly."""
