"""Real local components for the tests and the demo: kube-apiserver and etcd, an OCI
registry with its token server, a fault proxy, certificates, the node; never shipped in
the wheel and never imported by ``ichor``."""
