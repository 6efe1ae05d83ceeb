"""kopf admission handlers: the admission rule and the plan, with the override verb.

``reviews`` reads an AdmissionReview into small values; ``admission`` decides with the
rules of ``ichor.release``/``ichor.upgrade`` (pure); ``stamps`` computes the admission
records and stamp an admitted object must carry (pure); ``kubeapi`` makes the reads
(who the operator is, the cluster an operation names, a cluster's operations, the
SubjectAccessReview) and writes nothing; ``validating`` holds the thin kopf handlers of
both halves (mutating: write the stamp; validating: answer and check it) and registers
them (``register``); ``intake`` says what each path claims; ``server`` is the HTTPS
endpoint and the fixed webhook configurations. Its certificate comes from cert-manager
or the chart; the tests and the demo make a throwaway one with ``tests.harness.certs``.
"""
