"""The session host: sessions by id, each a Codex engine, a replay buffer and its connections.

Theory of operation
-------------------
A :class:`SessionHost` knows nothing of sockets or of how lines are framed.
Transports (stdio, TCP, Unix) accept connections; a dialect (the native
NDJSON one today) turns lines into calls on the host. Every session is a
:class:`~codexcore.Codex` with ``acknowledge_submissions`` on, drawing model
clients from the host's one :class:`~codexcore.ModelClientPool`.

One asyncio task per session, the pump, reads the engine's events, encodes
each once and appends it to the session's replay buffer (a deque of encoded
events bounded in count and bytes) and to the send queue of every attached
connection (an :class:`Attachment`). The encoded bytes are shared: the buffer
and the queues hold references, not copies.

An attachment starts in replay mode when its client asks for past events: its
writer then reads from the replay buffer by cursor, at the client's pace,
until the cursor reaches the newest event; at that moment (synchronously, so
nothing can slip between) it turns live and the pump starts queueing to it.
If the buffer drops an event the cursor has not reached, the client cannot
get exact events any more: it is told (``closing``, code ``lagged``) and
closed, and may reattach.

A live attachment's queue is bounded (``send_buffer_bytes``). When it
overflows, runs of consecutive deltas of one stream are merged into one event
that carries the ``seq`` of the last event merged; if that is not enough,
deltas are dropped oldest first (each delta's content also arrives whole in a
later event: ``agent_message``, ``agent_reasoning``, ``exec_command_end``).
Other events are never merged or dropped: a connection whose queue is full of
them is disconnected (``slow_consumer``), as is one whose transport has not
drained for ``stuck_timeout`` seconds (the transport enforces that). Its
session goes on; the client can reattach and replay exact events. A lossless
attachment (stdio, where there is no reattaching) instead holds the pump, and
with it the engine, until its client reads.

Control: the latest attachment that asks for control gets it; the one it
replaces is demoted and told (``control_changed``). Only the controller's
submissions reach the engine.

A session with no attachment and no new event for ``idle_timeout`` seconds is
shut down by a sweeper. Closing the host shuts every session down, so each
attached client receives ``shutdown_complete`` before its connection closes.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from codexcore import __version__
from codexcore._logging import get_logger
from codexcore.engine import Codex, EngineClosed, EngineConfig, ModelClientPool, Rejected, State
from codexcore.protocol import (
    PROTOCOL_VERSION,
    TERMINAL_EVENT_TYPES,
    AgentMessageDelta,
    AgentReasoningDelta,
    ApplyPatchApprovalRequest,
    Closing,
    ConnectionMsg,
    ControlChanged,
    Event,
    ExecApprovalRequest,
    ExecCommandOutputDelta,
    Limits,
    Peer,
    SessionConfigured,
    ShutdownComplete,
    Submission,
    TaskStarted,
    Welcome,
    decode_event,
    encode_event,
)
from codexcore.protocol._value import Value

from ._control_config import ControlConfig
from ._framing import DEFAULT_MAX_LINE_BYTES

if TYPE_CHECKING:
    import httpx

    from ._control import ControlReceiver

log = get_logger(__name__)

KiB = 1024
MiB = 1024 * KiB

CAPABILITIES = ("acks", "coalesced_deltas", "control", "replay")
"""What every session of this host offers (see ``docs/adapters.md``)."""

OUTPUT_CHUNK_LIMIT = 8 * KiB
"""Merged ``exec_command_output_delta`` chunks stay within the engine's 8 KiB."""

_ENTRY_OVERHEAD = 64  # what a queued event costs beyond its bytes, for the accounting
_NOTICE_COST = 256


ENGINE_EVENT_QUEUE = 256
"""Engine event queue slots per hosted session. The pump drains the queue whole each
time it runs, so the size sets how many events go out in one write when the engine
is fast (64 slots: about 0.6 of a bare writer's rate; 256: 0.8 to 1.0). The replay
buffer and send queues do the buffering: the queue only fills while a lossless
(stdio) client holds the pump, at most 2.8 MiB of 11 kB output deltas."""


