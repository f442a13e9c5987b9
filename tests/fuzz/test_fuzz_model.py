"""Fuzz: the model stream's SSE decoder and the Responses event decoder.

Contracts (from the docstrings): ``SSEDecoder`` takes any bytes, split anywhere,
and gives the events the WHATWG event-stream rules give for the whole body (it
never raises); ``feed_raw`` gives each of those events' ``(event, data)``.
``decode_data`` returns a typed event or None, and raises only ``RetryableError``
(a broken event, a transient failure) or ``ModelError`` (the response failed).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from codexcore.model._errors import ModelError, RetryableError
from codexcore.model._events import (
    Completed,
    FunctionCallArgumentsDelta,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    ResponseCreated,
)
from codexcore.model._sse import ServerSentEvent, SSEDecoder
from codexcore.model._wire import decode_data

from . import strategies as s
from .conftest import attempt, fuzz

_USAGE = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 2},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 1},
    "total_tokens": 15,
}
_MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
}
_CALL = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "shell", "arguments": "{}"}
PAYLOADS: list[dict[str, Any]] = [
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0, "item": _MESSAGE},
    {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hi"},
    {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "delta": "So"},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"a'},
    {"type": "response.output_item.done", "output_index": 1, "item": _CALL},
    {"type": "response.completed", "response": {"id": "resp_1", "usage": _USAGE}},
    {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "x"}}},
    {
        "type": "response.failed",
        "response": {"error": {"code": "rate_limit_exceeded", "message": "try again in 20ms"}},
    },
    {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_tokens"}}},
    {"type": "error", "code": "invalid_prompt", "message": "no"},
    {"type": "error", "error": {"code": "server_error", "message": "Please try again in 1.5s."}},
    {"type": "response.in_progress", "response": {"id": "resp_1"}},
]
_TYPES = sorted({str(p["type"]) for p in PAYLOADS} | {"message", ""})
_STREAM_EVENTS = (
    ResponseCreated,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    FunctionCallArgumentsDelta,
    Completed,
)
_PAYLOAD = st.sampled_from(PAYLOADS)


# --- the Responses event decoder ------------------------------------------------------------


@given(
    st.sampled_from(_TYPES) | s.ANY_JSON.map(str),
    st.one_of(
        _PAYLOAD.map(orjson.dumps),
        _PAYLOAD.flatmap(s.mutated).map(s.dumps),
        _PAYLOAD.map(orjson.dumps).flatmap(s.mangled),
    ).map(lambda data: data.decode("utf-8", "replace")),
)
@fuzz(10_000)
def test_decode_data_raises_only_model_errors(event: str, data: str) -> None:
    decoded, error = attempt(lambda: decode_data(event, data), RetryableError, ModelError)
    if error is not None:
        assert str(error)
    else:
        assert decoded is None or isinstance(decoded, _STREAM_EVENTS)


# --- the SSE decoder ------------------------------------------------------------------------


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    """A Responses-API stream with the SSE framing's optional parts and odd line ends,
    as written, or damaged as bytes."""
    end = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    out = [b"\xef\xbb\xbf"] if draw(st.integers(0, 9)) == 0 else []
    for _ in range(draw(st.integers(0, 5))):
        payload = draw(_PAYLOAD)
        extra = draw(st.sampled_from([b"", b": keep-alive", b"id: 7", b"retry: 10", b"id"]))
        lines = [extra] if extra else []
        if draw(st.booleans()):
            lines.append(b"event: " + str(payload["type"]).encode())
        data = orjson.dumps(payload)
        if draw(st.integers(0, 4)) == 0:  # data split over several lines
            cut = draw(st.integers(0, len(data)))
            lines += [b"data: " + data[:cut], b"data:" + data[cut:]]
        else:
            lines.append(b"data: " + data)
        out.append(b"".join(line + end for line in lines) + end)
    stream = b"".join(out)
    return draw(s.mangled(stream)) if draw(st.booleans()) else stream


_LINE_END = re.compile(r"\r\n|\r|\n")


def reference_events(body: bytes) -> list[ServerSentEvent]:
    """The WHATWG event-stream interpretation, written plainly, for a whole body."""
    text = body.decode("utf-8", "replace").removeprefix("\ufeff")
    lines = _LINE_END.split(text)[:-1]  # the last piece has no line end: never processed
    events: list[ServerSentEvent] = []
    event, last_id, retry = "", None, None
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                events.append(ServerSentEvent(event or "message", "\n".join(data), last_id, retry))
            event, retry = "", None
            data = []
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    return events


@given(sse_streams() | st.binary(max_size=80), st.data())
@fuzz(10_000)
def test_sse_events_are_the_specified_ones_whatever_the_chunking(
    body: bytes, data: st.DataObject
) -> None:
    chunks = data.draw(s.chunked(body))
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    assert events == reference_events(body)
    assert decoder.flush() == []
    raw = SSEDecoder()
    pairs = [pair for chunk in chunks for pair in raw.feed_raw(chunk)]
    assert pairs == [(event.event, event.data) for event in events]


@given(sse_streams(), st.data())
@fuzz(4_000)
def test_streams_decode_to_typed_events_or_model_errors(body: bytes, data: st.DataObject) -> None:
    """What the model client does with a body: SSE events, then typed events."""
    decoder = SSEDecoder()
    for chunk in data.draw(s.chunked(body)):
        for event, payload in decoder.feed_raw(chunk):
            decode = functools.partial(decode_data, event, payload)
            decoded, error = attempt(decode, RetryableError, ModelError)
            assert error is not None or decoded is None or isinstance(decoded, _STREAM_EVENTS)
