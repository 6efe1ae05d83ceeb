"""Ichor: keeps Talos Linux clusters current, one component at a time.

Layers import only downward (checked by import-linter in ``make test``)::

    testing > operator > cli | controller | webhook > kube > api | registry > upgrade > release

``release`` and ``upgrade`` are the pure rules: no I/O, no Kubernetes client.
Every path (webhook, plan, executors, CLI, adopt, choices) calls them.
"""
