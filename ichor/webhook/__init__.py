"""The admission webhook: a TalosCluster or TalosOperation write, judged by the rules.

A write travels down: ``server`` (the HTTPS endpoint) hands a review to kopf only when
``intake`` says it may; kopf calls ``handlers`` (registered by ``wiring``); each asks
``judgement``, which reads the review (``reviews``), asks ``decisions`` and ``stamps``
(pure), and reads what the answer depends on through ``kubeapi`` (answers of the
SubjectAccessReview kept a few seconds by ``access_cache``). Nothing here writes to the
API.

More in docs/design/notes.md, "ichor/webhook/__init__.py".
"""
