"""What seed 004's ``get_status`` says of a session, kept from its events.

A :class:`SessionStatus` per session reads the session's events: what its
replay buffer still holds, then each event as it is published (an observer of
the hosted session: nothing decoded twice, no hold on the engine), so a
client that connects late still sees the whole session: the Turns so far, the
last lines of output. Started with the session (the first JSON-RPC connection
of a host asks for that), it sees every event. It cuts
agent text and command output into lines (``output`` events) and sends
``state_change`` with the fields that changed to the connections subscribed
(``clients``). :func:`statuses` finds a host's, making them on first use: the
host knows nothing of them.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from codexcore._logging import get_logger
from codexcore.adapters.host._host import HostedSession, HostRefusal, SessionHost
from codexcore.engine import State
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    AgentMessage,
    AgentMessageDelta,
    AgentReasoningDelta,
    ApplyPatchApprovalRequest,
    Event,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    PatchApplyBegin,
    PlanUpdate,
    SessionConfigured,
    TaskComplete,
    TaskStarted,
    TurnComplete,
    decode_event,
)

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcContext

log = get_logger(__name__)

EVENT_TYPES = ("output", "state_change")
ALL_EVENTS = "*"
RECENT_LINES = 50
"""How many of the last output lines ``get_status`` returns in ``recent_output``."""

_STOPPING = (State.STOPPING, State.PAUSING)
_STREAMED = (AgentMessageDelta, AgentReasoningDelta, ExecCommandOutputDelta)
_CHANGE_FIELDS = (
    "task_name",
    "task_dir",
    "iteration",
    "current_story",
    "status",
    "interactive_mode",
)


def timestamp(at: float | None = None) -> str:
    """``at`` (seconds since the epoch; default now) in the seed's shape: UTC, ISO 8601
    with microseconds, no offset."""
    when = datetime.now(UTC) if at is None else datetime.fromtimestamp(at, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")


def current_step(plan: PlanUpdate) -> str | None:
    """The plan's step in progress; else its first pending one (the next to do), if any."""
    for wanted in ("in_progress", "pending"):
        for item in plan.plan:
            if item.status == wanted:
                return item.step
    return None


class Lines:
    """Text that arrives in pieces, cut into whole lines per stream."""

    def __init__(self) -> None:
        # The unterminated line's pieces, joined only once its end comes: a long line
        # streamed in many deltas costs linear time, not quadratic.
        self._partial: dict[tuple[str, ...], list[str]] = {}
        self._decoders: dict[tuple[str, ...], codecs.IncrementalDecoder] = {}

    def feed(self, key: tuple[str, ...], text: str) -> list[str]:
        pending = self._partial.setdefault(key, [])
        if "\n" not in text:
            if text:
                pending.append(text)
            return []
        *lines, rest = text.split("\n")
        if pending:
            lines[0] = "".join(pending) + lines[0]
        self._partial[key] = [rest] if rest else []
        return [line.removesuffix("\r") for line in lines]

    def feed_bytes(self, key: tuple[str, ...], chunk: bytes) -> list[str]:
        decoder = self._decoders.get(key)
        if decoder is None:
            decoder = self._decoders[key] = codecs.getincrementaldecoder("utf-8")("replace")
        return self.feed(key, decoder.decode(chunk))

    def seen(self, key: tuple[str, ...]) -> bool:
        return key in self._partial

    def flush(self, key: tuple[str, ...]) -> list[str]:
        """The last, unterminated line of ``key`` (if any); ``key`` is forgotten."""
        decoder = self._decoders.pop(key, None)
        rest = "".join(self._partial.pop(key, [])) + (decoder.decode(b"", True) if decoder else "")
        return [rest.removesuffix("\r")] if rest else []