def host_engine_config(**fields: Any) -> EngineConfig:
    """An :class:`~codexcore.EngineConfig` sized for a host of many sessions."""
    return EngineConfig(**{"event_queue_size": ENGINE_EVENT_QUEUE, **fields})


@attrs.frozen(repr=False, eq=False)
class HostConfig(Value):
    """The rules of a :class:`SessionHost`; every limit bounds memory or time.

    ``engine`` configures each session's engine (``acknowledge_submissions``
    is always turned on; the default has a small event queue, see
    :func:`host_engine_config`). ``token``, when set, must be presented by every
    client (compared in constant time). ``max_connections`` counts every
    open connection, handshaking or not. ``replay_events``/``replay_bytes``
    bound each session's replay buffer; ``send_buffer_bytes`` each
    connection's send queue. A connection whose transport does not drain for
    ``stuck_timeout`` seconds is dropped. A session with no connection and
    no new event for ``idle_timeout`` seconds is shut down. A client has
    ``handshake_timeout`` seconds to send its ``hello``. ``control``: the rules
    for seed 003's control messages (``docs/control.md``); a control sender's
    token admits a connection as the host's token does, and names its sender.
    """

    engine: EngineConfig = attrs.field(factory=host_engine_config)
    token: str | None = attrs.field(default=None, repr=False)
    max_sessions: int = 10_000
    max_connections: int = 2_048
    max_connections_per_session: int = 32
    replay_events: int = 4_096
    replay_bytes: int = 2 * MiB
    send_buffer_bytes: int = 512 * KiB
    stuck_timeout: float = 30.0
    idle_timeout: float = 600.0
    handshake_timeout: float = 10.0
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    server: Peer = attrs.field(factory=lambda: Peer("codexcore", __version__))
    control: ControlConfig = attrs.field(factory=ControlConfig)


class HostRefusal(Exception):
    """The host will not do what was asked; ``code`` is the wire code (``refused.code``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class NotAccepted(Exception):
    """A submission from an attachment did not reach the engine (``code`` says why)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class HostedEngine(Protocol):
    """What a hosted session needs of its engine: a :class:`~codexcore.Codex`, or a
    stand-in for one that runs elsewhere (a Redis worker pool's gateway side)."""

    @property
    def state(self) -> State: ...

    @property
    def agent_id(self) -> str: ...

    async def enqueue(self, item: Submission | Rejected) -> None: ...

    async def next_event(self) -> Event: ...

    def next_event_nowait(self) -> Event | None: ...

    def request_close(self, *, discard: bool = True) -> None: ...

    async def aclose(self) -> None: ...


class EngineSource(Protocol):
    """Where a host's sessions run when not in this process (``SessionHost(engines=)``).

    ``create`` returns the started engine of a new session with that id.
    ``open`` returns the engine of a session this process does not host yet
    and the events it already has (oldest first, each at most once, the
    newest of them the one before the engine's first), or None when no such
    session exists: a client may attach to any session from any host.
    """

    async def create(self, session_id: str) -> HostedEngine: ...

    async def open(self, session_id: str) -> tuple[HostedEngine, Sequence[Event]] | None: ...


# --- events as they are queued --------------------------------------------------------

NORMAL, TEXT_DELTA, OUTPUT_DELTA = 0, 1, 2
_KIND_OF = {
    AgentMessageDelta.TYPE: TEXT_DELTA,
    AgentReasoningDelta.TYPE: TEXT_DELTA,
    ExecCommandOutputDelta.TYPE: OUTPUT_DELTA,
}


class Out:
    """One encoded event (JSON, no newline), shared by the replay buffer and the send queues.

    ``kind`` marks deltas, which may be merged or dropped for a slow client.
    """

    __slots__ = ("data", "kind", "seq")

    def __init__(self, seq: int, data: bytes, kind: int = NORMAL) -> None:
        self.seq, self.data, self.kind = seq, data, kind

    def __repr__(self) -> str:
        return f"Out(seq={self.seq}, {self.data[:60]!r})"


