"""The bounds of one tag listing (pure: the settings and the lister share it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """The bounds of one listing. The defaults fit ghcr.io's largest Talos repositories
    (about a thousand tags) with a hundred times headroom."""

    page_size: int = 1000
    total_timeout: float = 60.0
    request_timeout: float = 20.0
    max_pages: int = 500
    max_tags: int = 100_000
    max_body_bytes: int = 4 * 1024 * 1024
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