class SessionStatus:
    """What seed 004's ``get_status`` says of one session, kept from its events."""

    def __init__(self, host: SessionHost, hosted: HostedSession) -> None:
        self._host = host
        self._hosted = hosted
        self.task_name = hosted.id
        self.task_dir = host.engine_config.session.cwd
        self.iteration = 0  # Turns completed
        self.current_story: str | None = None  # the plan's step in progress
        self.interactive_wanted = False  # set_interactive_mode's last word
        self.started_at = timestamp()
        self._updated = time.time()  # formatted when asked: a stream of deltas is hot
        self.recent: collections.deque[str] = collections.deque(maxlen=RECENT_LINES)
        self.clients: dict[RpcContext, set[str]] = {}  # connection -> its subscriptions
        self.finished = asyncio.Event()
        self.on_renamed: list[Callable[[str], None]] = []  # called with the new id
        self._task_id: str | None = None
        self._approvals: set[str] = set()
        self._stop_asked = False
        self._stopped = False
        self._ended = False
        self._lines = Lines()
        self._terminals: list[str] = []  # call ids of the commands running in a PTY
        self._last = self._changing()
        self._reader: asyncio.Task[None] | None = None
        self._events: collections.deque[Event] = collections.deque()  # seen, not yet applied
        self._wake = asyncio.Event()
        self._session_over = False
        self._unobserve: Callable[[], None] = lambda: None

    async def start(self) -> None:
        """Follow the session: what its replay buffer still holds, then every event as
        it is published (an observer: no copy of the stream to decode, no backpressure
        on the engine; a hot stream of deltas costs little)."""
        hosted = self._hosted
        self._events.extend(decode_event(out.data) for out in hosted.ring)
        # No await from here to the observer: no event is missed or seen twice.
        self._unobserve = hosted.observe(self._seen)
        if hosted.ended:
            self._session_over = True
        else:
            hosted.on_end.append(self._over)
        self._wake.set()
        self._reader = asyncio.create_task(self._follow())

    def _seen(self, event: Event) -> None:
        msg = event.msg
        if not self._events and type(msg) is AgentMessageDelta and "\n" not in msg.delta:
            # The bulk of a stream, taken at once: a delta that ends no line tells nothing.
            self._lines.feed(("agent", event.id), msg.delta)
            self._updated = time.time()
            return
        self._events.append(event)
        self._wake.set()

    def _over(self) -> None:
        self._session_over = True
        self._wake.set()

    # --- what get_status answers ------------------------------------------------------------

    @property
    def status(self) -> str:
        if self._ended:
            return "stopped"
        if self._task_id is None:
            return "stopped" if self._stopped else "idle"
        if self._stop_asked or self._hosted.codex.state in _STOPPING:
            return "stopping"
        return "awaiting_approval" if self._approvals else "running"

    @property
    def interactive_mode(self) -> bool:
        """On when asked for and a command runs in a terminal (a PTY)."""
        return self.interactive_wanted and bool(self._terminals)

    @property
    def updated_at(self) -> str:
        return timestamp(self._updated)

    def fields(self) -> dict[str, Any]:
        return {
            "task_name": self.task_name,
            "task_dir": self.task_dir,
            "iteration": self.iteration,
            "max_iterations": None,
            "current_story": self.current_story,
            "agent": "codexcore",
            "agent_id": self._hosted.agent_id,
            "status": self.status,
            "interactive_mode": self.interactive_mode,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "recent_output": list(self.recent),
        }

    def _changing(self) -> dict[str, Any]:
        fields = self.fields()
        return {name: fields[name] for name in _CHANGE_FIELDS}

    # --- following the session ----------------------------------------------------------------

    async def _follow(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._events:
                    await self._apply(self._events.popleft())
                if self._session_over:
                    break
        except Exception:
            log.exception("session status failed", session=self.task_name)
        finally:
            self._unobserve()
            self._ended = True
            await self._changed()
            for ctx in list(self.clients):
                ctx.over.set()  # the session is over, and with it its control connections
            self.finished.set()

    async def _apply(self, event: Event) -> None:
        msg = event.msg
        self._updated = time.time()
        for line in self._output_of(event):
            self.recent.append(line)
            await self._broadcast("output", {"line": line})
        if isinstance(msg, TaskStarted):
            self._task_id, self._stopped, self._approvals = event.id, False, set()
        elif isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
            self._approvals.add(msg.call_id)
        elif isinstance(msg, ExecCommandBegin | ExecCommandEnd | PatchApplyBegin):
            self._approvals.discard(msg.call_id)
            self._follow_terminal(msg)
        elif isinstance(msg, PlanUpdate):
            self.current_story = current_step(msg)
        elif isinstance(msg, TurnComplete):
            self.iteration += 1
            self._approvals.clear()
        elif isinstance(msg, SessionConfigured):
            self.task_dir = msg.cwd
            if msg.session_id != self.task_name:
                self.task_name = msg.session_id
                for renamed in self.on_renamed:
                    renamed(msg.session_id)
        if msg.TYPE in TERMINAL_EVENT_TYPES and event.id == self._task_id:
            self._task_id, self._stop_asked, self._approvals = None, False, set()
            self._stopped = isinstance(msg, TaskComplete) and msg.stopped_by == "stop"
        if not isinstance(msg, _STREAMED):  # a delta changes no field (the next event tells)
            await self._changed()

    def _output_of(self, event: Event) -> list[str]:
        """Whole lines of agent text and command output, as they complete."""
        msg, lines = event.msg, self._lines
        if isinstance(msg, AgentMessageDelta):
            return lines.feed(("agent", event.id), msg.delta)
        if isinstance(msg, AgentMessage):
            key = ("agent", event.id)
            return lines.flush(key) if lines.seen(key) else msg.message.splitlines()
        if isinstance(msg, ExecCommandOutputDelta):
            return lines.feed_bytes(("exec", msg.call_id, msg.stream), msg.chunk)
        if isinstance(msg, ExecCommandEnd):
            keys = [("exec", msg.call_id, stream) for stream in ("stdout", "stderr")]
            if not any(lines.seen(key) for key in keys):
                return msg.aggregated_output.splitlines()
            return [line for key in keys for line in lines.flush(key)]
        return []

    def _follow_terminal(self, msg: ExecCommandBegin | ExecCommandEnd | PatchApplyBegin) -> None:
        """The latest command running in a terminal (``write_pty`` writes to it)."""
        if isinstance(msg, ExecCommandBegin) and msg.pty:
            self._terminals.append(msg.call_id)
        elif isinstance(msg, ExecCommandEnd) and msg.call_id in self._terminals:
            self._terminals.remove(msg.call_id)

    @property
    def terminal(self) -> str | None:
        """The call id of the latest command running in a terminal, if any."""
        return self._terminals[-1] if self._terminals else None

    async def _changed(self) -> None:
        now = self._changing()
        changed = {name: value for name, value in now.items() if self._last[name] != value}
        self._last = now
        if changed:
            await self._broadcast("state_change", changed)

    async def _broadcast(self, kind: str, data: dict[str, Any]) -> None:
        params = {"type": kind, "timestamp": timestamp(), "data": data}
        for ctx, events in list(self.clients.items()):
            if ctx.over.is_set():
                self.clients.pop(ctx, None)
            elif kind in events or ALL_EVENTS in events:
                await ctx.notify("event", params)

    # --- commands --------------------------------------------------------------------------

    async def want_interactive(self, enabled: bool) -> None:
        self.interactive_wanted = enabled
        await self._changed()

    async def stop_requested(self) -> None:
        if self._task_id is not None:
            self._stop_asked = True
            await self._changed()


class Statuses:
    """One :class:`SessionStatus` per live session of a host, made on first use."""

    def __init__(self, host: SessionHost) -> None:
        self._host = host
        self._by_session: dict[HostedSession, SessionStatus] = {}
        self._starting: dict[HostedSession, asyncio.Task[SessionStatus]] = {}
        self._forgetting: set[asyncio.Task[None]] = set()

    def follow(self, session_id: str) -> None:
        """Follow ``session_id`` from now on (call it as the session is created, from
        ``SessionHost.on_new_session``, to follow it from its first event)."""
        task = asyncio.create_task(self._get_logged(session_id))
        self._forgetting.add(task)
        task.add_done_callback(self._forgetting.discard)

    async def _get_logged(self, session_id: str) -> None:
        try:
            await self.get(session_id)
        except Exception as exc:  # the session ended at once: nothing to follow
            log.info("session status not followed", session=session_id, error=str(exc))

    async def get(self, session_id: str) -> SessionStatus:
        """The session's status, following it from now on; raises :class:`HostRefusal`."""
        hosted = self._host.session(session_id)
        if hosted is None:
            raise HostRefusal("unknown_session", f"no live session {session_id!r}")
        status = self._by_session.get(hosted)
        if status is not None:
            return status
        starting = self._starting.get(hosted)
        if starting is None:  # one start, however many callers ask at once
            starting = self._starting[hosted] = asyncio.create_task(self._start(hosted))
        return await asyncio.shield(starting)

    async def _start(self, hosted: HostedSession) -> SessionStatus:
        try:
            status = SessionStatus(self._host, hosted)
            await status.start()
            self._by_session[hosted] = status
            forgetting = asyncio.create_task(self._forget(hosted, status))
            self._forgetting.add(forgetting)
            forgetting.add_done_callback(self._forgetting.discard)
            return status
        finally:
            self._starting.pop(hosted, None)

    async def _forget(self, hosted: HostedSession, status: SessionStatus) -> None:
        await status.finished.wait()
        self._by_session.pop(hosted, None)


_STATUSES: weakref.WeakKeyDictionary[SessionHost, Statuses] = weakref.WeakKeyDictionary()


def statuses(host: SessionHost) -> Statuses:
    """The host's :class:`Statuses` (made on first use; the host knows nothing of them)."""
    found = _STATUSES.get(host)
    if found is None:
        found = _STATUSES[host] = Statuses(host)
    return found
