"""The scripts of :mod:`codexcore.testing`: steps, replies and the builders of replies.

A :class:`ScriptedResponse` is a status, headers and a body as steps (chunks,
``Pause``, ``Hang``); the builders write realistic Responses-API SSE streams.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import attrs
import orjson

from codexcore.model import Usage

# --- scripts ---------------------------------------------------------------------------


@attrs.frozen
class Pause:
    """Step: send nothing for ``seconds``, then go on."""

    seconds: float


@attrs.frozen
class Hang:
    """Step: send nothing more, until the client goes away or the server stops."""


Step: TypeAlias = bytes | Pause | Hang
"""One step of a scripted body: a chunk to send as it is, or a ``Pause``/``Hang``."""


def _to_steps(steps: Iterable[Step]) -> tuple[Step, ...]:
    return tuple(steps)


def _to_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    return tuple(headers.items() if isinstance(headers, Mapping) else headers)


_SSE_HEADERS = {"content-type": "text/event-stream"}
JSON_HEADERS = {"content-type": "application/json"}


@attrs.frozen
class ScriptedResponse:
    """One scripted HTTP reply: a status, headers, and the body as steps.

    Each ``bytes`` step is sent as one chunk, as soon as the one before it is
    out. A body may end without ``response.completed`` (see ``truncated``).
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = attrs.field(default=_SSE_HEADERS, converter=_to_headers)
    steps: tuple[Step, ...] = attrs.field(default=(), converter=_to_steps)


def sse_event(payload: Mapping[str, Any]) -> bytes:
    """``payload`` framed as one SSE event, named after its ``type``."""
    data = orjson.dumps(payload if isinstance(payload, dict) else dict(payload))
    return b"event: " + str(payload["type"]).encode() + b"\ndata: " + data + b"\n\n"


_DEFAULT_USAGE = Usage(
    input_tokens=120,
    cached_input_tokens=0,
    output_tokens=30,
    reasoning_output_tokens=0,
    total_tokens=150,
)


def text_response(
    text: str,
    *,
    response_id: str | None = None,
    chunks: int = 3,
    reasoning: str | None = None,
    usage: Usage | None = _DEFAULT_USAGE,
) -> ScriptedResponse:
    """An assistant message streamed as ``chunks`` text deltas.

    With ``reasoning``, a reasoning item whose summary streams first. ``usage``
    goes into ``response.completed`` (None sends ``"usage": null``).
    """
    stream = _Stream(response_id)
    stream.created()
    if reasoning is not None:
        stream.reasoning(reasoning, chunks)
    stream.message(text, chunks)
    stream.completed(usage)
    return stream.build()


def function_call_response(
    name: str,
    arguments: Mapping[str, Any] | str,
    *,
    call_id: str | None = None,
    text: str | None = None,
    response_id: str | None = None,
    usage: Usage | None = _DEFAULT_USAGE,
) -> ScriptedResponse:
    """A call of function tool ``name``; ``arguments`` is JSON text or a mapping to encode.

    With ``text``, an assistant message comes before the call.
    """
    encoded = arguments if isinstance(arguments, str) else orjson.dumps(dict(arguments)).decode()
    stream = _Stream(response_id)
    stream.created()
    if text is not None:
        stream.message(text, 1)
    stream.function_call(name, encoded, call_id or _new_id("call"))
    stream.completed(usage)
    return stream.build()


def shell_call(
    argv: Iterable[str],
    *,
    call_id: str | None = None,
    workdir: str | None = None,
    timeout_ms: int | None = None,
    text: str | None = None,
    response_id: str | None = None,
    **extra: Any,
) -> ScriptedResponse:
    """A call of the ``shell`` tool with ``{"command": argv, "workdir", "timeout_ms", **extra}``.

    ``workdir`` and ``timeout_ms`` are left out when None; ``extra`` holds any
    further arguments (``with_escalated_permissions=True``, say). ``text`` and
    ``response_id`` are as for ``function_call_response``.
    """
    arguments: dict[str, Any] = {"command": list(argv)}
    if workdir is not None:
        arguments["workdir"] = workdir
    if timeout_ms is not None:
        arguments["timeout_ms"] = timeout_ms
    arguments.update(extra)
    return function_call_response(
        "shell", arguments, call_id=call_id, text=text, response_id=response_id
    )


def failed_response(code: str, message: str, *, response_id: str | None = None) -> ScriptedResponse:
    """A stream that starts, then reports ``response.failed`` with ``error {code, message}``."""
    stream = _Stream(response_id)
    stream.created()
    stream.finish("failed", error={"code": code, "message": message})
    return stream.build()


def incomplete_response(
    reason: str = "max_output_tokens", *, text: str | None = None, response_id: str | None = None
) -> ScriptedResponse:
    """A stream that ends in ``response.incomplete`` for ``reason``, after optional ``text``."""
    stream = _Stream(response_id)
    stream.created()
    if text is not None:
        stream.message(text, 1)
    stream.finish("incomplete", incomplete_details={"reason": reason})
    return stream.build()


