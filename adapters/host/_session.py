"""A hosted session: one engine's events, its replay buffer, its attachments and its controller.

The host's pump reads the engine's events and hands each to
:meth:`HostedSession.publish`, which encodes it once and appends it to the
session's replay buffer (a deque of encoded events bounded in count and
bytes) and to the send queue of every attached connection. Publishing also
keeps what a dialect asks of a session: the Task running now, the approval
requests its Tasks wait on, the calls of a client's tools that wait for their
answer (:meth:`HostedSession.waiting_tool_calls`: a client that attaches is sent
them again), and the engine's new session id after a resume or a fork (the host
renames the session).

Control: the latest attachment that asks for control gets it; the one it
replaces is demoted and told (``control_changed``).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from codexcore.engine import Rejected, State
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    ApplyPatchApprovalRequest,
    ControlChanged,
    DynamicToolCallRequest,
    Event,
    ExecApprovalRequest,
    SessionConfigured,
    ShutdownComplete,
    Submission,
    TaskStarted,
)

from ._attachment import Attachment
from ._frames import Out

if TYPE_CHECKING:
    from ._host import SessionHost


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
        "names",
        "next_seq",
        "observers",
        "on_end",
        "pump",
        "ring",
        "ring_bytes",
        "running_task",
        "tool_calls",
        "waiting",
    )

    def __init__(self, host: SessionHost, session_id: str, codex: HostedEngine) -> None:
        self._host = host
        self.id = session_id
        self.aliases: list[str] = []  # ids it had before a resume or fork renamed it
        self.names: dict[str, tuple[str, ...]] = {}  # see SessionHost.name_session()
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
        self.tool_calls: dict[str, tuple[str, Out]] = {}  # call_id -> (Task id, its request)
        self.observers: list[Callable[[Event], None]] = []  # see observe()
        self.on_end: list[Callable[[], None]] = []  # called once, when the session ends

    @property
    def host(self) -> SessionHost:
        """The host this session lives on (its control receiver, its configuration)."""
        return self._host

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
        out = Out.of(event)
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
            attachment.push(out, event)
        msg = event.msg
        if isinstance(msg, TaskStarted):
            self.running_task = event.id
        elif event.id == self.running_task and msg.TYPE in TERMINAL_EVENT_TYPES:
            self.running_task = None
        if self.observers:
            for observer in tuple(self.observers):
                observer(event)
        if self.tool_calls or isinstance(msg, DynamicToolCallRequest):
            self._track_tool_call(event, out)
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

    def _track_tool_call(self, event: Event, out: Out) -> None:
        msg = event.msg
        if isinstance(msg, DynamicToolCallRequest):
            self.tool_calls[msg.call_id] = (event.id, out)
        elif msg.TYPE == "mcp_tool_call_end":
            self.tool_calls.pop(getattr(msg, "call_id", ""), None)  # answered, timed out, aborted
        elif msg.TYPE in TERMINAL_EVENT_TYPES:
            for call_id, (task, _) in list(self.tool_calls.items()):
                if task == event.id:
                    del self.tool_calls[call_id]

    def waiting_tool_calls(self) -> list[Out]:
        """The ``dynamic_tool_call_request`` events whose calls wait for an answer now,
        oldest first: a client that attaches after the one that was asked has gone is
        sent them again (the native dialect does), so no call is lost silently."""
        return sorted((out for _, out in self.tool_calls.values()), key=lambda out: out.seq)

    def hand_over(self) -> None:
        """After a run of :meth:`publish`: idle transports get their frames now."""
        for attachment in tuple(self.attachments):
            attachment.hand_over()

    def _evict(self) -> None:
        old = self.ring.popleft()
        self.ring_bytes -= len(old.data)
        for attachment in list(self.attachments):
            attachment.evicted(old.seq)

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
        """The engine's stream is over: attachments flush what is left and finish, and
        the ``on_end`` callbacks are called (after the last observed event)."""
        self.ended = True
        for attachment in list(self.attachments):
            attachment.session_ended()
        for ended in self.on_end:
            ended()

    async def backpressure(self) -> None:
        for attachment in tuple(self.attachments):
            if attachment.backlogged():
                await attachment.wait_room()
