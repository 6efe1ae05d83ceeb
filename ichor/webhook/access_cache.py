"""A short, bounded memory of SubjectAccessReview answers.

A burst of writes by one user (a script adopting a hundred clusters, a controller
retrying) would otherwise send the API server one SubjectAccessReview per review. An
answer is kept for ``ttl`` seconds under everything the review was built from: the
requester exactly as the API server authenticated them (user name, uid, groups, extra),
the verb and the cluster (namespace and name, since RBAC may grant by resource name).
So a cached answer never serves another user, another uid of the same name, another
set of groups or another cluster, and never outlives ``ttl``: a verb revoked is refused
at most ``ttl`` seconds later (the API server's own webhook authorizer keeps its allowed
answers five minutes by default). At most ``size`` answers are kept; the oldest go first.
Pure: the clock is given.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from ichor.webhook.reviews import NamespacedName, Requester

#: Seconds an answer is kept.
TTL_SECONDS = 5.0
#: Answers kept at most.
SIZE = 1024

Key = tuple[Requester, str, NamespacedName]


class AccessCache:
    def __init__(
        self,
        *,
        ttl: float = TTL_SECONDS,
        size: int = SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl < 0 or size < 0:
            raise ValueError(f"ttl and size must not be negative (ttl={ttl}, size={size})")
        self.ttl = ttl
        self.size = size
        self._clock = clock
        self._answers: OrderedDict[Key, tuple[float, bool]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, requester: Requester, *, verb: str, ref: NamespacedName) -> bool | None:
        """The answer kept for exactly this requester, verb and cluster, or None."""
        key = (requester, verb, ref)
        found = self._answers.get(key)
        if found is None:
            return None
        expires, allowed = found
        if self._clock() >= expires:
            del self._answers[key]
            return None
        return allowed

    def put(self, requester: Requester, *, verb: str, ref: NamespacedName, allowed: bool) -> None:
        """Keep an answer the API server gave just now."""
        if not self.size or not self.ttl:
            return
        key = (requester, verb, ref)
        self._answers.pop(key, None)
        self._answers[key] = (self._clock() + self.ttl, allowed)
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)
