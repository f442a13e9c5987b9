"""What waits for a client's UI: the events and notices received, in order, and how
their stream ended.

A bounded queue between the client's reader and the UI (``event_buffer`` items): a
UI that stops reading stops the reader, so the client stops reading its connection
and the server sees the backpressure. It is read from the event loop
(``next_event``) or from another thread (:class:`~codexcore.adapters.client.RemoteCodexThread`);
notices are handed to ``on_notice`` by whoever reads, in order with the events.
"""

from __future__ import annotations

import contextlib
import queue
import time

import janus

from codexcore._logging import get_logger
from codexcore.engine import EngineClosed
from codexcore.protocol import Event

from ._types import Notice, NoticeCallback, RemoteError

log = get_logger("codexcore.adapters.client")  # the public module's name, as before the split


class Inbox:
    """At most ``size`` events and notices for the UI; ``on_notice`` takes the notices
    (without it they are logged)."""

    def __init__(self, size: int, on_notice: NoticeCallback | None) -> None:
        self._size = size
        self._on_notice = on_notice
        self._queue: janus.Queue[Event | Notice] | None = None
        self._discarding = False
        self.failure: RemoteError | None = None
        """The error that ended the client, raised once what came before it is read."""

    def open(self) -> None:
        """Make the queue, on the running loop (once connected)."""
        self._queue = janus.Queue(self._size)

    def queue(self) -> janus.Queue[Event | Notice]:
        if self._queue is None:
            raise RuntimeError("not connected yet: await the constructor first")
        return self._queue

    def end_error(self) -> Exception:
        """What reading past the end raises: the client's failure, or EngineClosed."""
        if self.failure is not None:
            return self.failure
        return EngineClosed("the event stream has ended")

    async def put(self, item: Event | Notice) -> None:
        """Queue ``item``, waiting while the queue is full; nothing once it has ended."""
        if self._discarding:
            return
        with contextlib.suppress(janus.AsyncQueueShutDown):
            await self.queue().async_q.put(item)

    async def get(self) -> Event:
        """The next event, notices before it handed over; :meth:`end_error` at the end."""
        q = self.queue()
        while True:
            try:
                item = await q.async_q.get()
            except janus.AsyncQueueShutDown:
                raise self.end_error() from None
            if isinstance(item, Event):
                return item
            self._deliver_notice(item)

    def get_blocking(self, timeout: float | None) -> Event:
        """:meth:`get` for another thread, waiting at most ``timeout`` seconds."""
        q = self.queue()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = q.sync_q.get(timeout=remaining)
            except janus.SyncQueueShutDown:
                raise self.end_error() from None
            except queue.Empty:
                raise TimeoutError(f"no event within {timeout} s") from None
            if isinstance(item, Event):
                return item
            self._deliver_notice(item)

    def _deliver_notice(self, notice: Notice) -> None:
        if self._on_notice is None:
            log.info("connection notice", notice=repr(notice))
            return
        try:
            self._on_notice(notice)
        except Exception:  # one broken callback must not stop the stream
            log.exception("on_notice callback failed", notice=repr(notice))

    def end(self, failure: RemoteError | None) -> None:
        """No more items: what is queued is still read, then :meth:`end_error` (the
        first ``failure`` given is the one kept)."""
        if failure is not None and self.failure is None:
            self.failure = failure  # before the shutdown: a reader on a thread wakes to it
        if self._queue is not None:
            self._queue.shutdown()

    def discard(self) -> None:
        """From now on nobody reads: drop what is queued, and queue nothing more."""
        self._discarding = True
        if self._queue is None:
            return
        with contextlib.suppress(janus.AsyncQueueEmpty, janus.AsyncQueueShutDown):
            while True:
                self._queue.async_q.get_nowait()

    async def close(self) -> None:
        """Drop what is left and wait until the queue has shut down on both sides."""
        if self._queue is not None:
            self._queue.shutdown(immediate=True)
            await self._queue.wait_closed()
