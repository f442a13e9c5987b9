"""Many Redis streams read over one blocking connection.

A gateway follows the event streams of its sessions, a worker the submission
streams of the sessions it owns: one ``XREAD BLOCK`` over all of them, not a
connection each. A stream added while the read blocks is taken in at once: the
read is ended with ``CLIENT UNBLOCK`` from a second connection and issued again
with the new key.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from codexcore._logging import get_logger

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = get_logger(__name__)

Entries = list[tuple[bytes, dict[bytes, bytes]]]
Handler = Callable[[Entries], None]

BLOCK_MS = 10_000
COUNT = 512
RETRY_DELAY = 0.2


class StreamReader:
    """Calls each stream's handler with its new entries, in order, at most once each.

    ``reader`` must be a client of its own (one connection: it blocks);
    ``control`` is any other client of the same server.
    """

    def __init__(self, reader: Redis, control: Redis) -> None:
        self._reader = reader
        self._control = control
        self._cursors: dict[bytes, bytes] = {}
        self._handlers: dict[bytes, Handler] = {}
        self._asked: frozenset[bytes] = frozenset()  # the keys of the read in progress
        self._client_id: int | None = None
        self._blocked = False
        self._changed = asyncio.Event()
        self._kicks: set[asyncio.Task[None]] = set()
        self._rewound: set[bytes] = set()  # keys rewound while the read was out

    def add(self, key: str, after: bytes | str, handler: Handler) -> None:
        """Follow ``key`` from the entry after ``after`` (``0-0``: from the start)."""
        name = key.encode()
        self._cursors[name] = after if isinstance(after, bytes) else after.encode()
        self._handlers[name] = handler
        self._changed.set()
        self._start_kick(force=False)

    def rewind(self, key: str, after: bytes, handler: Handler) -> None:
        """Follow ``key`` again from the entry after ``after``, if ``handler`` still
        follows it: entries taken out of the stream (a forged one, far ahead) left the
        cursor past where the stream's writer goes on."""
        name = key.encode()
        if name not in self._cursors or self._handlers.get(name) != handler:
            return
        self._cursors[name] = after
        self._rewound.add(name)
        self._start_kick(force=True)

    def _start_kick(self, *, force: bool) -> None:
        if self._blocked:
            kick = asyncio.create_task(self._kick(force=force))
            self._kicks.add(kick)
            kick.add_done_callback(self._kicks.discard)

    def remove(self, key: str) -> None:
        name = key.encode()
        self._cursors.pop(name, None)
        self._handlers.pop(name, None)

    async def _kick(self, *, force: bool) -> None:
        """End the blocked read so it is issued again with every key (``force``: even
        when it has them all, for a cursor that moved back)."""
        for _ in range(100):
            if not self._blocked or (not force and set(self._cursors) <= self._asked):
                return
            client_id = self._client_id
            with contextlib.suppress(Exception):
                if client_id is not None and await self._control.client_unblock(client_id):
                    return
            # Not blocked yet on the server (the command is still on its way): again.
            await asyncio.sleep(0.002)

    async def run(self) -> None:
        """Read until cancelled; a lost connection is retried (entries are not lost:
        the cursors only move past what was handed over)."""
        try:
            while True:
                if not self._cursors:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                result = await self._read_once()
                for key, entries in result:
                    if key not in self._rewound:  # else read from the old cursor
                        self._deliver(key, entries)
        finally:
            for kick in tuple(self._kicks):
                kick.cancel()

    async def _read_once(self) -> list[Any]:
        try:
            if self._client_id is None:
                self._client_id = int(await self._reader.client_id())
            streams = dict(self._cursors)
            self._asked = frozenset(streams)
            self._rewound.clear()
            self._blocked = True
            try:
                result = await self._reader.xread(streams, count=COUNT, block=BLOCK_MS)  # type: ignore[arg-type]
            finally:
                self._blocked = False
        except (RedisError, OSError) as exc:
            # CLIENT UNBLOCK ends the read with no entries, not an error: this is
            # a lost connection (a Redis restart): reconnect, ask again.
            self._client_id = None
            log.warning("redis read failed; retrying", error=str(exc))
            await asyncio.sleep(RETRY_DELAY)
            return []
        return list(result or [])

    def _deliver(self, key: bytes, entries: Entries) -> None:
        handler = self._handlers.get(key)
        if handler is None or not entries:
            return  # removed meanwhile
        self._cursors[key] = entries[-1][0]
        try:
            handler(entries)
        except Exception:
            log.exception("stream handler failed", stream=key.decode(errors="replace"))
