"""Why a tag listing failed, as a small hierarchy the release check maps to one status line.

Every error names the repository and the cause in one sentence a person can act on
(``cannot list tags of ghcr.io/siderolabs/kubelet: the registry is unreachable (...)``),
and carries a ``Cause`` so callers can branch without reading the text. They never hold a
token, a password or a response body beyond a short excerpt of the registry's own error.
"""

from __future__ import annotations

from enum import StrEnum


class Cause(StrEnum):
    INVALID_REFERENCE = "InvalidReference"
    UNREACHABLE = "Unreachable"
    TIMED_OUT = "TimedOut"
    NOT_FOUND = "NotFound"
    REFUSED = "Refused"
    FAILING = "RegistryFailing"
    GARBAGE = "GarbageResponse"
    TOO_MANY = "TooManyTags"


class ListingError(Exception):
    """A tag listing that did not finish; ``str()`` is the sentence for a person."""

    cause: Cause = Cause.GARBAGE

    def __init__(self, repository: str, detail: str) -> None:
        self.repository = repository
        self.detail = detail
        super().__init__(f"cannot list tags of {repository}: {detail}")


class InvalidReference(ListingError, ValueError):
    """The reference itself is unusable (no host, a tag in it, plain HTTP off loopback)."""

    cause = Cause.INVALID_REFERENCE


class RegistryUnreachable(ListingError):
    """No HTTP answer at all: connection refused, DNS, TLS, connection dropped."""

    cause = Cause.UNREACHABLE


class ListingTimedOut(RegistryUnreachable):
    """The listing's total time bound ran out (slow answers, or waiting out retries)."""

    cause = Cause.TIMED_OUT


class RepositoryNotFound(ListingError):
    """404: the repository does not exist on that registry (never retried)."""

    cause = Cause.NOT_FOUND


class AccessRefused(ListingError):
    """401/403 after the token dance, or the token realm refused us (never retried)."""

    cause = Cause.REFUSED


class RegistryFailing(ListingError):
    """429 or 5xx still answered after the retries, or a Retry-After beyond the bound."""

    cause = Cause.FAILING


class GarbageResponse(ListingError):
    """An answer that is not a tag list: not JSON, wrong shape, truncated, too large, a
    Link that loops or leaves the registry."""

    cause = Cause.GARBAGE


class TooManyTags(ListingError):
    """More tags or pages than the listing's cap: a runaway list is cut, not kept."""

    cause = Cause.TOO_MANY
