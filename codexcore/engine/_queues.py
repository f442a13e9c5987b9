"""A bounded queue for one event loop, shaped like the asyncio side of a janus queue.

The engine's queue pair is janus by default, so that a UI on another thread
can use it. A consumer on the engine's own loop (a session host's pump) pays
for janus's thread locks and cross-thread wake-ups on every event for
nothing: about 3.5 us a put-and-get here, against 1 us for this queue. An
engine made with ``threadsafe=False`` uses :class:`LoopQueue` instead, and its
callers see the same methods and the same ``janus.AsyncQueueShutDown``.

Shutdown follows janus (and Python 3.13's ``asyncio.Queue.shutdown``): puts
fail from then on; gets drain what is queued, then fail; ``immediate`` also
drops what is queued. Waiting putters and getters are woken to fail.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Generic, TypeVar

import janus

T = TypeVar("T")


class LoopQueue(Generic[T]):
    """A bounded FIFO for coroutines of one event loop (not thread-safe)."""

    __slots__ = ("_getters", "_items", "_joined", "_maxsize", "_putters", "_shut", "_unfinished")

    def __init__(self, maxsize: int = 0) -> None:
        self._maxsize = maxsize
        self._items: collections.deque[T] = collections.deque()
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._putters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shut = False
        self._unfinished = 0
        self._joined: asyncio.Event | None = None

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @property
    def closed(self) -> bool:
        return self._shut

    @property
    def unfinished_tasks(self) -> int:
        return self._unfinished

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return 0 < self._maxsize <= len(self._items)

    # --- putting ------------------------------------------------------------------

    def put_nowait(self, item: T) -> None:
        if self._shut:
            raise janus.AsyncQueueShutDown
        if self.full():
            raise janus.AsyncQueueFull
        self._items.append(item)
        self._unfinished += 1
        if self._getters:
            _wake_one(self._getters)

    async def put(self, item: T) -> None:
        while self.full() and not self._shut:
            await _wait_in(self._putters)
        self.put_nowait(item)

    # --- getting ------------------------------------------------------------------

    def get_nowait(self) -> T:
        if not self._items:
            raise janus.AsyncQueueShutDown if self._shut else janus.AsyncQueueEmpty
        item = self._items.popleft()
        if self._putters:
            _wake_one(self._putters)
        return item

    async def get(self) -> T:
        while not self._items and not self._shut:
            await _wait_in(self._getters)
        return self.get_nowait()

    # --- joining and shutting down ---------------------------------------------------

    def task_done(self) -> None:
        if self._unfinished <= 0:
            raise ValueError("task_done() called too many times")
        self._unfinished -= 1
        if self._unfinished == 0 and self._joined is not None:
            self._joined.set()

    async def join(self) -> None:
        while self._unfinished:
            if self._joined is None or self._joined.is_set():
                self._joined = asyncio.Event()
            await self._joined.wait()

    def shutdown(self, immediate: bool = False) -> None:
        """Refuse puts from now on; with ``immediate``, drop what is queued too."""
        self._shut = True
        if immediate:
            while self._items:
                self._items.popleft()
                self.task_done()
        for waiters in (self._getters, self._putters):
            while waiters:
                waiter = waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)


def _wake_one(waiters: collections.deque[asyncio.Future[None]]) -> None:
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return


async def _wait_in(waiters: collections.deque[asyncio.Future[None]]) -> None:
    """Wait to be woken; a cancelled waiter passes its wake-up on, so none is lost."""
    waiter = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        await waiter
    except asyncio.CancelledError:
        if waiter.done() and not waiter.cancelled():
            _wake_one(waiters)  # it was woken as it was cancelled: wake the next one
        else:
            waiter.cancel()
        raise