Frame = Out | ConnectionMsg
"""What an attachment hands its transport: an encoded event or a connection message."""

Direct = Callable[[list[Frame]], bool]
"""Writes frames to an idle transport at once; False when it has bytes left unsent."""

DEFAULT_BATCH_BYTES = 64 * KiB
"""How much a transport takes from its attachment at a time."""


def _encode(event: Event) -> bytes:
    """An event's JSON in a bytes object of its own size.

    orjson's result keeps the buffer it grew (4 kB for a 100-byte event, 120 kB
    for an 11 kB one): held in a replay buffer, that is ten to forty times the
    data. One copy (about 0.2 us) gives the memory back.
    """
    return memoryview(encode_event(event)).tobytes()


def _cost(item: Frame) -> int:
    return len(item.data) + _ENTRY_OVERHEAD if isinstance(item, Out) else _NOTICE_COST


def _stream_of(event: Event) -> tuple[str, ...]:
    msg = event.msg
    if isinstance(msg, ExecCommandOutputDelta):
        return (event.id, msg.TYPE, msg.call_id, msg.stream)
    return (event.id, msg.TYPE)


def _merge(run: list[Event]) -> Out:
    """Consecutive deltas of one stream as one delta with the ``seq`` of the last."""
    last = run[-1]
    msg = last.msg
    if isinstance(msg, ExecCommandOutputDelta):
        chunk = b"".join(e.msg.chunk for e in run if isinstance(e.msg, ExecCommandOutputDelta))
        merged: Event = Event(last.id, last.seq, attrs.evolve(msg, chunk=chunk))
    else:
        assert isinstance(msg, AgentMessageDelta | AgentReasoningDelta)
        text = "".join(e.msg.delta for e in run if isinstance(e.msg, type(msg)))
        merged = Event(last.id, last.seq, attrs.evolve(msg, delta=text))
    return Out(merged.seq, _encode(merged), _KIND_OF[msg.TYPE])


def coalesce(items: list[Frame]) -> list[Frame]:
    """Merge every run of consecutive deltas of one stream (output chunks up to 8 KiB)."""
    result: list[Frame] = []
    run: list[Event] = []
    run_out: list[Out] = []
    run_size = 0

    def flush() -> None:
        if len(run_out) == 1:
            result.append(run_out[0])
        elif run_out:
            result.append(_merge(run))
        run.clear()
        run_out.clear()

    for item in items:
        if not isinstance(item, Out) or item.kind == NORMAL:
            flush()
            result.append(item)
            continue
        event = decode_event(item.data)
        size = len(event.msg.chunk) if isinstance(event.msg, ExecCommandOutputDelta) else 0
        fits = item.kind != OUTPUT_DELTA or run_size + size <= OUTPUT_CHUNK_LIMIT
        if not (run and fits and _stream_of(run[-1]) == _stream_of(event)):
            flush()
            run_size = 0
        run.append(event)
        run_out.append(item)
        run_size += size
    flush()
    return result


