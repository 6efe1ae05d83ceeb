"""Importing this module registers the webhook's kopf handlers in kopf's default registry.

The operator's entry point imports it and then calls ``ichor.webhook.server.configure``
for the server. Tests import ``ichor.webhook.validating`` instead and register the same
handlers into a registry of their own, so no other kopf run in the process inherits them.
"""

from __future__ import annotations

import kopf

from ichor.webhook import validating

validating.register(kopf.get_default_registry())
