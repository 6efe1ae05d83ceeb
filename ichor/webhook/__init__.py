"""kopf validating handlers: the admission rule and the plan, with the override verb."""
