"""Responses API wire format: one decoded SSE event to one typed stream event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ._errors import ModelError, RetryableError
from ._events import (
    Completed,
    FunctionCallArgumentsDelta,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    ResponseCreated,
    StreamEvent,
    Usage,
)
from ._retry import retry_after_from_message
from ._sse import ServerSentEvent

__all__ = ["TRANSIENT_ERROR_CODES", "decode_data", "decode_event"]

TRANSIENT_ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded"})
"""Server error codes that mean "try again" rather than "this request is wrong"."""

_Payload = dict[str, Any]


def decode_event(sse: ServerSentEvent) -> StreamEvent | None:
    """The typed event ``sse`` carries, or None for a type this client ignores.

    The payload's ``type`` wins over the SSE event name. Raises
    ``RetryableError`` for a broken event (not JSON, a required field missing)
    or a transient failure, and ``ModelError`` when the response failed for good.
    """
    return decode_data(sse.event, sse.data)


def decode_data(event: str, data: str) -> StreamEvent | None:
    """:func:`decode_event` for an event's type and data, with no event object."""
    payload = _load(data)
    kind = payload.get("type")
    if not isinstance(kind, str):
        kind = event
    delta_type = _DELTAS.get(kind)
    if delta_type is not None:
        # The hot path, one per streamed token: inlined rather than dispatched.
        delta = payload.get("delta")
        item_id = payload.get("item_id")
        if isinstance(delta, str) and isinstance(item_id, str):
            return delta_type(item_id, delta)
    handler = _HANDLERS.get(kind)
    return None if handler is None else handler(payload)


def _load(data: str) -> _Payload:
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise RetryableError(
            f"stream sent an event whose data is not JSON: {data[:80]!r}"
        ) from None
    if not isinstance(payload, dict):
        raise RetryableError(f"stream sent an event whose data is not an object: {data[:80]!r}")
    return payload


def _malformed(kind: str, problem: str) -> RetryableError:
    return RetryableError(f"stream sent a malformed {kind!r} event: {problem}")


def _object(payload: _Payload, key: str, kind: str) -> _Payload:
    value = payload.get(key)
    if not isinstance(value, dict):
        raise _malformed(kind, f"{key!r} is missing or not an object")
    return value


def _string(payload: _Payload, key: str, kind: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str):
        raise _malformed(kind, f"{key!r} is missing or not a string")
    return value


def _delta(payload: _Payload, kind: str) -> tuple[str, str]:
    """``(item_id, delta)``: the delta is required; a missing ``item_id`` reads as ""."""
    delta = payload.get("delta")
    if not isinstance(delta, str):
        raise _malformed(kind, "'delta' is missing or not a string")
    item_id = payload.get("item_id")
    return (item_id if isinstance(item_id, str) else ""), delta


def _created(payload: _Payload) -> ResponseCreated:
    kind = "response.created"
    return ResponseCreated(_string(_object(payload, "response", kind), "id", kind))


def _item_added(payload: _Payload) -> OutputItemAdded:
    return OutputItemAdded(_object(payload, "item", "response.output_item.added"))


def _item_done(payload: _Payload) -> OutputItemDone:
    return OutputItemDone(_object(payload, "item", "response.output_item.done"))


def _text_delta(payload: _Payload) -> OutputTextDelta:
    return OutputTextDelta(*_delta(payload, "response.output_text.delta"))


def _refusal_delta(payload: _Payload) -> RefusalDelta:
    return RefusalDelta(*_delta(payload, "response.refusal.delta"))


def _reasoning_delta(payload: _Payload) -> ReasoningSummaryDelta:
    return ReasoningSummaryDelta(*_delta(payload, "response.reasoning_summary_text.delta"))


def _arguments_delta(payload: _Payload) -> FunctionCallArgumentsDelta:
    return FunctionCallArgumentsDelta(*_delta(payload, "response.function_call_arguments.delta"))


def _completed(payload: _Payload) -> Completed:
    kind = "response.completed"
    response = _object(payload, "response", kind)
    usage = response.get("usage")
    output = response.get("output")
    return Completed(
        _string(response, "id", kind),
        _usage(usage) if isinstance(usage, dict) else None,
        tuple(i for i in output if isinstance(i, dict)) if isinstance(output, list) else (),
    )


def _usage(usage: _Payload) -> Usage:
    input_details = usage.get("input_tokens_details")
    output_details = usage.get("output_tokens_details")
    return Usage(
        input_tokens=_count(usage, "input_tokens"),
        cached_input_tokens=_count(input_details, "cached_tokens"),
        output_tokens=_count(usage, "output_tokens"),
        reasoning_output_tokens=_count(output_details, "reasoning_tokens"),
        total_tokens=_count(usage, "total_tokens"),
    )


def _count(container: object, key: str) -> int:
    value = container.get(key) if isinstance(container, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _failed(payload: _Payload) -> StreamEvent:
    error = _object(payload, "response", "response.failed").get("error")
    raise _failure(error if isinstance(error, dict) else {}, "response failed")


def _error(payload: _Payload) -> StreamEvent:
    nested = payload.get("error")  # some servers wrap the fields in an "error" object
    raise _failure(nested if isinstance(nested, dict) else payload, "stream error")


def _failure(error: _Payload, what: str) -> ModelError | RetryableError:
    code = error.get("code") if isinstance(error.get("code"), str) else None
    message = error.get("message") if isinstance(error.get("message"), str) else None
    text = f"{what}: {message or 'no message'}" + (f" ({code})" if code else "")
    if code in TRANSIENT_ERROR_CODES:
        retry_after = retry_after_from_message(message) if message else None
        return RetryableError(text, retry_after=retry_after, server_code=code)
    return ModelError(text, code="response_failed", server_code=code)


def _incomplete(payload: _Payload) -> StreamEvent:
    details = _object(payload, "response", "response.incomplete").get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    reason = reason if isinstance(reason, str) else None
    raise ModelError(
        f"response incomplete: {reason or 'no reason given'}", code="incomplete", server_code=reason
    )


_HANDLERS: dict[str, Callable[[_Payload], StreamEvent]] = {
    "response.created": _created,
    "response.output_item.added": _item_added,
    "response.output_item.done": _item_done,
    "response.output_text.delta": _text_delta,
    "response.refusal.delta": _refusal_delta,
    "response.reasoning_summary_text.delta": _reasoning_delta,
    "response.function_call_arguments.delta": _arguments_delta,
    "response.completed": _completed,
    "response.failed": _failed,
    "response.incomplete": _incomplete,
    "error": _error,
}

_Delta = OutputTextDelta | RefusalDelta | ReasoningSummaryDelta | FunctionCallArgumentsDelta
_DELTAS: dict[str, type[_Delta]] = {
    "response.output_text.delta": OutputTextDelta,
    "response.refusal.delta": RefusalDelta,
    "response.reasoning_summary_text.delta": ReasoningSummaryDelta,
    "response.function_call_arguments.delta": FunctionCallArgumentsDelta,
}
