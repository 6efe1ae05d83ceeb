"""A short, bounded memory of SubjectAccessReview answers.

An answer is kept ``ttl`` seconds under everything its review was built from: the
requester as authenticated (name, uid, groups, extra), the verb and the cluster. So it
never serves another user or cluster, and a revoked verb is refused at most ``ttl``
seconds later. At most ``size`` answers; the oldest go first. Pure: the clock is given.

More in docs/design/notes.md, "ichor/webhook/access_cache.py".
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
