"""Speed and memory figures, one module per part (``make bench`` runs them all).

A bench module exposes ``run() -> list[str]``: it measures in one run and returns the
lines to print (figures, the goal they answer, and the ratio to the reference they are
compared with). ``tests/bench.py`` finds every module here that has ``run``; a module
whose real component is not built raises ``MissingBinaryError`` (or prints the reason in
its lines) and the others still run. Benches show speed; they never assert it.
"""
