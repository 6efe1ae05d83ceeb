"""Small helpers shared by the controller, webhook and CLI for talking to the Kubernetes API."""
