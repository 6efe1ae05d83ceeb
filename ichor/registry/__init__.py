"""Async OCI tag lister (distribution API, anonymous bearer tokens, every page).

``await lister.list_tags("ghcr.io/siderolabs/installer-base")`` returns every tag as the
registry lists it, or raises a ``ListingError`` naming the repository and the cause.
"""

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
