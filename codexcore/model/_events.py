"""Typed stream events: what the engine consumes instead of raw SSE JSON."""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs

from ..protocol._value import Value

__all__ = [
    "Completed",
    "FunctionCallArgumentsDelta",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputTextDelta",
    "ReasoningSummaryDelta",
    "RefusalDelta",
    "ResponseCreated",
    "RetryScheduled",
    "StreamEvent",
    "Usage",
]


@attrs.frozen(repr=False, eq=False)
class ResponseCreated(Value):
    """The server accepted the request and started response ``response_id``."""

    response_id: str


@attrs.frozen(repr=False, eq=False)
class OutputItemAdded(Value):
    """An output item started; ``item`` is the raw Responses item, possibly partial."""

    item: dict[str, Any]


@attrs.frozen(repr=False, eq=False)
class OutputItemDone(Value):
    """An output item is final.

    ``item`` is the raw Responses output item: ``{"type": "message", ...}``,
    ``{"type": "reasoning", ...}``, ``{"type": "function_call", "name",
    "arguments", "call_id", ...}`` or any other type the server sends.
    """

    item: dict[str, Any]


# Deltas are dict-backed rather than slotted: frozen attrs builds those about
# twice as fast, and one is built per streamed token.
@attrs.frozen(slots=False, repr=False, eq=False)
class OutputTextDelta(Value):
    """More assistant text for the message item ``item_id``."""

    item_id: str
    delta: str


@attrs.frozen(slots=False, repr=False, eq=False)
class RefusalDelta(Value):
    """More of the model's refusal, streamed in place of an answer, for the message ``item_id``.

    The message item then holds a ``{"type": "refusal", "refusal": ...}`` part.
    """

    item_id: str
    delta: str


@attrs.frozen(slots=False, repr=False, eq=False)
class ReasoningSummaryDelta(Value):
    """More reasoning-summary text for the reasoning item ``item_id``."""

    item_id: str
    delta: str


@attrs.frozen(slots=False, repr=False, eq=False)
class FunctionCallArgumentsDelta(Value):
    """More JSON text of the arguments of the function-call item ``item_id``."""

    item_id: str
    delta: str


@attrs.frozen(repr=False, eq=False)
class Usage(Value):
    """Token accounting of one response; counts the server left out are 0."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0


@attrs.frozen(repr=False, eq=False)
class Completed(Value):
    """The response finished; always the last event of a successful stream.

    ``output`` holds the response's output items as ``response.completed``
    listed them (the client has already yielded those the stream did not
    finish as ``OutputItemDone``).
    """

    response_id: str
    usage: Usage | None = None
    output: tuple[dict[str, Any], ...] = ()


@attrs.frozen(repr=False, eq=False)
class RetryScheduled(Value):
    """The attempt failed in a way worth retrying; the client retries after ``delay`` s.

    Sent before the client sleeps. ``attempt`` numbers the retries from 1 and
    the request is sent at most ``max_attempts`` times in all, so the last
    retry has ``attempt == max_attempts - 1``. ``reason`` says what went wrong.
    The retry starts a fresh response: the consumer drops whatever it built
    from the failed attempt's events.
    """

    attempt: int
    max_attempts: int
    delay: float
    reason: str


StreamEvent: TypeAlias = (
    ResponseCreated
    | OutputItemAdded
    | OutputItemDone
    | OutputTextDelta
    | RefusalDelta
    | ReasoningSummaryDelta
    | FunctionCallArgumentsDelta
    | Completed
    | RetryScheduled
)
"""Everything ``ModelClient.stream`` yields."""
