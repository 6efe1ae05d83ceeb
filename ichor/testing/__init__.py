"""Real local components for tests and the demo: kube-apiserver, etcd, an OCI registry.

Never imported by the operator itself.
"""
