"""Response streams built from the openai SDK's own event models.

Each event is the SDK's pydantic model, sent as ``model_dump_json()``: the
exact shape (null fields included) a client of the real API sees.
"""

from __future__ import annotations

import itertools
from typing import Any

from openai import BaseModel
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseCustomToolCall,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseRefusalDeltaEvent,
    ResponseRefusalDoneEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from codexcore.testing import ScriptedResponse

__all__ = ["Replay"]

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):04d}"


class Replay:
    """One response as the SDK's events; add items, then :meth:`response`."""

    def __init__(self, response_id: str, model: str = "gpt-5-codex") -> None:
        self.response_id = response_id
        self.model = model
        self._events: list[BaseModel | dict[str, Any]] = []
        self._output: list[Any] = []
        self._sequence = itertools.count()
        self._events.append(
            ResponseCreatedEvent(
                type="response.created",
                sequence_number=next(self._sequence),
                response=self._response("in_progress"),
            )
        )

    def message(self, text: str, *, chunks: int = 3) -> Replay:
        item_id = _id("msg")
        for piece in _split(text, chunks):
            self._add(
                ResponseTextDeltaEvent(
                    type="response.output_text.delta",
                    sequence_number=next(self._sequence),
                    item_id=item_id,
                    output_index=len(self._output),
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            )
        part = ResponseOutputText(type="output_text", text=text, annotations=[])
        return self._item(_message(item_id, part))

    def refusal(self, text: str, *, chunks: int = 3) -> Replay:
        item_id = _id("msg")
        index = len(self._output)
        for piece in _split(text, chunks):
            self._add(
                ResponseRefusalDeltaEvent(
                    type="response.refusal.delta",
                    sequence_number=next(self._sequence),
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                )
            )
        self._add(
            ResponseRefusalDoneEvent(
                type="response.refusal.done",
                sequence_number=next(self._sequence),
                item_id=item_id,
                output_index=index,
                content_index=0,
                refusal=text,
            )
        )
        return self._item(_message(item_id, ResponseOutputRefusal(type="refusal", refusal=text)))

    def reasoning(self, summary: str) -> Replay:
        item_id = _id("rs")
        for piece in _split(summary, 2):
            self._add(
                ResponseReasoningSummaryTextDeltaEvent(
                    type="response.reasoning_summary_text.delta",
                    sequence_number=next(self._sequence),
                    item_id=item_id,
                    output_index=len(self._output),
                    summary_index=0,
                    delta=piece,
                )
            )
        item = ResponseReasoningItem(
            id=item_id,
            type="reasoning",
            summary=[Summary(type="summary_text", text=summary)],
            encrypted_content="gAAAAB-opaque-" + item_id,
        )
        return self._item(item)

    def function_call(self, name: str, arguments: str, call_id: str) -> Replay:
        item_id = _id("fc")
        self._add(
            ResponseFunctionCallArgumentsDeltaEvent(
                type="response.function_call_arguments.delta",
                sequence_number=next(self._sequence),
                item_id=item_id,
                output_index=len(self._output),
                delta=arguments,
            )
        )
        item = ResponseFunctionToolCall(
            id=item_id,
            type="function_call",
            call_id=call_id,
            name=name,
            arguments=arguments,
            status="completed",
        )
        return self._item(item)

    def custom_tool_call(self, name: str, text: str, call_id: str) -> Replay:
        item = ResponseCustomToolCall(
            id=_id("ctc"), type="custom_tool_call", call_id=call_id, name=name, input=text
        )
        return self._item(item)

    def raw_item(self, item: dict[str, Any]) -> Replay:
        """An item of a type the SDK may not know, as raw JSON."""
        return self._item(item)

    def response(self) -> ScriptedResponse:
        """The whole stream, ``response.completed`` last, one SSE event per chunk."""
        completed = ResponseCompletedEvent(
            type="response.completed",
            sequence_number=next(self._sequence),
            response=self._response("completed", usage=True),
        )
        return ScriptedResponse(steps=[_sse(e) for e in [*self._events, completed]])

    def _item(self, item: BaseModel | dict[str, Any]) -> Replay:
        index = len(self._output)
        sequence = self._sequence
        if isinstance(item, BaseModel):
            self._add(
                ResponseOutputItemAddedEvent(
                    type="response.output_item.added",
                    sequence_number=next(sequence),
                    output_index=index,
                    item=item,  # type: ignore[arg-type]
                )
            )
            done: BaseModel | dict[str, Any] = ResponseOutputItemDoneEvent(
                type="response.output_item.done",
                sequence_number=next(sequence),
                output_index=index,
                item=item,  # type: ignore[arg-type]
            )
        else:
            done = {
                "type": "response.output_item.done",
                "sequence_number": next(sequence),
                "output_index": index,
                "item": item,
            }
        self._add(done)
        self._output.append(item)
        return self

    def _add(self, event: BaseModel | dict[str, Any]) -> None:
        self._events.append(event)

    def _response(self, status: str, *, usage: bool = False) -> Response:
        known: list[Any] = [i for i in self._output if isinstance(i, BaseModel)]
        return Response(
            id=self.response_id,
            object="response",
            created_at=1_700_000_000,
            model=self.model,
            status=status,  # type: ignore[arg-type]
            output=known if status == "completed" else [],
            parallel_tool_calls=False,
            tool_choice="auto",
            tools=[],
            usage=_usage() if usage else None,
        )


def _message(item_id: str, part: ResponseOutputText | ResponseOutputRefusal) -> BaseModel:
    return ResponseOutputMessage(
        id=item_id, type="message", role="assistant", status="completed", content=[part]
    )


def _usage() -> ResponseUsage:
    return ResponseUsage(
        input_tokens=100,
        # cache_write_tokens is required by newer SDKs only; extra keys are allowed.
        input_tokens_details=InputTokensDetails.model_validate(
            {"cached_tokens": 20, "cache_write_tokens": 0}
        ),
        output_tokens=40,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=10),
        total_tokens=140,
    )


def _sse(event: BaseModel | dict[str, Any]) -> bytes:
    if isinstance(event, BaseModel):
        kind, data = str(getattr(event, "type")), event.model_dump_json()  # noqa: B009
    else:
        import json

        kind, data = str(event["type"]), json.dumps(event)
    return f"event: {kind}\ndata: {data}\n\n".encode()


def _split(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
