"""Small Kubernetes helpers shared by the controller, the webhook and the CLI.

Generic on purpose: they know the API's conventions (conditions, Events, merge patches,
kubeconfig Secrets), not Ichor's rules. Nothing here decides anything about versions.
"""
