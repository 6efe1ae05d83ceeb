"""Ichor: keeps Talos Linux clusters current, one component at a time.

Layers import only downward (checked by import-linter in ``make check``)::

    operator > cli | controller | webhook > kube > settings > api | registry > upgrade > release

``release`` and ``upgrade`` are the pure rules: no I/O, no Kubernetes client.
Every path (webhook, plan, executors, CLI, adopt, choices) calls them.
"""
