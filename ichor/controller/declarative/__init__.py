"""Declarative upgrades: a TalosCluster with ``spec.upgradeStrategy: Declarative`` is
moved to its spec by operations the controller starts itself (``decisions``: pure;
``starting``: the one API call, through ``talosoperation.creating``)."""
