"""Remembering accepted submission ids, so a resent submission is not run twice."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class SeenIds:
    """Ids accepted within the last ``ttl`` seconds.

    Entries expire in arrival order, so the table is bounded by the rate of
    submissions times the TTL, and pruning costs nothing per lookup beyond
    the expired entries it removes.
    """

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def accept(self, sub_id: str) -> bool:
        """Record ``sub_id``; False when it was already accepted within the TTL."""
        now = self._clock()
        self._prune(now)
        if sub_id in self._seen:
            return False
        self._seen[sub_id] = now
        return True

    def __len__(self) -> int:
        return len(self._seen)

    def _prune(self, now: float) -> None:
        horizon = now - self._ttl
        while self._seen:
            oldest, seen_at = next(iter(self._seen.items()))
            if seen_at > horizon:
                return
            del self._seen[oldest]
