"""A Task: Turns against the model until a response calls no tool.

Each Turn sends one request, streams the response (deltas become events as
they arrive), records the response in the History under its ``response_id``,
runs the function calls it holds, and reports ``turn_complete``. The outputs
of one Turn are the input of the next; a Turn with nothing to feed back ends
the Task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import attrs

from ..model import (
    Completed,
    OutputItemDone,
    OutputTextDelta,
    ReasoningSummaryDelta,
    RefusalDelta,
    RetryScheduled,
)
from ..protocol import (
    AgentMessage,
    AgentMessageDelta,
    AgentReasoning,
    AgentReasoningDelta,
    EventMsg,
    StopKind,
    StreamError,
    TaskComplete,
    TokenCount,
    TurnComplete,
    TurnDiff,
)
from ._approvals import TaskAborted
from ._config import SessionConfig
from ._history import History, Item
from ._requests import (
    TOOLS,
    aborted_output,
    build_request,
    is_call,
    is_refusal,
    message_text,
    reasoning_text,
    user_message_event,
)
from ._tools import ToolRouter
from ._turn_diff import TurnDiffTracker

if TYPE_CHECKING:
    from ..model import ModelClient  # httpx: loaded on first use, not with the engine

Emit = Callable[[EventMsg], Awaitable[None]]


@attrs.frozen
class TurnResult:
    response_id: str | None
    called_tools: bool
    last_message: str | None


class Task:
    """Runs one Task for a Session; ``run`` returns its ``task_complete``.

    Cancelling the asyncio task that awaits ``run`` stops it anywhere: the
    HTTP stream is closed, a running command's process group is killed, and
    calls the model made but that never ran are answered as aborted in the
    History so the next request is well formed.
    """

    def __init__(
        self,
        *,
        session_id: str,
        config: SessionConfig,
        history: History,
        client: ModelClient,
        tools: ToolRouter,
        emit: Emit,
        take_injected: Callable[[], list[Item]],
        stop_requested: Callable[[], StopKind | None] = lambda: None,
        take_context: Callable[[], list[Item]] = list,
    ) -> None:
        """``take_context`` gives items for the next request that, unlike injected
        input, never make the Task send another request (user shell records)."""
        self._session_id = session_id
        self._config = config
        self._history = history
        self._client = client
        self._tools = tools
        self._emit = emit
        self._take_injected = take_injected
        self._stop_requested = stop_requested
        self._take_context = take_context

    async def run(self, first_input: list[Item]) -> TaskComplete:
        """Turns until one calls no tool and no input was injected, or until a
        ``stop`` or ``checkpoint`` is pending as a Turn ends. A pending stop leaves
        injected input where it is, for the next Task."""
        new_items = first_input
        last_message: str | None = None
        while True:
            user_input = [*new_items, *self._take_injected()]
            await self._announce_input(user_input)
            turn = await self._turn([*user_input, *self._take_context()])
            last_message = turn.last_message or last_message
            if (stopped_by := self._stop_requested()) is not None:
                return TaskComplete(last_message, turn.response_id, stopped_by)
            new_items = self._take_injected()
            if not (turn.called_tools or new_items):
                return TaskComplete(last_message, turn.response_id)

    async def _announce_input(self, items: list[Item]) -> None:
        """A ``user_message`` for each of the user's inputs this request carries: the
        input enters the conversation here (the first input, and injected ones)."""
        for item in items:
            if (event := user_message_event(item)) is not None:
                await self._emit(event)

    async def _turn(self, new_items: list[Item]) -> TurnResult:
        body = build_request(
            self._config, self._history, new_items, TOOLS, session_id=self._session_id
        )
        started = datetime.now(UTC)
        clock = time.monotonic()
        response_id, output = await self._stream(body)
        latency_ms = round((time.monotonic() - clock) * 1000)
        self._history.record([*new_items, *output], response_id)
        # Every call is answered, the ones no tool runs with an error: an
        # unanswered call makes the next request malformed.
        calls = [item for item in output if is_call(item)]
        if calls:
            diff = TurnDiffTracker(self._config.cwd)
            await self._run_calls(calls, response_id, diff)
            await self._report_diff(diff)
        await self._emit(TurnComplete(response_id, body.get("model"), _iso(started), latency_ms))
        messages = [message_text(i) for i in output if i.get("type") == "message"]
        return TurnResult(response_id, bool(calls), messages[-1] if messages else None)

    async def _stream(self, body: dict[str, Any]) -> tuple[str | None, list[Item]]:
        """Stream one response; returns its id and its completed output items."""
        output: list[Item] = []
        response_id = None
        async for event in self._client.stream(body):
            if isinstance(event, OutputTextDelta | RefusalDelta):
                await self._emit(AgentMessageDelta(event.delta))
            elif isinstance(event, ReasoningSummaryDelta):
                await self._emit(AgentReasoningDelta(event.delta))
            elif isinstance(event, OutputItemDone):
                output.append(event.item)
                await self._announce(event.item)
            elif isinstance(event, Completed):
                response_id = event.response_id
                if event.usage is not None:
                    await self._emit(TokenCount(**attrs.asdict(event.usage)))
            elif isinstance(event, RetryScheduled):
                output.clear()  # the retried response starts over
                await self._emit(StreamError(event.reason, event.attempt, event.max_attempts))
        return response_id, output

    async def _announce(self, item: Item) -> None:
        kind = item.get("type")
        if kind == "message":
            await self._emit(AgentMessage(message_text(item), is_refusal(item)))
        elif kind == "reasoning" and (text := reasoning_text(item)):
            await self._emit(AgentReasoning(text))

    async def _report_diff(self, diff: TurnDiffTracker) -> None:
        if diff.touched and (text := await asyncio.to_thread(diff.diff)):
            await self._emit(TurnDiff(text))

    async def _run_calls(
        self, calls: list[Item], response_id: str | None, diff: TurnDiffTracker
    ) -> None:
        """Run the calls in order; their outputs go into the History either way.

        Interrupted mid-way, the calls that never ran are answered as aborted,
        so the next request is a valid conversation, and the stop goes on.
        """
        outputs: list[Item] = []
        try:
            for call in calls:
                outputs.append(await self._tools.call(call, diff))
        except TaskAborted as exc:
            if exc.reason and exc.reason.strip():
                # The user's words reach the model with the next Task's first request.
                why = f"the user stopped the task here: {exc.reason.strip()}"
                outputs.append(aborted_output(calls[len(outputs)], why))
            raise
        finally:
            for call in calls[len(outputs) :]:
                outputs.append(aborted_output(call))
            self._history.record_tool_outputs(outputs, response_id)


def _iso(moment: datetime) -> str:
    """``2026-01-02T03:04:05.678Z``: JavaScript's ``toISOString`` form, which UIs parse."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