def http_error(
    status: int,
    body: Mapping[str, Any] | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ScriptedResponse:
    """A plain HTTP error reply, e.g. ``http_error(429, headers={"Retry-After": "1"})``.

    A mapping body is sent as JSON, a string as text; by default the body is
    ``{"error": {"message": "scripted HTTP <status>", ...}}``.
    """
    if body is None:
        body = {"error": {"message": f"scripted HTTP {status}", "type": "scripted", "code": None}}
    if isinstance(body, str):
        content, kind = body.encode(), {"content-type": "text/plain; charset=utf-8"}
    else:
        content, kind = orjson.dumps(dict(body)), JSON_HEADERS
    return ScriptedResponse(status, {**kind, **(headers or {})}, (content,))


def truncated(response: ScriptedResponse, *, keep: int | None = None) -> ScriptedResponse:
    """``response`` with its body cut short, as when the connection drops mid-stream.

    By default the body stops right after its first delta event (so a client
    has started showing output), or, without deltas, just before the event
    that ends the response. With ``keep``, only the first ``keep`` steps are sent.
    """
    steps = response.steps
    return attrs.evolve(response, steps=steps[: _cut_point(steps) if keep is None else keep])


def idle(response: ScriptedResponse, *, keep: int | None = None) -> ScriptedResponse:
    """``truncated(response, keep=keep)``, then a ``Hang`` instead of the end of the body."""
    cut = truncated(response, keep=keep)
    return attrs.evolve(cut, steps=(*cut.steps, Hang()))


_FINAL_EVENTS = (b"response.completed", b"response.failed", b"response.incomplete")


def _cut_point(steps: tuple[Step, ...]) -> int:
    names = [_event_name(step) for step in steps]
    for index, name in enumerate(names):
        if name.endswith(b".delta"):
            return index + 1
    for index, name in enumerate(names):
        if name in _FINAL_EVENTS:
            return index
    return len(steps)


def _event_name(step: Step) -> bytes:
    """The event type a step built by ``sse_event`` carries; b"" for anything else."""
    if not isinstance(step, bytes) or not step.startswith(b"event: "):
        return b""
    return step[7:].partition(b"\n")[0]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _split(text: str, parts: int) -> list[str]:
    """``text`` in ``parts`` pieces of near-equal length (fewer if it is shorter)."""
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), parts)
    pieces, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_output_tokens},
        "total_tokens": usage.total_tokens,
    }


class _Stream:
    """Writes the events of one response, numbering them as the real API does."""

    def __init__(self, response_id: str | None) -> None:
        self._id = response_id or _new_id("resp")
        self._created_at = int(time.time())
        self._steps: list[Step] = []
        self._output: list[dict[str, Any]] = []
        self._sequence = 0

    def build(self) -> ScriptedResponse:
        return ScriptedResponse(steps=self._steps)

    def emit(self, kind: str, **fields: Any) -> None:
        self._steps.append(sse_event({"type": kind, "sequence_number": self._sequence, **fields}))
        self._sequence += 1

    def response(self, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": "scripted",
            "output": list(self._output),
            "usage": None,
            **fields,
        }

    def created(self) -> None:
        self.emit("response.created", response=self.response("in_progress"))
        self.emit("response.in_progress", response=self.response("in_progress"))

    def completed(self, usage: Usage | None) -> None:
        self.finish("completed", usage=None if usage is None else _usage_json(usage))

    def finish(self, status: str, **fields: Any) -> None:
        self.emit(f"response.{status}", response=self.response(status, **fields))

    def message(self, text: str, chunks: int) -> None:
        index, item_id = len(self._output), _new_id("msg")
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        item = {"id": item_id, "type": "message", "role": "assistant"}
        self.emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        part = {"type": "output_text", "text": "", "annotations": []}
        self.emit("response.content_part.added", **where, part=part)
        for delta in _split(text, chunks):
            self.emit("response.output_text.delta", **where, delta=delta, logprobs=[])
        self.emit("response.output_text.done", **where, text=text, logprobs=[])
        self.emit("response.content_part.done", **where, part={**part, "text": text})
        self._item_done(index, {**item, "status": "completed", "content": [{**part, "text": text}]})

    def reasoning(self, summary: str, chunks: int) -> None:
        index, item_id = len(self._output), _new_id("rs")
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        item = {"id": item_id, "type": "reasoning"}
        self.emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        part = {"type": "summary_text", "text": ""}
        self.emit("response.reasoning_summary_part.added", **where, part=part)
        for delta in _split(summary, chunks):
            self.emit("response.reasoning_summary_text.delta", **where, delta=delta)
        self.emit("response.reasoning_summary_text.done", **where, text=summary)
        self.emit("response.reasoning_summary_part.done", **where, part={**part, "text": summary})
        self._item_done(index, {**item, "summary": [{**part, "text": summary}]})

    def function_call(self, name: str, arguments: str, call_id: str) -> None:
        index, item_id = len(self._output), _new_id("fc")
        where = {"item_id": item_id, "output_index": index}
        item = {"id": item_id, "type": "function_call", "name": name, "call_id": call_id}
        self.emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "arguments": ""},
        )
        for delta in _split(arguments, 2):
            self.emit("response.function_call_arguments.delta", **where, delta=delta)
        self.emit("response.function_call_arguments.done", **where, arguments=arguments)
        self._item_done(index, {**item, "status": "completed", "arguments": arguments})

    def _item_done(self, index: int, item: dict[str, Any]) -> None:
        self.emit("response.output_item.done", output_index=index, item=item)
        self._output.append(item)
