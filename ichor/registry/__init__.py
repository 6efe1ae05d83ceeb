"""Async OCI tag lister (distribution API, anonymous bearer tokens, every page)."""
