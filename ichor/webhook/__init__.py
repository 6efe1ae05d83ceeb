"""kopf validating handlers: the admission rule and the plan, with the override verb.

``reviews`` reads an AdmissionReview into small values; ``admission`` decides with the
rules of ``ichor.release``/``ichor.upgrade`` (pure); ``kubeapi`` makes the three API
calls (the cluster an operation names, the SubjectAccessReview, the Override Event);
``validating`` holds the thin kopf handlers; ``handlers`` registers them on import;
``server`` is the HTTPS endpoint and the fixed ValidatingWebhookConfiguration. Its
certificate comes from cert-manager or the chart; the tests and the demo make a
throwaway one with ``ichor.testing.certs``.
"""
