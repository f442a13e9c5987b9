"""Streaming client for the OpenAI Responses API, and the typed events it yields.

``ModelClient`` (and with it httpx) is imported on first use, so importing
this package for its event types stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import ModelError
from ._events import (
    Completed,
    FunctionCallArgumentsDelta,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    ResponseCreated,
    RetryScheduled,
    StreamEvent,
    Usage,
)
from ._retry import RetryPolicy
from ._sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    from ._client import ModelClient

__all__ = [
    "Completed",
    "FunctionCallArgumentsDelta",
    "ModelClient",
    "ModelError",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputTextDelta",
    "ReasoningSummaryDelta",
    "RefusalDelta",
    "ResponseCreated",
    "RetryPolicy",
    "RetryScheduled",
    "SSEDecoder",
    "ServerSentEvent",
    "StreamEvent",
    "Usage",
]


def __getattr__(name: str) -> Any:
    if name == "ModelClient":
        from ._client import ModelClient

        return ModelClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
