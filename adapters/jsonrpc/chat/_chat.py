"""Seed 001 on the JSON-RPC dialect: ``chat`` with its ``stream/chunk`` notifications, and ``exit``.

Seed 001 is a desktop app driving a CLI child over stdio. Its methods map
onto the engine as follows (``docs/jsonrpc.md``, "Seed 001", says the same for
clients):

=============  ================================================================
seed 001       engine
=============  ================================================================
``chat``       one ``user_input`` Task on the connection's session; one at a
               time per connection, in the order they came (a chat sent while
               another runs waits its turn, and counts as pending meanwhile)
stream/chunk   each ``agent_message_delta`` of that Task, in order, ``index``
               from 0; ``"\\n\\n"`` between two agent messages; a last chunk
               ``""`` with ``done: true`` once the Task has ended
result         ``{message: task_complete.last_agent_message, suggestions: []}``
errors         ``turn_aborted`` and ``error`` -> -32000 (-32603 for the
               engine's ``internal``), after the ``done`` chunk
approvals      the session's policy decides; what it would ask a user is
               denied (the seed has no confirm request), the model is told why
``exit``       queued chats are answered -32000, the running one is
               interrupted, then the session is shut down (the stdio server
               exits 0)
=============  ================================================================

``generate`` and ``customize`` (code generation from an API spec) have no
counterpart in the engine: they stay unregistered, so they answer -32601 and
``initialize`` reports ``codeGeneration`` and ``customization`` false.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import weakref
from typing import Any

import attrs
import orjson

from codexcore._logging import get_logger
from codexcore.adapters.host._host import Attachment, NotAccepted
from codexcore.adapters.jsonrpc._errors import SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import INTERNAL_ERROR, INVALID_REQUEST, Id, RpcError
from codexcore.adapters.jsonrpc._methods import MethodTable
from codexcore.adapters.jsonrpc._schemas import CHAT_RESULT, CHUNK
from codexcore.adapters.jsonrpc._server import RpcContext, current_call
from codexcore.protocol import (
    AgentMessage,
    AgentMessageDelta,
    ApplyPatchApprovalRequest,
    ErrorEvent,
    Event,
    EventMsg,
    ExecApproval,
    ExecApprovalRequest,
    Interrupt,
    PatchApproval,
    Submission,
    TaskComplete,
    TextInput,
    TurnAborted,
    UserInput,
    decode_event,
)

log = get_logger(__name__)

CHAT_FAILED = SERVER_ERROR
"""A chat whose Task did not complete (seed 001's -32000, its generic failure code)."""

NO_APPROVER = (
    "nobody can approve this: the client (the Copilot-CLI-style chat) has no approval dialog, "
    "and the approval policy asks for it"
)
"""The reason a denied approval carries: the model is told it, as a user's reason."""

_WANTED = frozenset(
    msg.TYPE
    for msg in (
        AgentMessage,
        TaskComplete,
        TurnAborted,
        ErrorEvent,
        ExecApprovalRequest,
        ApplyPatchApprovalRequest,
    )
)
"""The events of a chat's Task that matter to it, besides its deltas."""

SEPARATOR = "\n\n"
"""Streamed between two agent messages of one Task, so the chunks read as text."""


@attrs.frozen
class ChatParams:
    """``chat``: ``{message, context?}``. ``context`` (the app's tab state) is accepted
    and not given to the model: it describes the app's UI, of which the engine knows nothing."""

    message: str
    context: dict[str, Any] | None = None


def _json(value: Any) -> bytes:
    """``value`` as JSON (an id beyond 64 bits too, digit for digit)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False).encode()


_DELTA_LAYOUT = [f.name for f in attrs.fields(Event)] == ["id", "seq", "msg"] and [
    f.name for f in attrs.fields(AgentMessageDelta)
] == ["delta"]
"""Whether a delta event's encoding ends with its text (``..."delta":"TEXT"}}``), which
:meth:`_Chat.take_deltas` reads without parsing. It holds while the envelope's last field
is ``msg`` and a delta's only field is ``delta``; if it ever fails, deltas are parsed."""

_DELTA_MIDDLE = b',"msg":{"type":"' + AgentMessageDelta.TYPE.encode() + b'","delta":'
_SEPARATOR_JSON = _json(SEPARATOR)
_NOT_DONE = b',"done":false,"index":%d}}\n'
_DONE = b',"done":true,"index":%d}}\n'


class _Chat:
    """One chat's Task: its request id, its submission id, where its stream stands, and
    its ``stream/chunk`` lines, encoded (a chat of many deltas spends its time here)."""

    __slots__ = (
        "between",
        "event_head",
        "inbox",
        "index",
        "line_head",
        "request_id",
        "streamed",
        "sub_id",
    )

    def __init__(self, request_id: Id, sub_id: str) -> None:
        self.request_id = request_id
        self.sub_id = sub_id
        self.index = 0
        self.streamed = False  # a delta of the current agent message was sent
        self.between = False  # an agent message ended; a separator precedes the next text
        self.inbox: asyncio.Queue[EventMsg] = asyncio.Queue()
        self.event_head = b'{"id":' + _json(sub_id) + b',"seq":'
        params = b'"params":{"requestId":' + _json(request_id) + b',"chunk":'
        self.line_head = b'{"jsonrpc":"2.0","method":"stream/chunk",' + params

    def take_deltas(self, batch: list[bytes], start: int, into: list[bytes]) -> int:
        """Add the chunks of the run of this Task's ``agent_message_delta`` events at
        ``batch[start:]`` to ``into``; the index of the first event after the run.

        The hot path of a chat, so nothing is parsed or built: each delta's text is
        cut, as a JSON string, from its event's encoding (``..."delta":"TEXT"}}``,
        see :data:`_DELTA_LAYOUT`) and put into the chunk's line as it is.
        """
        if not _DELTA_LAYOUT:
            return start
        head, line_head = self.event_head, self.line_head
        after_head, after_middle = len(head), len(_DELTA_MIDDLE)
        index = self.index
        end = len(batch)
        at = start
        while at < end:
            data = batch[at]
            if not data.startswith(head):
                break
            middle = data.find(_DELTA_MIDDLE, after_head)
            if middle < 0 or not data[after_head:middle].isdigit():
                break
            at += 1
            text = data[middle + after_middle : -2]
            if text == b'""':
                continue
            if self.between:
                self.between = False
                into.append(line_head + _SEPARATOR_JSON + _NOT_DONE % index)
                index += 1
            into.append(line_head + text + _NOT_DONE % index)
            index += 1
        if at > start:
            self.streamed = True
        self.index = index
        return at

    def lines(self, text: bytes, into: list[bytes]) -> None:
        """Add the chunk of ``text`` (a JSON string) to ``into``: after a separator when an
        agent message ended before it; nothing for an empty text."""
        if text == b'""':
            return
        if self.between:
            self.between = False
            into.append(self.line(_SEPARATOR_JSON))
        into.append(self.line(text))

    def line(self, text: bytes, *, done: bool = False) -> bytes:
        """The next ``stream/chunk`` notification (``index`` counts from 0, without gaps)."""
        index = self.index
        self.index = index + 1
        return self.line_head + text + (_DONE if done else _NOT_DONE) % index


class Chats:
    """A connection's chats: one Task at a time, in arrival order (``asyncio.Lock`` is FIFO,
    and each call's task reaches the lock in the order the calls were read)."""

    def __init__(self, ctx: RpcContext) -> None:
        # Weak: the connection's table of chats (_CHATS) must not keep its context alive.
        self._ctx = weakref.ref(ctx)
        self.turn = asyncio.Lock()
        self.current: _Chat | None = None
        self.attachment: Attachment | None = None
        self.exiting = False
        self.active = 0  # chats inside their handler, queued or running
        self.idle = asyncio.Event()
        self.idle.set()
        self._ids = itertools.count(1)

    @property
    def ctx(self) -> RpcContext:
        ctx = self._ctx()
        if ctx is None:  # only a handler or a listener asks, and their connection holds it
            raise RuntimeError("the connection of these chats is gone")
        return ctx

    async def run(self, request_id: Id, message: str) -> dict[str, Any]:
        self.active += 1
        self.idle.clear()
        try:
            async with self.turn:
                self._refuse_if_exiting()
                attachment = await self._session()
                self._refuse_if_exiting()  # exit may have come while the session was made
                chat = _Chat(request_id, f"chat-{next(self._ids)}")
                self.current = chat
                try:
                    return await self._task(chat, attachment, message)
                finally:
                    if self.current is chat:
                        self.current = None
        finally:
            self.active -= 1
            if not self.active:
                self.idle.set()

    def _refuse_if_exiting(self) -> None:
        if self.exiting:
            raise RpcError(
                CHAT_FAILED, "the server is exiting: this chat was not run", {"code": "exiting"}
            )

    async def _session(self) -> Attachment:
        if self.attachment is None:
            self.attachment = await self.ctx.session()
            self.ctx.on_raw_events(self.listen)
        return self.attachment

    async def _task(self, chat: _Chat, attachment: Attachment, message: str) -> dict[str, Any]:
        await self._submit(attachment, chat.sub_id, UserInput((TextInput(message),)))
        while True:
            msg = await chat.inbox.get()
            if isinstance(msg, ExecApprovalRequest | ApplyPatchApprovalRequest):
                await self._deny(attachment, chat, msg)
                continue
            return _answer(msg)

    async def _deny(
        self,
        attachment: Attachment,
        chat: _Chat,
        request: ExecApprovalRequest | ApplyPatchApprovalRequest,
    ) -> None:
        log.info("approval denied: no one to ask", call=request.call_id, dialect="copilot-chat")
        op = (
            ExecApproval(request.call_id, "denied", NO_APPROVER)
            if isinstance(request, ExecApprovalRequest)
            else PatchApproval(request.call_id, "denied", NO_APPROVER)
        )
        await self._submit(attachment, f"{chat.sub_id}-deny-{request.call_id}", op)

    @staticmethod
    async def _submit(attachment: Attachment, sub_id: str, op: Any) -> None:
        try:
            await attachment.submit(Submission(sub_id, op))
        except NotAccepted as exc:
            error = RpcError(CHAT_FAILED, f"the chat failed: {exc.message}", {"code": exc.code})
            raise error from None

    async def listen(self, batch: list[bytes]) -> None:
        """A batch of the session's events (encoded): the running chat's are streamed
        (its deltas as one write) and answered."""
        chat = self.current
        lines: list[bytes] = []
        at = 0
        while chat is not None and at < len(batch):
            at = chat.take_deltas(batch, at, lines)
            if at == len(batch):
                break
            raw = orjson.loads(batch[at])
            at += 1
            if raw["id"] != chat.sub_id:
                continue
            kind = raw["msg"]["type"]
            if kind == AgentMessageDelta.TYPE:  # encoded otherwise than take_deltas knows
                chat.streamed = True
                chat.lines(_json(raw["msg"]["delta"]), lines)
            elif kind in _WANTED:
                await self.ctx.send_lines(lines)  # in order, before what it brings
                lines = []
                await self._event(chat, decode_event(raw).msg)
                chat = self.current
        await self.ctx.send_lines(lines)

    async def _event(self, chat: _Chat, msg: EventMsg) -> None:
        if isinstance(msg, AgentMessage):
            lines: list[bytes] = []
            if not chat.streamed:  # a message that came whole, without deltas
                chat.lines(_json(msg.message), lines)
            chat.streamed, chat.between = False, True
            await self.ctx.send_lines(lines)
        elif isinstance(msg, TaskComplete | TurnAborted | ErrorEvent):
            self.current = None  # nothing more of this Task is streamed
            await self.ctx.send_lines([chat.line(b'""', done=True)])  # before the answer
            chat.inbox.put_nowait(msg)
        else:  # an approval request
            chat.inbox.put_nowait(msg)

    async def exit(self) -> None:
        """Answer every chat (queued: refused; running: interrupted), then end the session."""
        self.exiting = True
        chat, attachment = self.current, self.attachment
        if chat is not None and attachment is not None:
            await self._submit(attachment, f"{chat.sub_id}-exit", Interrupt())
        await self.idle.wait()
        attachment = self.attachment  # a chat may have made the session meanwhile
        if attachment is None:
            log.info("exit: no session to shut down", dialect="copilot-chat")
            self.ctx.over.set()
        else:
            log.info("exit: shutting the session down", session=attachment.session_id)
            self.ctx.host.end_session(attachment.session_id)


def _answer(msg: EventMsg) -> dict[str, Any]:
    """The chat's result, from its Task's terminal event; raises its error."""
    if isinstance(msg, TaskComplete):
        return {"message": msg.last_agent_message or "", "suggestions": []}
    if isinstance(msg, TurnAborted):
        raise RpcError(
            CHAT_FAILED,
            f"the chat was aborted ({msg.reason})",
            {"code": "aborted", "reason": msg.reason},
        )
    assert isinstance(msg, ErrorEvent)
    if msg.code == "internal":
        log.error("chat failed inside the engine", error=msg.message)
        raise RpcError(INTERNAL_ERROR, "Internal error in chat", {"code": msg.code})
    raise RpcError(CHAT_FAILED, f"the chat failed: {msg.message}", {"code": msg.code})


_CHATS: weakref.WeakKeyDictionary[RpcContext, Chats] = weakref.WeakKeyDictionary()


def _chats(ctx: RpcContext) -> Chats:
    chats = _CHATS.get(ctx)
    if chats is None:
        chats = _CHATS[ctx] = Chats(ctx)
    return chats


async def chat(ctx: RpcContext, params: ChatParams) -> dict[str, Any]:
    """Seed 001's ``chat``: one Task; its text streamed as ``stream/chunk``; then the result."""
    call = current_call()
    if call.notification:
        raise RpcError(
            INVALID_REQUEST, "Invalid Request: chat needs an id (its answer is a response)"
        )
    return await _chats(ctx).run(call.id, params.message)


async def exit_(ctx: RpcContext, params: dict[str, Any]) -> None:
    """Seed 001's ``exit`` notification. Sent as a request, it is answered ``null``
    once the chats are answered, as the session's shutdown begins."""
    await _chats(ctx).exit()


def register(table: MethodTable) -> None:
    """Add seed 001's methods to ``table``."""
    table.add(
        "chat",
        chat,
        ChatParams,
        summary="Run one Task; its text streams as stream/chunk, then this answers",
        result=CHAT_RESULT,
        notifications=("stream/chunk",),
        errors=(CHAT_FAILED,),
    )
    table.add(
        "exit",
        exit_,
        dict,
        bounded=False,
        summary="(A notification) answer every chat, then end the session and a stdio server",
        result={"type": "null"},
    )
    table.sends("stream/chunk", "Copilot-CLI-style chat: a piece of a chat's text, in order", CHUNK)
