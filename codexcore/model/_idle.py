"""One timer for "no data for ``limit`` seconds", shared by the model client and its transport.

A fresh ``asyncio.timeout`` around every wait for a streamed chunk cost 4-8 us
each, the model client's largest overhead. An :class:`IdleTimer` keeps one
loop timer per stream: a wait that begins records when; the timer is armed by
a wait and re-armed only when it fires (or when a wait needs it sooner, after
``limit`` was lowered), so a stream of chunks costs two attribute writes each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class IdleTimer:
    """Calls ``expire`` once a wait (``begin()`` … ``end()``) has lasted ``limit`` seconds.

    Only time spent waiting counts, so a slow consumer between waits never
    trips it. ``limit`` may change between waits; ``fired`` tells that it
    expired (it stays quiet afterwards). ``close()`` cancels the timer.
    """

    __slots__ = ("_due", "_expire", "_handle", "_waiting_since", "fired", "limit")

    def __init__(self, limit: float, expire: Callable[[], None]) -> None:
        self.limit = limit
        self.fired = False
        self._expire = expire
        self._waiting_since: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def begin(self) -> None:
        loop = asyncio.get_running_loop()
        self._waiting_since = now = loop.time()
        due = now + self.limit
        if self.fired or (self._handle is not None and self._due <= due):
            return  # the timer already set checks in time (the common case)
        self._arm(loop, due)

    def end(self) -> None:
        self._waiting_since = None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        self.close()
        self._due = due
        self._handle = loop.call_at(due, self._check)

    def _check(self) -> None:
        self._handle = None
        since = self._waiting_since
        if since is None:
            return  # not waiting: the next wait arms it again
        loop = asyncio.get_running_loop()
        if loop.time() - since >= self.limit:
            self.fired = True
            self._expire()
        else:
            self._arm(loop, since + self.limit)
