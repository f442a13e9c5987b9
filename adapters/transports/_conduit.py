"""A connection's bytes as every dialect reads and writes them: the :class:`Conduit`
(stdio, TCP, TLS, Unix), its :class:`Lines`, and a refusal's careful close.

Bytes in, lines out; nothing here knows which dialect those lines are in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

from ._framing import Item, LineReader, LineTooLong, is_blank

READ_CHUNK = 64 * 1024


class Conduit(Protocol):
    """A bidirectional byte stream, as the dialect needs it."""

    async def read(self) -> bytes:
        """Up to 64 KiB as it arrives; ``b""`` at end of input (or when the peer is gone)."""
        ...

    def write(self, data: bytes) -> None: ...

    def write_eof(self) -> None:
        """Half-close: no more writes, reading goes on (a no-op where unsupported)."""
        ...

    def pending(self) -> int:
        """Bytes written but not yet handed to the operating system."""
        ...

    async def drain(self) -> None:
        """Wait while the write buffer is above its high-water mark; raises if the peer is gone."""
        ...

    async def close(self, flush_timeout: float | None) -> None:
        """Flush everything written, then close (abort after ``flush_timeout`` seconds)."""
        ...

    def abort(self) -> None:
        """Close at once, dropping anything unsent."""
        ...


class Lines:
    """The lines of a conduit, one at a time, through a bounded :class:`LineReader`.

    Lines are ``limit`` bytes at most, except those ``admit`` takes, which may be
    up to ``wide`` bytes (a dialect's few messages that carry a payload of a known
    larger bound): the reader holds up to ``wide`` bytes, and a longer line that
    ``admit`` refuses is a :class:`LineTooLong` of ``limit``.
    """

    def __init__(
        self,
        conduit: Conduit,
        limit: int,
        *,
        wide: int = 0,
        admit: Callable[[bytes], bool] | None = None,
    ) -> None:
        self._conduit = conduit
        self._limit = limit
        self._admit = admit if wide > limit else None
        self._reader = LineReader(wide if self._admit is not None else limit)
        self._pending: list[Item] = []
        self._eof = False

    async def next(self) -> Item | None:
        """The next line or over-long marker; None at end of input."""
        while not self._pending:
            if self._eof:
                return None
            data = await self._conduit.read()
            if data:
                self._pending = self._reader.feed(data)
            else:
                self._eof = True
                self._pending = self._reader.finish()
            self._pending.reverse()
        item = self._pending.pop()
        if self._admit is not None and (
            isinstance(item, LineTooLong) or (len(item) > self._limit and not self._admit(item))
        ):
            return LineTooLong(self._limit)
        return item

    async def next_nonblank(self) -> Item | None:
        while True:
            item = await self.next()
            if item is None or isinstance(item, LineTooLong) or not is_blank(item):
                return item


REFUSAL_LINGER = 2.0
"""After a refusal, how long the client's further input is read and discarded."""


async def send_and_close(conduit: Conduit, data: bytes, flush_timeout: float | None) -> None:
    """Write ``data`` (a refusal, in any dialect) and close so that the client surely reads it.

    Closing a socket whose input was not read makes the kernel send a reset,
    which can destroy the line before the client reads it. So the server
    half-closes, then reads and discards what the client still sends (its
    hello, pipelined submissions) until it closes too, or for a moment.
    """
    if data:
        conduit.write(data)
    conduit.write_eof()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(REFUSAL_LINGER):
            while await conduit.read():
                pass
    await conduit.close(flush_timeout)
