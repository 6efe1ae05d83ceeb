"""Async OCI tag lister (distribution API, anonymous bearer tokens, every page).

``await lister.list_tags("ghcr.io/siderolabs/installer-base")`` returns every tag as the
registry lists it, or raises a ``ListingError`` naming the repository and the cause.

The names below are imported when first used (PEP 562), so a program that needs only
``ichor.registry.limits`` (the settings, the ``ichor`` command) does not load aiohttp.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ichor.registry.errors import (
        AccessRefused,
        Cause,
        GarbageResponse,
        InvalidReference,
        ListingError,
        ListingTimedOut,
        RegistryFailing,
        RegistryUnreachable,
        RepositoryNotFound,
        TooManyTags,
    )
    from ichor.registry.limits import Limits
    from ichor.registry.lister import (
        Credentials,
        TagLister,
        credentials_from_docker_config,
        list_tags,
    )
    from ichor.registry.references import Repository, parse

#: Where each public name lives.
_HOMES = {
    "AccessRefused": "errors",
    "Cause": "errors",
    "GarbageResponse": "errors",
    "InvalidReference": "errors",
    "ListingError": "errors",
    "ListingTimedOut": "errors",
    "RegistryFailing": "errors",
    "RegistryUnreachable": "errors",
    "RepositoryNotFound": "errors",
    "TooManyTags": "errors",
    "Limits": "limits",
    "Credentials": "lister",
    "TagLister": "lister",
    "credentials_from_docker_config": "lister",
    "list_tags": "lister",
    "Repository": "references",
    "parse": "references",
}

__all__ = [
    "AccessRefused",
    "Cause",
    "Credentials",
    "GarbageResponse",
    "InvalidReference",
    "Limits",
    "ListingError",
    "ListingTimedOut",
    "RegistryFailing",
    "RegistryUnreachable",
    "Repository",
    "RepositoryNotFound",
    "TagLister",
    "TooManyTags",
    "credentials_from_docker_config",
    "list_tags",
    "parse",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
