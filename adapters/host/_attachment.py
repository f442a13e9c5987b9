"""One connection's view of a hosted session: its send queue, its replay cursor, its rights.

Events as they are queued
-------------------------
The pump encodes each event once, as an :class:`Out`; the session's replay
buffer and the send queue of every attached connection (an
:class:`Attachment`) hold references to those bytes, not copies.

Replay
------
An attachment starts in replay mode when its client asks for past events: its
writer then reads from the replay buffer by cursor, at the client's pace,
until the cursor reaches the newest event; at that moment (synchronously, so
nothing can slip between) it turns live and the pump starts queueing to it.
If the buffer drops an event the cursor has not reached, the client cannot
get exact events any more: it is told (``closing``, code ``lagged``) and
closed, and may reattach.

Slow connections
----------------
A live attachment's queue is bounded (``send_buffer_bytes``). When it
overflows, runs of consecutive deltas of one stream are merged into one event
that carries the ``seq`` of the last event merged (:mod:`._deltas`); if
that is not enough, deltas are dropped oldest first (each delta's content
also arrives whole in a later event: ``agent_message``, ``agent_reasoning``,
``exec_command_end``). Other events are never merged or dropped: a connection
whose queue is full of them is disconnected (``slow_consumer``), as is one
whose transport has not drained for ``stuck_timeout`` seconds (the transport
enforces that). Its session goes on; the client can reattach and replay exact
events. A lossless attachment (stdio, where there is no reattaching) instead
holds the pump, and with it the engine, until its client reads.

Control: only the controller's submissions reach the engine.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from codexcore._logging import get_logger
from codexcore.engine import EngineClosed, Rejected
from codexcore.protocol import (
    Closing,
    ConnectionMsg,
    Event,
    Submission,
)

from ._config import KiB
from ._frames import NORMAL, Frame, Out

if TYPE_CHECKING:
    from ._session import HostedSession

log = get_logger(__name__)

_ENTRY_OVERHEAD = 64  # what a queued event costs beyond its bytes, for the accounting
_NOTICE_COST = 256

Direct = Callable[[list[Frame]], bool]
"""Writes frames to an idle transport at once; False when it has bytes left unsent."""

DEFAULT_BATCH_BYTES = 64 * KiB
"""How much a transport takes from its attachment at a time."""


def _cost(item: Frame) -> int:
    return len(item.data) + _ENTRY_OVERHEAD if isinstance(item, Out) else _NOTICE_COST


class NotAccepted(Exception):
    """A submission from an attachment did not reach the engine (``code`` says why)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Attachment:
    """A connection attached to a session: its send queue, its replay cursor, its rights.

    The transport calls :meth:`take` in a loop and writes what it gets; an
    empty list means the attachment is over (then :attr:`aborted` says whether
    to drop the connection at once or to flush and close it). The dialect
    calls :meth:`submit` for each submission read and :meth:`detach` when the
    client goes away.
    """

    __slots__ = (
        "_bytes",
        "_compact_at",
        "_cursor",
        "_direct",
        "_ending",
        "_events",
        "_lossless",
        "_queue",
        "_room",
        "_wake",
        "aborted",
        "closed",
        "controller",
        "replay_complete",
        "replay_from",
        "resumed",
        "send_buffer_bytes",
        "session",
    )

    def __init__(
        self,
        session: HostedSession,
        *,
        controller: bool,
        lossless: bool,
        send_buffer_bytes: int,
        cursor: int | None,
        events: bool = False,
    ) -> None:
        self.session = session
        self.controller = controller
        self.send_buffer_bytes = send_buffer_bytes
        self.resumed = False
        self.replay_from = session.next_seq if cursor is None else cursor
        self.replay_complete = True
        self.closed = False  # no more frames will be queued
        self.aborted = False  # drop the connection without flushing
        self._lossless = lossless
        self._events = events  # live frames carry their Event (Out.event)
        self._queue: collections.deque[Frame] = collections.deque()
        self._bytes = 0
        self._compact_at = send_buffer_bytes
        self._cursor = cursor
        self._ending = False  # deliver what is queued, then finish
        self._direct: Direct | None = None  # set while an idle transport waits
        self._wake = asyncio.Event()
        self._room: asyncio.Event | None = asyncio.Event() if lossless else None

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def queued_bytes(self) -> int:
        """The accounted size of the send queue (bounded by ``send_buffer_bytes``)."""
        return self._bytes

    @property
    def replaying(self) -> bool:
        return self._cursor is not None

    # --- fed by the session ---------------------------------------------------------

    def push(self, out: Out, event: Event | None = None) -> None:
        if self.closed or self._cursor is not None:
            return  # replaying: the writer reads the replay buffer itself
        if self._events and event is not None:
            out = out.with_event(event)
        self._queue.append(out)
        self._bytes += _cost(out)
        if self._bytes > self._compact_at and not self._lossless:
            self._compact()
        if self._direct is None:  # an idle transport gets it from hand_over() instead
            self._wake.set()

    def hand_over(self) -> None:
        """Give what is queued straight to an idle transport (see :meth:`wait`)."""
        direct = self._direct
        if direct is None or self.closed or self._cursor is not None:
            return
        # All of it: a run of more than one batch (a burst read from a worker pool's
        # stream) must not wait in the queue for the next event to come.
        while self._queue:
            batch = self._collect(DEFAULT_BATCH_BYTES)
            if self._room is not None:
                self._room.set()
            if not direct(batch):
                self._direct = None  # the transport is busy now: its writer takes over
                self._wake.set()
                return

    def reply(self, data: bytes) -> None:
        """Queue a line (JSON, no newline) for this connection alone, as a control ack;
        never dropped."""
        if self.closed:
            return
        out = Out(-1, data)
        self._queue.append(out)
        self._bytes += _cost(out)
        self._wake.set()

    def notice(self, msg: ConnectionMsg) -> None:
        """Queue a message for this connection alone (never dropped)."""
        if self.closed:
            return
        self._queue.append(msg)
        self._bytes += _NOTICE_COST
        self._wake.set()

    def backlogged(self) -> bool:
        """A lossless attachment over its limit: the pump waits (see :meth:`wait_room`)."""
        return self._lossless and not self.closed and self._bytes > self.send_buffer_bytes

    async def wait_room(self) -> None:
        assert self._room is not None
        while self.backlogged():
            self._room.clear()
            await self._room.wait()

    def _compact(self) -> None:
        """Merge, then drop, deltas; cut the connection if what cannot be dropped is too much.

        One event, however big, is always let through: the limit applies to
        the backlog beside the largest queued event. Never run for a lossless
        (stdio) attachment, so a server loads the merging at its first slow socket.
        """
        from ._deltas import coalesce

        limit = self.send_buffer_bytes
        items = coalesce(list(self._queue))
        total = sum(map(_cost, items))
        if total > limit // 2:
            kept: list[Frame] = []
            for item in items:
                if total > limit // 2 and isinstance(item, Out) and item.kind != NORMAL:
                    total -= _cost(item)
                else:
                    kept.append(item)
            items = kept
        largest = max(map(_cost, items), default=0)
        if total - largest > 2 * limit:
            log.info("connection too slow: disconnecting", session=self.session.id, queued=total)
            self.drop()
            return
        self._queue = collections.deque(items)
        self._bytes = total
        # Next pass only after another half buffer arrives: pushes stay O(1) amortised.
        self._compact_at = max(limit, total + limit // 2)

    def evicted(self, seq: int) -> None:
        """The replay buffer dropped event ``seq``: a replay that has not read it is over."""
        if self._cursor is not None and self._cursor <= seq:
            self.close_with(
                "lagged",
                f"event {seq} left the replay buffer before this connection read it; "
                "reattach to resume from the events still retained",
            )

    def session_ended(self) -> None:
        """The session is over: deliver what is left, then finish."""
        self._ending = True
        self._wake.set()

    # --- used by the transport ----------------------------------------------------------

    async def take(self, max_bytes: int = DEFAULT_BATCH_BYTES) -> list[Frame]:
        """The next frames to write (waits for some); ``[]`` when the attachment is over."""
        while (batch := self.poll(max_bytes)) is None:
            await self.wait()
        return batch

    def poll(self, max_bytes: int = DEFAULT_BATCH_BYTES) -> list[Frame] | None:
        """The frames to write now; ``[]`` when the attachment is over, None when there are none."""
        if self.aborted:
            return []
        batch = self._collect(max_bytes)
        if batch:
            if self._room is not None:
                self._room.set()
            return batch
        if self._ending or self.closed:
            self._finish()
            return []
        return None

    async def wait(self, direct: Direct | None = None) -> None:
        """Wait until :meth:`poll` may have something; call it only after poll() gave None.

        ``direct`` is for a transport with nothing unsent: while it waits, the
        session hands it frames at once, in the pump's step (one task switch
        less to the client). It returns whether its transport is still idle;
        when not, this wait ends so the writer can watch the transport drain.
        """
        self._wake.clear()
        self._direct = direct
        try:
            await self._wake.wait()
        finally:
            self._direct = None

    def _collect(self, max_bytes: int) -> list[Frame]:
        batch: list[Frame] = []
        size = 0
        queue = self._queue
        while queue and size < max_bytes:
            item = queue.popleft()
            cost = _cost(item)
            self._bytes -= cost
            size += cost
            batch.append(item)
        if self._bytes <= self.send_buffer_bytes:
            self._compact_at = self.send_buffer_bytes
        cursor = self._cursor
        if cursor is None or size >= max_bytes:
            return batch
        ring = self.session.ring
        head = self.session.next_seq
        if cursor < head and (not ring or cursor < ring[0].seq):
            self.close_with("lagged", "the events this connection needs are no longer retained")
            return batch + self._collect(max_bytes)
        if cursor < head:
            for out in itertools.islice(ring, cursor - ring[0].seq, None):
                batch.append(out)
                size += len(out.data)
                cursor = out.seq + 1
                if size >= max_bytes:
                    break
        if cursor >= head:
            self._cursor = None  # caught up: from now on the pump queues to us
        else:
            self._cursor = cursor
        return batch

    def _finish(self) -> None:
        self.closed = True
        self._queue.clear()
        self._bytes = 0
        self.session.remove(self)
        if self._room is not None:
            self._room.set()

    def detach(self) -> None:
        """The client is gone (or leaving): stop queueing, release the session."""
        if not self.closed:
            self._finish()
        self._wake.set()

    def drop(self) -> None:
        """Disconnect at once, without flushing (the client is not reading)."""
        self.aborted = True
        self.detach()

    def close_with(self, code: str, message: str) -> None:
        """Tell the client why, flush, and close (the session goes on)."""
        if self.closed:
            return
        self._queue.clear()
        self._bytes = 0
        self._cursor = None
        self.session.remove(self)
        self._queue.append(Closing(code, message))
        self._bytes = _NOTICE_COST
        self._ending = True
        self._wake.set()

    async def submit(self, item: Submission | Rejected) -> None:
        """Hand a submission (or a rejected line) to the engine, in order.

        Raises :class:`NotAccepted` when this connection does not control the
        session or the session has ended. Waits while the engine's submission
        queue is full: backpressure on the client.
        """
        session = self.session
        if session.ended or self.closed:
            raise NotAccepted("session_ended", "the session has ended")
        if not self.controller:
            raise NotAccepted(
                "not_controller",
                "this connection does not control the session (another client took "
                "control, or it attached with control: false); reattach with control: "
                "true to take it",
            )
        try:
            await session.codex.enqueue(item)
        except EngineClosed:
            raise NotAccepted("session_ended", "the session has ended") from None
