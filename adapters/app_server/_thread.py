"""One app-server thread: a session of the host, attached with control, its events
mapped to notifications and its approval requests asked of the client.

A thread is a session: its id is the session's id, so an app-server thread can be
watched over a session socket and steered by control messages like any other. A
turn is a Task: ``turn/start`` submits the ``user_input`` whose id is the turn's.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from codexcore._logging import get_logger
from codexcore.adapters.host import Attachment, Frame, NotAccepted, Out
from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    ApplyPatchApprovalRequest,
    DynamicToolCallRequest,
    ErrorEvent,
    Event,
    EventMsg,
    ExecApproval,
    ExecApprovalRequest,
    McpToolCallEnd,
    PatchApproval,
    ReviewDecision,
    SessionConfigured,
    Submission,
    decode_event,
)

from ._items import Note, TurnMapper, command_text, now_ms
from ._tool_calls import ToolCalls
from ._wire import INTERNAL_ERROR, AppError

if TYPE_CHECKING:
    from ._wire import Response

log = get_logger(__name__)

EXEC_DECISIONS: dict[str, ReviewDecision] = {
    "accept": "approved",
    "acceptForSession": "approved_for_session",
    "decline": "denied",
    "cancel": "abort",
}
PATCH_DECISIONS = EXEC_DECISIONS


class Client(Protocol):
    """What a thread needs of its connection."""

    async def notify(self, notes: list[Note]) -> None: ...

    def encode(self, notes: list[Note]) -> bytes:
        """Notifications as the lines :meth:`send` writes (those opted out left out)."""
        ...

    async def send(self, lines: bytes) -> None:
        """Write lines of :meth:`encode` (dropped once the client is gone)."""
        ...

    def send_now(self, lines: bytes) -> bool:
        """:meth:`send` without waiting: whether the transport took them all."""
        ...

    async def drain(self) -> None:
        """Wait while the transport is over its limit (not once the client is gone)."""
        ...

    async def request(
        self, method: str, params: dict[str, Any], sent: Callable[[Any], None] | None = None
    ) -> tuple[Any, Response]: ...


class AppThread:
    """A thread: its attachment, the follower that maps its events, its turns."""

    def __init__(self, client: Client, attachment: Attachment) -> None:
        self.client = client
        self.attachment = attachment
        self.id = attachment.session_id
        self.mapper = TurnMapper(self.id, "")
        self.configured: SessionConfigured | None = None
        self.created_at = now_ms() // 1000
        self.preview = ""
        self.forked_from: str | None = None
        self.started_turns: set[str] = set()  # turn/start's ids, before their task_started
        self._waiters: dict[str, tuple[frozenset[str], asyncio.Future[EventMsg]]] = {}
        self._turn_ends: dict[str, asyncio.Future[None]] = {}
        self._asking: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self.tool_calls = ToolCalls(self)
        self._stash: list[Frame] | None = None  # frames the pump's step left to the follower
        self._behind = False  # the pump's step left bytes unsent: drain before the next
        self.follower = asyncio.create_task(self._follow(), name=f"app-server-{self.id}")

    # --- engine calls --------------------------------------------------------------------

    async def submit(self, op: Any, sub_id: str | None = None) -> str:
        sub_id = sub_id or f"app-{uuid.uuid4()}"
        try:
            await self.attachment.submit(Submission(sub_id, op))
        except NotAccepted as exc:
            raise AppError(INTERNAL_ERROR, f"thread {self.id}: {exc.message}") from None
        return sub_id

    async def call(self, op: Any, *answers: str) -> EventMsg:
        """Submit ``op`` and wait for its answer; an ``error`` raises invalid-request."""
        sub_id = f"app-{uuid.uuid4()}"
        future: asyncio.Future[EventMsg] = asyncio.get_running_loop().create_future()
        self._waiters[sub_id] = (frozenset(answers), future)
        await self.submit(op, sub_id)
        msg = await future
        if isinstance(msg, ErrorEvent):
            raise AppError(-32600, msg.message, {"code": msg.code})
        return msg

    async def configure(self, op: Any) -> SessionConfigured:
        configured = await self.call(op, "session_configured")
        assert isinstance(configured, SessionConfigured)
        self.configured = configured
        self.id = self.mapper.thread_id = configured.session_id
        self.mapper.cwd = configured.cwd
        return configured

    def seed(self, events: list[Event], *, live: bool) -> None:
        """Learn the thread's past turns from its recorded events; a turn a recorded
        session left unfinished (its process died) ended, unless the session is live."""
        for event in events:
            self.mapper.feed(event)
        if not live:
            for turn in self.mapper.turns.values():
                if turn.completed_at is None:
                    turn.status, turn.completed_at = "interrupted", turn.started_at
            self.mapper.unfinished.clear()

    def ask_waiting(self) -> None:
        """Ask this client what the live session's Tasks wait on: approvals and client
        tool calls asked of a connection that has gone (its attachment replays nothing
        from before it), so that none waits unseen until its timeout."""
        session = self.attachment.session
        for event in session.waiting_approvals():
            msg = event.msg
            if not isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
                continue
            if event.id in self.mapper.turns:
                self._ask(event.id, msg)
        for out in session.waiting_tool_calls():
            event = decode_event(out.data)
            if isinstance(event.msg, DynamicToolCallRequest) and event.id in self.mapper.turns:
                self.tool_calls.ask(event.id, event.msg)

    def turns(self) -> list[dict[str, Any]]:
        return [turn.wire() for turn in self.mapper.turns.values()]

    def running_turn(self) -> str | None:
        """The oldest turn not completed (kept as they start and end: a long thread's
        turn/start does not read all its turns)."""
        return next(iter(self.mapper.unfinished), None)

    def turn_end(self, turn_id: str) -> asyncio.Future[None]:
        """Done when the turn has ended (at once if it has)."""
        future = self._turn_ends.get(turn_id)
        if future is None:
            future = self._turn_ends[turn_id] = asyncio.get_running_loop().create_future()
            turn = self.mapper.turns.get(turn_id)
            if turn is not None and turn.completed_at is not None:
                future.set_result(None)
        return future

    # --- events --------------------------------------------------------------------------

    async def _follow(self) -> None:
        """Take the session's events until it ends. One event that cannot be mapped is
        logged and skipped: a follower that stopped taking would hold the engine (the
        attachment is lossless), and the thread would go silent.

        While it waits, the pump's step hands it the new events at once (:meth:`_direct`);
        it maps them itself when they need waiting on, or when the client reads slowly.
        The notifications of one batch of events go out in one write (one syscall, one
        wake-up of the client for a burst), in order, before anything else is written."""
        attachment = self.attachment
        try:
            while True:
                frames, self._stash = self._stash or attachment.poll(), None
                if frames is None:
                    if self._behind:  # what the pump's step wrote has not all gone out
                        self._behind = False
                        await self.client.drain()
                    await attachment.wait(self._direct)
                    continue
                if not frames:
                    return
                lines: list[bytes] = []
                for frame in frames:
                    event = self._event_of(frame)
                    try:
                        if event is not None:
                            await self._handle(event, lines)
                    except Exception:
                        log.exception("event not mapped", thread_id=self.id)
                await self._send(lines)
        finally:
            self._fail_waiters()

    def _direct(self, frames: list[Frame]) -> bool:
        """Map and write ``frames`` now, in the pump's step (one task switch less a batch).
        From the first that must wait on something (a client tool call to stop asking)
        on, they are left to the follower, in order. False: the follower takes over (it
        has frames left, or the transport has bytes left unsent)."""
        lines: list[bytes] = []
        for n, frame in enumerate(frames):
            event = self._event_of(frame)
            if event is None:
                continue
            msg = event.msg
            if isinstance(msg, McpToolCallEnd) and self.tool_calls.asking(msg.call_id):
                self._stash = frames[n:]
                break
            try:
                self._map(event, lines)
            except Exception:
                log.exception("event not mapped", thread_id=self.id)
        idle = self.client.send_now(b"".join(lines))
        self._behind = not idle
        return idle and self._stash is None

    def _event_of(self, frame: Frame) -> Event | None:
        if not isinstance(frame, Out):
            log.info("session notice", notice=type(frame).__name__, thread_id=self.id)
            return None
        try:
            # Live frames carry the event itself (attach(events=True)).
            return frame.event or decode_event(frame.data)
        except Exception:
            log.exception("event not mapped", thread_id=self.id)
            return None

    async def _send(self, lines: list[bytes]) -> None:
        if lines:
            data = b"".join(lines)
            lines.clear()
            await self.client.send(data)

    def _fail_waiters(self) -> None:
        for _, future in self._waiters.values():
            if not future.done():
                future.set_result(ErrorEvent("the thread has shut down", "shutdown"))
        for ended in self._turn_ends.values():
            if not ended.done():
                ended.set_result(None)

    async def _handle(self, event: Event, lines: list[bytes]) -> None:
        """Map one event: its notifications join ``lines``, encoded (the caller sends
        them; or they go here first when something else must be written after them)."""
        if self._map(event, lines) and isinstance(event.msg, McpToolCallEnd):
            await self._send(lines)  # serverRequest/resolved follows the item's end
            await self.tool_calls.ended(event.msg.call_id)

    def _map(self, event: Event, lines: list[bytes]) -> bool:
        """:meth:`_handle` but for its waiting: False when the event answered a
        :meth:`call` (nothing more to do)."""
        msg = event.msg
        waiter = self._waiters.get(event.id)
        if waiter is not None and (msg.TYPE in waiter[0] or msg.TYPE == "error"):
            del self._waiters[event.id]
            if not waiter[1].done():
                waiter[1].set_result(msg)
            return False
        if isinstance(msg, SessionConfigured):
            self.configured = msg
            self.id = self.mapper.thread_id = msg.session_id
        notes = self.mapper.feed(event)
        if notes:
            lines.append(self.client.encode(notes))
        if isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
            if event.id in self.mapper.turns:
                self._ask(event.id, msg)
        elif isinstance(msg, DynamicToolCallRequest):
            if event.id in self.mapper.turns:
                self.tool_calls.ask(event.id, msg)
        elif msg.TYPE in TERMINAL_EVENT_TYPES:
            future = self._turn_ends.get(event.id)
            if future is not None and not future.done():
                future.set_result(None)
        return True

    # --- approvals -----------------------------------------------------------------------

    def _ask(self, turn_id: str, msg: ExecApprovalRequest | ApplyPatchApprovalRequest) -> None:
        """Ask the client in a task of its own: events go on flowing meanwhile."""
        task = asyncio.create_task(self._approval(turn_id, msg))
        self._asking.add(task)
        task.add_done_callback(self._asking.discard)

    async def _approval(
        self, turn_id: str, msg: ExecApprovalRequest | ApplyPatchApprovalRequest
    ) -> None:
        params: dict[str, Any] = {
            "threadId": self.id,
            "turnId": turn_id,
            "itemId": msg.call_id,
            "startedAtMs": now_ms(),
            "reason": msg.reason,
        }
        if isinstance(msg, ExecApprovalRequest):
            method = "item/commandExecution/requestApproval"
            text = command_text(msg.command)
            params |= {
                "command": text,
                "cwd": msg.cwd,
                "commandActions": [{"type": "unknown", "command": text}],
            }
        else:
            method = "item/fileChange/requestApproval"
            params["grantRoot"] = None
        decision: ReviewDecision = "abort"
        rid: Any = None
        try:
            rid, answer = await self.client.request(method, params)
            decision = _decision(answer)
        except ConnectionError:
            # The client went: the request stays waiting, for the client that resumes
            # the thread (ask_waiting) or the session's end.
            log.info("approval not answered: the client went", thread_id=self.id)
            return
        except AppError as exc:
            log.info("approval not answered: aborting the call", error=str(exc))
        op = (
            ExecApproval(msg.call_id, decision)
            if isinstance(msg, ExecApprovalRequest)
            else PatchApproval(msg.call_id, decision)
        )
        notes: list[Note] = []
        if decision in ("denied", "abort"):
            notes += self.mapper.decline(turn_id, msg.call_id)
        if rid is not None:
            notes.append(("serverRequest/resolved", {"threadId": self.id, "requestId": rid}))
        try:
            await self.submit(op)
            await self.client.notify(notes)
        except (AppError, ConnectionError) as exc:
            log.info("approval not delivered", error=str(exc))

    async def aclose(self, *, end: bool) -> None:
        """The connection is over: end the session (stdio) or leave it running (detach)."""
        for task in list(self._asking):
            task.cancel()
        await self.tool_calls.aclose()
        if end:
            self.attachment.session.host.end_session(self.attachment.session_id)
            await asyncio.wait({self.follower}, timeout=30)
        else:
            self.attachment.detach()
        self.follower.cancel()
        await asyncio.gather(self.follower, *self._asking, return_exceptions=True)


def _decision(answer: Response) -> ReviewDecision:
    """The client's decision, or abort (told why in the log) when it is not one."""
    if answer.error is not None:
        raise AppError(INTERNAL_ERROR, f"the client answered with an error: {answer.error}")
    result = answer.result
    decision = result.get("decision") if isinstance(result, dict) else None
    if isinstance(decision, str) and decision in EXEC_DECISIONS:
        return EXEC_DECISIONS[decision]
    if isinstance(decision, dict) and "acceptWithExecpolicyAmendment" in decision:
        return "approved"
    raise AppError(INTERNAL_ERROR, f"not an approval decision: {decision!r}")
