"""The admission webhook: a TalosCluster or TalosOperation write, judged by the rules.

A write travels down the modules in this order: ``server`` (the HTTPS endpoint the API
server calls, and the fixed webhook configurations) hands a review to kopf only when
``intake`` (pure: the paths, what each claims, the size limits) says it may; kopf calls
the thin handlers of ``handlers`` (registered by ``wiring``, kopf registration only,
which also keeps the API backend in kopf's memo); each asks ``judgement`` (one judgement
per write for both halves), which reads the review (``reviews``, pure), asks
``decisions`` (pure: the rules of ``ichor.release``/``ichor.upgrade``, and the answer)
and ``stamps`` (pure: the admission records an admitted object must carry), and makes
the reads the answer depends on through ``kubeapi`` (I/O: who the operator is, the
cluster an operation names, a cluster's operations, the SubjectAccessReview, whose
answers ``access_cache`` keeps a few seconds). Nothing here writes to the API.

Its certificate comes from cert-manager or the chart; the tests and the demo make a
throwaway one with ``tests.harness.certs``.
"""
