"""A JSON-RPC connection's outgoing lines: the bounded :class:`Outbox` its writer drains."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable


class ConnectionClosed(Exception):
    """The connection ended before the peer answered our request."""


class Outbox:
    """Lines waiting for the writer, bounded in bytes (one line is always let in)."""

    def __init__(self, limit: int, direct: Callable[[bytes], bool] | None = None) -> None:
        """``direct(data)``: hand ``data`` to the transport now, or return False (it is
        queued); called only while the writer is idle and nothing is queued."""
        self._lines: collections.deque[bytes] = collections.deque()
        self._bytes = 0
        self._limit = limit
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._direct = direct
        self._idle = False  # the writer waits in take(): its last write was drained
        self._held = 0  # see held()
        self.closed = False

    async def put(self, data: bytes) -> None:
        """Queue ``data``, waiting while the outbox is full; dropped once it is closed.

        With nothing queued and the writer idle, ``data`` goes straight to ``direct``:
        waking the writer task costs an event-loop iteration on every answer's path."""
        direct = self._direct
        idle = self._idle and not self._lines and not self.closed and not self._held
        if idle and direct and direct(data):
            return
        while self._bytes and self._bytes + len(data) > self._limit and not self.closed:
            self._room.clear()
            self._ready.set()  # held lines too must make room
            await self._room.wait()
        if self.closed:
            return
        self._lines.append(data)
        self._bytes += len(data)
        if not self._held:
            self._ready.set()

    def held(self) -> contextlib.AbstractContextManager[None]:
        """Lines put meanwhile leave together, in one write where the transport is idle
        (a system call less for an answer and what follows it at once)."""
        return _Held(self)

    def _unhold(self) -> None:
        self._held -= 1
        if not self._held and self._lines:
            self._release()

    def hold(self) -> Callable[[], None]:
        """Hold lines as :meth:`held` does, until the returned function is called (once;
        later calls do nothing). That call sends everything queued at once, even while
        other holds last: what waited for a line must not wait for more."""
        self._held += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._held -= 1
            if self._lines:
                self._release()

        return release

    def _release(self) -> None:
        direct = self._direct
        if self._idle and not self.closed and direct is not None and direct(b"".join(self._lines)):
            self._lines.clear()
            self._bytes = 0
            self._room.set()
            return
        self._ready.set()

    async def take(self) -> list[bytes]:
        """Everything queued (waits for some); ``[]`` once closed and empty."""
        while not self._lines and not self.closed:
            self._ready.clear()
            self._idle = True
            try:
                await self._ready.wait()
            finally:
                self._idle = False
        lines = list(self._lines)
        self._lines.clear()
        self._bytes = 0
        self._room.set()
        return lines

    def close(self) -> None:
        """No more lines: the writer ends once what is queued is written."""
        self.closed = True
        self._ready.set()
        self._room.set()


class _Held:
    """:meth:`Outbox.held` (a class: a generator-based context manager costs a few
    microseconds on every answer's and every event batch's path)."""

    __slots__ = ("_outbox",)

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox

    def __enter__(self) -> None:
        self._outbox._held += 1

    def __exit__(self, *exc_info: object) -> None:
        self._outbox._unhold()
