"""A response's ``response.completed`` output is the truth about what it holds.

Some servers stream no ``output_text.delta`` and no ``output_item.done`` and
put the answer in ``response.completed`` alone; the answer must still reach
the user (``agent_message``) and the Task's result (``last_agent_message``),
and a stream that did send its items must not show them twice.
"""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from codexcore.model import Completed, ModelClient, OutputItemDone, StreamEvent
from codexcore.protocol import AgentMessage, AgentMessageDelta, TaskComplete, TextInput, UserInput
from codexcore.testing import ScriptedModel, ScriptedResponse, sse_event, text_response

from .engine_helpers import running_engine

pytestmark = pytest.mark.anyio


def message(text: str, item_id: str | None = "msg_1") -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return item if item_id is None else {"id": item_id, **item}


def completed_only(*output: dict[str, Any], response_id: str = "resp_1") -> ScriptedResponse:
    """A stream whose only content is ``response.completed`` and its output items."""
    response = {"id": response_id, "object": "response", "status": "completed", "usage": None}
    return ScriptedResponse(
        steps=[
            sse_event({"type": "response.created", "response": {**response, "output": []}}),
            sse_event({"type": "response.completed", "response": {**response, "output": output}}),
        ]
    )


async def stream(model: ScriptedModel) -> list[StreamEvent]:
    async with (
        ModelClient(base_url="http://model.test/v1", transport=model.mock_transport()) as client,
        aclosing(client.stream({"model": "m", "input": "hi"})) as events,
    ):
        return [event async for event in events]


async def run_task(model: ScriptedModel, tmp_path: Path) -> tuple[TaskComplete, list[str], str]:
    async with running_engine(model, tmp_path) as ui:
        await ui.submit(UserInput((TextInput("hi"),)))
        done = (await ui.until(TaskComplete)).msg
    deltas = "".join(m.delta for m in ui.of(AgentMessageDelta))
    return done, [m.message for m in ui.of(AgentMessage)], deltas


async def test_an_answer_only_in_response_completed_reaches_the_user(tmp_path: Path) -> None:
    model = ScriptedModel([completed_only(message("only at the end"))])
    done, messages, _ = await run_task(model, tmp_path)
    assert messages == ["only at the end"]
    assert done.last_agent_message == "only at the end"


async def test_a_streamed_answer_is_shown_once(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("streamed and completed")])
    done, messages, deltas = await run_task(model, tmp_path)
    assert deltas == "streamed and completed"
    assert messages == ["streamed and completed"]
    assert done.last_agent_message == "streamed and completed"


async def test_the_client_yields_what_the_stream_did_not_finish_before_completed() -> None:
    streamed = message("streamed", "msg_a")
    late = message("late", "msg_b")
    anonymous = message("no id", None)
    response = {"id": "r", "object": "response", "status": "completed", "usage": None}
    reply = ScriptedResponse(
        steps=[
            sse_event({"type": "response.output_item.done", "output_index": 0, "item": streamed}),
            sse_event(
                {
                    "type": "response.completed",
                    "response": {**response, "output": [streamed, late, anonymous]},
                }
            ),
        ]
    )
    seen = await stream(ScriptedModel([reply]))
    done = [event.item for event in seen if isinstance(event, OutputItemDone)]
    assert done == [streamed, late, anonymous]
    assert isinstance(seen[-1], Completed)
    assert seen[-1].output == (streamed, late, anonymous)


async def test_items_without_ids_are_matched_by_their_place() -> None:
    first, second = message("one", None), message("two", None)
    response = {"id": "r", "object": "response", "status": "completed", "usage": None}
    reply = ScriptedResponse(
        steps=[
            sse_event({"type": "response.output_item.done", "output_index": 0, "item": first}),
            sse_event(
                {"type": "response.completed", "response": {**response, "output": [first, second]}}
            ),
        ]
    )
    seen = await stream(ScriptedModel([reply]))
    assert [event.item for event in seen if isinstance(event, OutputItemDone)] == [first, second]