# --- one connection's view of a session ---------------------------------------------------


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

    def push(self, out: Out) -> None:
        if self.closed or self._cursor is not None:
            return  # replaying: the writer reads the replay buffer itself
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
        the backlog beside the largest queued event.
        """
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


# --- a session ---------------------------------------------------------------------------


class HostedSession:
    """A Codex engine with its replay buffer, its attachments and its controller."""

    __slots__ = (
        "_host",
        "aliases",
        "attachments",
        "codex",
        "controller",
        "ended",
        "id",
        "idle_since",
        "last_event",
        "next_seq",
        "observers",
        "pump",
        "ring",
        "ring_bytes",
        "running_task",
        "waiting",
    )

    def __init__(self, host: SessionHost, session_id: str, codex: HostedEngine) -> None:
        self._host = host
        self.id = session_id
        self.aliases: list[str] = []  # ids it had before a resume or fork renamed it
        self.codex = codex
        self.ring: collections.deque[Out] = collections.deque()
        self.ring_bytes = 0
        self.next_seq = 0
        self.attachments: list[Attachment] = []
        self.controller: Attachment | None = None
        self.ended = False
        self.last_event = self.idle_since = time.monotonic()
        self.pump: asyncio.Task[None] | None = None  # reads the engine's events until the end
        self.waiting: dict[str, Event] = {}  # Task id -> the approval request it waits on
        self.running_task: str | None = None  # the Task whose task_started was published last
        self.observers: list[Callable[[Event], None]] = []  # see observe()

    @property
    def agent_id(self) -> str:
        """The session's agent (seed 003's ``agent_id``), stable across resumes."""
        return self.codex.agent_id

    def observe(self, observer: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``observer(event)`` for each event as it is published (synchronously: it
        must not block); returns the function that stops it."""
        self.observers.append(observer)
        return lambda: self.observers.remove(observer) if observer in self.observers else None

    def publish(self, event: Event) -> None:
        out = Out(event.seq, _encode(event), _KIND_OF.get(event.msg.TYPE, NORMAL))
        self.next_seq = event.seq + 1
        self.last_event = time.monotonic()
        config = self._host.config
        if config.replay_events > 0:
            ring = self.ring
            ring.append(out)
            self.ring_bytes += len(out.data)
            while ring and (
                len(ring) > config.replay_events or self.ring_bytes > config.replay_bytes
            ):
                self._evict()
        for attachment in tuple(self.attachments):  # a push may drop its attachment
            attachment.push(out)
        msg = event.msg
        if isinstance(msg, TaskStarted):
            self.running_task = event.id
        elif event.id == self.running_task and msg.TYPE in TERMINAL_EVENT_TYPES:
            self.running_task = None
        if self.observers:
            for observer in tuple(self.observers):
                observer(event)
        if isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
            self.waiting[event.id] = event
        elif event.id in self.waiting:
            del self.waiting[event.id]  # the Task moved on: the request was answered
        if isinstance(msg, SessionConfigured) and msg.session_id != self.id:
            self._host._rename(self, msg.session_id)
        elif isinstance(msg, ShutdownComplete):
            self._host._forget(self)

    def waiting_approvals(self) -> list[Event]:
        """The approval requests the session's Tasks wait for now, oldest first.

        A Task that asks emits nothing more until it is answered, so a request is
        waiting until its Task's next event. A dialect asks them again of a client
        that attaches after the one that was asked has gone.
        """
        return sorted(self.waiting.values(), key=lambda event: event.seq)

    def hand_over(self) -> None:
        """After a run of :meth:`publish`: idle transports get their frames now."""
        for attachment in tuple(self.attachments):
            attachment.hand_over()

    def _evict(self) -> None:
        old = self.ring.popleft()
        self.ring_bytes -= len(old.data)
        for attachment in list(self.attachments):
            if attachment._cursor is not None and attachment._cursor <= old.seq:
                attachment.close_with(
                    "lagged",
                    f"event {old.seq} left the replay buffer before this connection read it; "
                    "reattach to resume from the events still retained",
                )

    def add(self, attachment: Attachment, *, control: bool) -> None:
        self.attachments.append(attachment)
        self._host._idle.pop(self.id, None)
        if control:
            previous, self.controller = self.controller, attachment
            if previous is not None:
                previous.controller = False
                previous.notice(ControlChanged(False, "taken_over"))
            attachment.controller = True

    def remove(self, attachment: Attachment) -> None:
        try:
            self.attachments.remove(attachment)
        except ValueError:
            return
        if self.controller is attachment:
            self.controller = None
        if not self.attachments and self._host.session(self.id) is self:
            self.idle_since = time.monotonic()
            self._host._idle[self.id] = self

    def end(self) -> None:
        """The engine's stream is over: attachments flush what is left and finish."""
        self.ended = True
        for attachment in list(self.attachments):
            attachment.session_ended()

    async def backpressure(self) -> None:
        for attachment in tuple(self.attachments):
            if attachment.backlogged():
                await attachment.wait_room()


