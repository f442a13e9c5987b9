"""The Copilot-CLI-style chat protocol on the JSON-RPC dialect: ``chat`` with its
``stream/chunk`` notifications, and ``exit``; ``generate`` and ``customize`` are in
:mod:`._generate`, the queue they share in :mod:`._jobs`.

The protocol is a desktop app driving a CLI child over stdio. Its methods map
onto the engine as follows (``docs/jsonrpc.md`` says the same for clients):

=============  ================================================================
protocol       engine
=============  ================================================================
``chat``       one ``user_input`` Task on the connection's session; one at a
               time per connection, in the order they came (a request sent
               while another runs waits its turn, and counts as pending)
stream/chunk   each ``agent_message_delta`` of that Task, in order, ``index``
               from 0; ``"\\n\\n"`` between two agent messages; a last chunk
               ``""`` with ``done: true`` once the Task has ended (none at all
               when ``initialize`` said ``capabilities.streaming: false``)
result         ``{message: task_complete.last_agent_message, suggestions: []}``
errors         ``turn_aborted`` and ``error`` -> -32000 (-32003 when the input
               exceeds the context window, -32603 for the engine's
               ``internal``), after the ``done`` chunk
approvals      the session's policy decides; what it would ask a user is
               denied (the protocol has no confirm request), the model is told why
``exit``       queued requests are answered -32000, the running one is
               interrupted, then the session is shut down (the stdio server
               exits 0)
=============  ================================================================
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from codexcore.adapters.jsonrpc._errors import SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import INVALID_REQUEST, Id, RpcError
from codexcore.adapters.jsonrpc._methods import MethodTable
from codexcore.adapters.jsonrpc._schemas import CHAT_RESULT, CHUNK
from codexcore.adapters.jsonrpc._server import RpcContext, current_call
from codexcore.protocol import (
    EventMsg,
    TaskComplete,
    TextInput,
    UserInput,
)
from codexcore.protocol._wire import Tagged

from ._deltas import _DELTA_LAYOUT, _DELTA_MIDDLE, _DONE, _NOT_DONE, _json
from ._generate import CONTEXT_TOO_LARGE, register_generation
from ._jobs import NO_APPROVER, Job, job_key, jobs_of, task_error

__all__ = ["NO_APPROVER", "SEPARATOR", "ChatJob", "register"]

CHAT_FAILED = SERVER_ERROR
"""A chat whose Task did not complete (the protocol's -32000, its generic failure code)."""

SEPARATOR = "\n\n"
"""Streamed between two agent messages of one Task, so the chunks read as text."""


@attrs.frozen
class ChatParams:
    """``chat``: ``{message, context?}``. ``context`` (the app's tab state) is accepted
    and not given to the model: it describes the app's UI, of which the engine knows nothing."""

    message: str
    context: dict[str, Any] | None = None


_SEPARATOR_JSON = _json(SEPARATOR)


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


class ChatJob(Job):
    """A ``chat``: one ``user_input`` Task, its text streamed as it comes (:class:`_Chat`).

    A retry of the same chat joins it: the joining request gets the text so far as
    one chunk, then every chunk under its own ``requestId`` (a :class:`_Chat` of its
    own, fed the same events). The first request's chunks are kept until the Task
    ends, for such a catch-up.
    """

    kind = "chat"

    def __init__(self, request_id: Id, message: str, *, quiet: bool, key: bytes) -> None:
        super().__init__(request_id, quiet=quiet, key=key)
        self.text = message
        self.stream: _Chat | None = None
        self.sent: list[bytes] = []  # the first request's chunk lines
        self.first_left = False  # the first request was cancelled; others wait
        self.others: dict[Id, _Chat] = {}

    def ops(self) -> list[Tagged]:
        # The requests waiting now: the first streams as usual, retries that joined
        # while the chat was queued each get a stream of their own.
        first, *others = self.requests
        self.stream = _Chat(first, self.sub_id)
        self.others = {request_id: _Chat(request_id, self.sub_id) for request_id in others}
        return [UserInput((TextInput(self.text),))]

    def _all(self) -> list[_Chat]:
        assert self.stream is not None
        return [self.stream, *self.others.values()]

    def _keep(self, mine: list[bytes], into: list[bytes]) -> None:
        self.sent += mine
        if not self.first_left:
            into += mine

    def take_deltas(self, batch: list[bytes], start: int, into: list[bytes]) -> int:
        assert self.stream is not None
        mine: list[bytes] = []
        at = self.stream.take_deltas(batch, start, mine)
        self._keep(mine, into)
        for other in self.others.values():
            other.take_deltas(batch, start, into)
        return at

    def delta(self, text: str, into: list[bytes]) -> None:
        mine: list[bytes] = []
        for n, stream in enumerate(self._all()):
            stream.streamed = True
            stream.lines(_json(text), mine if n == 0 else into)
        self._keep(mine, into)

    def message(self, text: str, into: list[bytes]) -> None:
        mine: list[bytes] = []
        for n, stream in enumerate(self._all()):
            if not stream.streamed:  # a message that came whole, without deltas
                stream.lines(_json(text), mine if n == 0 else into)
            stream.streamed, stream.between = False, True
        self._keep(mine, into)

    def end(self, msg: EventMsg, into: list[bytes]) -> None:
        streams = self._all()
        if self.first_left:
            streams = streams[1:]
        into += [stream.line(b'""', done=True) for stream in streams]

    def joined(self, request_id: Id, into: list[bytes]) -> None:
        if self.stream is None:  # still queued: it starts with its stream (ops)
            return
        other = _Chat(request_id, self.sub_id)
        other.streamed, other.between = self.stream.streamed, self.stream.between
        head = len(self.stream.line_head)
        texts = [line[head : line.rindex(b',"done":')] for line in self.sent]
        so_far = "".join(orjson.loads(text) for text in texts)
        if so_far:
            into.append(other.line(_json(so_far)))
        self.others[request_id] = other

    def left(self, request_id: Id) -> None:
        if self.stream is None:  # still queued: the requests left are those it starts with
            return
        if self.others.pop(request_id, None) is None:
            self.first_left = True

    def answer(self, msg: EventMsg) -> dict[str, Any]:
        return _answer(msg)


def _answer(msg: EventMsg) -> dict[str, Any]:
    """The chat's result, from its Task's terminal event; raises its error."""
    if isinstance(msg, TaskComplete):
        return {"message": msg.last_agent_message or "", "suggestions": []}
    raise task_error(msg, CHAT_FAILED, "chat")


async def chat(ctx: RpcContext, params: ChatParams) -> dict[str, Any]:
    """``chat``: one Task; its text streamed as ``stream/chunk``; then the result."""
    call = current_call()
    if call.notification:
        raise RpcError(
            INVALID_REQUEST, "Invalid Request: chat needs an id (its answer is a response)"
        )
    jobs = jobs_of(ctx)
    job = ChatJob(call.id, params.message, quiet=not jobs.streaming, key=job_key("chat"))
    return await jobs.run(call.id, job)


async def exit_(ctx: RpcContext, params: dict[str, Any]) -> None:
    """The ``exit`` notification. Sent as a request, it is answered ``null``
    once the requests are answered, as the session's shutdown begins."""
    await jobs_of(ctx).exit()


def register(table: MethodTable) -> None:
    """Add the Copilot-CLI-style chat protocol's methods to ``table``."""
    table.add(
        "chat",
        chat,
        ChatParams,
        summary="Run one Task; its text streams as stream/chunk, then this answers",
        result=CHAT_RESULT,
        notifications=("stream/chunk",),
        errors=(CHAT_FAILED, CONTEXT_TOO_LARGE),
    )
    table.add(
        "exit",
        exit_,
        dict,
        bounded=False,
        summary="(A notification) answer every request, then end the session and a stdio server",
        result={"type": "null"},
    )
    table.sends("stream/chunk", "Copilot-CLI-style chat: a piece of a chat's text, in order", CHUNK)
    register_generation(table)
