"""Typed shapes of Ichor's Kubernetes API (group ``ichor.dev``, version ``v1alpha1``).

The CRDs in ``crds/`` are the source of truth for what the API server accepts; the models
here mirror them field for field (a unit test keeps the two in step) so the controller,
the webhook and the CLI read and write the same names. The models hold the raw strings the
API stores and never judge a version: the rules in ``ichor.release``/``ichor.upgrade`` do.
"""