# --- the host ----------------------------------------------------------------------------


class SessionHost:
    """Sessions by id behind any transport and dialect. Use ``async with SessionHost(config)``.

    ``transport`` replaces the model client's HTTP transport (tests).
    ``engines``, when given, runs the sessions instead of engines of this
    process (see :class:`EngineSource`); replay, control and the dialects
    work the same.
    """

    def __init__(
        self,
        config: HostConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        engines: EngineSource | None = None,
    ) -> None:
        self.config = config or HostConfig()
        self._engines = engines
        self.engine_config = attrs.evolve(self.config.engine, acknowledge_submissions=True)
        # Shards: one httpx pool does not carry a thousand streams well.
        self._pool = ModelClientPool(self.engine_config, transport=transport, shards=16)
        self._sessions: dict[str, HostedSession] = {}
        self._aliases: dict[str, HostedSession] = {}
        self._idle: dict[str, HostedSession] = {}
        self._pumps: set[asyncio.Task[None]] = set()
        self._connections = 0
        self._closing = False
        self._closing_event = asyncio.Event()
        self._sweeper: asyncio.Task[None] | None = None
        self._on_new_session: list[Callable[[str], None]] = []
        self._control: ControlReceiver | None = None
        self._sender_tokens = self.config.control.tokens()

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="codexcore-sweeper")

    async def __aenter__(self) -> SessionHost:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def closing(self) -> bool:
        return self._closing

    def begin_close(self) -> None:
        """Refuse new work and start shutting every session down, without waiting."""
        self._closing = True
        self._closing_event.set()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for session in list(self._sessions.values()):
            self._shut_down(session)

    async def wait_closing(self) -> None:
        """Return once the host begins closing (for a connection that has no session to end)."""
        await self._closing_event.wait()

    async def aclose(self) -> None:
        """Shut every session down (attached clients get ``shutdown_complete``) and release all."""
        self.begin_close()
        if self._sweeper is not None:
            await asyncio.gather(self._sweeper, return_exceptions=True)
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._control is not None:
            self._control.close()
        await self._pool.aclose()

    # --- what transports and dialects use -------------------------------------------------

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    @property
    def connection_count(self) -> int:
        return self._connections

    def session(self, session_id: str) -> HostedSession | None:
        """The live session known by ``session_id``: its id, or one it had before a
        ``resume_session`` or ``fork_session`` gave it the engine's new one."""
        return self._sessions.get(session_id) or self._aliases.get(session_id)

    def open_connection(self) -> None:
        """Count a new connection in, or refuse it (``too_many_connections``, ``shutting_down``)."""
        if self._closing:
            raise HostRefusal("shutting_down", "the server is shutting down")
        if self._connections >= self.config.max_connections:
            raise HostRefusal(
                "too_many_connections",
                f"the server is at its limit of {self.config.max_connections} connections",
            )
        self._connections += 1

    def close_connection(self) -> None:
        self._connections -= 1

    def check_token(self, token: str | None) -> bool:
        """True when the host needs no token or ``token`` is it, or a control sender's
        (constant-time comparisons)."""
        expected = self.config.token
        if expected is None:
            return True
        import hmac  # only a server with a token (sockets) compares: stdio starts without it

        given = (token or "").encode()
        found = hmac.compare_digest(given, expected.encode())
        for sender_token in self._sender_tokens:
            found |= hmac.compare_digest(given, sender_token.encode())
        return found

    @property
    def control(self) -> ControlReceiver:
        """The receiver of seed 003's control messages (made on first use)."""
        if self._control is None:
            from ._control import ControlReceiver

            self._control = ControlReceiver(self, self.config.control)
        return self._control

    async def attach(
        self,
        *,
        token: str | None,
        session_id: str | None = None,
        last_seq: int | None = None,
        control: bool = True,
        lossless: bool = False,
    ) -> Attachment:
        """Create a session (``session_id`` None) or attach to one, replaying after ``last_seq``.

        Raises :class:`HostRefusal`. The token is checked first and a wrong
        one is refused before any session is looked up, so a client without
        it learns nothing about sessions.
        """
        if self._closing:
            raise HostRefusal("shutting_down", "the server is shutting down")
        if not self.check_token(token):
            raise HostRefusal("unauthorized", "the token is missing or wrong")
        if session_id is None:
            session = await self._create()
            attachment = Attachment(
                session,
                controller=control,
                lossless=lossless,
                send_buffer_bytes=self.config.send_buffer_bytes,
                cursor=None,
            )
        else:
            if self._engines is not None and self.session(session_id) is None:
                await self._open(session_id)
            attachment = self._reattach(session_id, last_seq, control, lossless)
        attachment.session.add(attachment, control=control)
        return attachment

    def _reattach(
        self, session_id: str, last_seq: int | None, control: bool, lossless: bool
    ) -> Attachment:
        session = self.session(session_id)
        if session is None:
            raise HostRefusal("unknown_session", f"no session {session_id!r} on this server")
        if len(session.attachments) >= self.config.max_connections_per_session:
            raise HostRefusal(
                "session_full",
                f"the session has its limit of {self.config.max_connections_per_session} "
                "connections",
            )
        want = 0 if last_seq is None else last_seq + 1
        if want < 0 or want > session.next_seq:
            raise HostRefusal(
                "bad_seq",
                f"last_seq {last_seq} is not an event of this session "
                f"(its latest is {session.next_seq - 1})",
            )
        first = session.ring[0].seq if session.ring else session.next_seq
        start = max(want, first)
        attachment = Attachment(
            session,
            controller=control,
            lossless=lossless,
            send_buffer_bytes=self.config.send_buffer_bytes,
            cursor=start if start < session.next_seq else None,
        )
        attachment.resumed = True
        attachment.replay_from = start
        attachment.replay_complete = want >= first
        return attachment

    def welcome(self, attachment: Attachment) -> Welcome:
        """The ``welcome`` that tells a client about its new attachment."""
        config = self.config
        return Welcome(
            PROTOCOL_VERSION,
            config.server,
            CAPABILITIES,
            attachment.session_id,
            resumed=attachment.resumed,
            control=attachment.controller,
            replay_from=attachment.replay_from,
            replay_complete=attachment.replay_complete,
            limits=Limits(
                config.max_line_bytes, self.engine_config.duplicate_ttl, config.idle_timeout
            ),
            agent_id=attachment.session.agent_id,
            control_messages=config.control.capabilities(),
        )

    def on_new_session(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(session_id)`` for every session this host creates from now on.

        It runs synchronously, right after the session is registered and before
        its first event is published, so ``attach(session_id=..., last_seq=-1)``
        from a task it starts replays the session from its first event (while
        the replay buffer holds it). The session's end is seen by that
        attachment (:meth:`Attachment.take` returns ``[]``). A callback that
        raises is logged; the session goes on.
        """
        self._on_new_session.append(callback)

    def end_session(self, session_id: str) -> None:
        """Shut a session down now (its attachments get ``shutdown_complete``)."""
        session = self.session(session_id)
        if session is not None:
            self._shut_down(session)

    # --- sessions -------------------------------------------------------------------------

    async def _create(self) -> HostedSession:
        if len(self._sessions) >= self.config.max_sessions:
            raise HostRefusal(
                "too_many_sessions",
                f"the server is at its limit of {self.config.max_sessions} sessions",
            )
        # One id everywhere: the engine's Session takes the id welcome announces.
        session_id = str(uuid.uuid4())
        codex: HostedEngine
        if self._engines is not None:
            codex = await self._engines.create(session_id)
        else:
            # The pump reads the engine's events on this loop: no thread needs janus.
            codex = Codex(
                self.engine_config, clients=self._pool, threadsafe=False, session_id=session_id
            )
            await codex.start()
            # Let the engine's dispatcher take its first step: a request_close() before
            # that cancels it before its shutdown handler exists, and the stream never ends.
            await asyncio.sleep(0)
        session = self._host_session(session_id, codex, ())
        for callback in self._on_new_session:
            try:
                callback(session.id)
            except Exception:
                log.exception("new-session callback failed", session=session.id)
        return session

    def _host_session(
        self, session_id: str, codex: HostedEngine, past: Sequence[Event]
    ) -> HostedSession:
        session = HostedSession(self, session_id, codex)
        self._sessions[session.id] = session
        for event in past:  # into the replay buffer, before anyone can attach
            session.publish(event)
        pump = asyncio.create_task(self._pump(session), name=f"codexcore-pump-{session.id}")
        session.pump = pump
        self._pumps.add(pump)
        pump.add_done_callback(self._pumps.discard)
        return session

    async def _open(self, session_id: str) -> None:
        """Host a session that runs elsewhere, its past events in the replay buffer."""
        assert self._engines is not None
        opened = await self._engines.open(session_id)
        if opened is None:
            return
        codex, past = opened
        if self.session(session_id) is not None or self._closing:
            await codex.aclose()  # another attach opened it meanwhile
            return
        session = self._host_session(session_id, codex, past)
        self._idle[session.id] = session  # swept if the attach that opened it fails

    async def _pump(self, session: HostedSession) -> None:
        codex = session.codex
        try:
            while True:
                try:
                    event: Event | None = await codex.next_event()
                except EngineClosed:
                    break
                # Publish all that is queued before the writers run: fewer, larger writes.
                while event is not None:
                    session.publish(event)
                    event = codex.next_event_nowait()
                session.hand_over()
                await session.backpressure()
        except Exception:
            log.exception("session pump failed", session=session.id)
        finally:
            self._forget(session)
            await codex.aclose()

    def _forget(self, session: HostedSession) -> None:
        """The session takes no new attachments; the ones it has finish."""
        self._unregister(session)
        if not session.ended:
            session.end()

    def _shut_down(self, session: HostedSession) -> None:
        self._unregister(session)  # refuse reattaching from now on
        session.codex.request_close(discard=False)  # the pump drains: lose nothing

    def _unregister(self, session: HostedSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
        for alias in session.aliases:
            if self._aliases.get(alias) is session:
                del self._aliases[alias]
        self._idle.pop(session.id, None)

    def _rename(self, session: HostedSession, new_id: str) -> None:
        """The engine switched to session ``new_id`` (a resume or a fork): the hosted
        session follows, so ``welcome``, ``session_configured`` and the recorded
        session share one id. The old id stays an alias, for clients that kept it."""
        if self._sessions.get(session.id) is not session:
            return  # shutting down: nobody can attach any more
        other = self.session(new_id)
        if other is not None and other is not session:
            # Two engines on one recorded session: the first keeps the name.
            log.warning("session already open on this server", session=new_id)
            return
        old_id = session.id
        del self._sessions[old_id]
        self._aliases.pop(new_id, None)
        if new_id in session.aliases:
            session.aliases.remove(new_id)
        session.aliases.append(old_id)
        self._aliases[old_id] = session
        session.id = new_id
        self._sessions[new_id] = session
        if self._idle.pop(old_id, None) is not None:
            self._idle[new_id] = session

    async def _sweep_forever(self) -> None:
        timeout = self.config.idle_timeout
        interval = min(max(timeout / 10, 0.01), 5.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for session in list(self._idle.values()):
                if now - max(session.idle_since, session.last_event) >= timeout:
                    log.info("session expired", session=session.id)
                    self._shut_down(session)
