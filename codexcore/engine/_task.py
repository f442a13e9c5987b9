"""A Task: Turns against the model until a response calls no tool.

Each Turn sends one request, streams the response (deltas become events as
they arrive), records the response in the History under its ``response_id``,
runs the function calls it holds, and reports ``turn_complete``. The outputs
of one Turn are the input of the next; a Turn with nothing to feed back ends
the Task.

A Task keeps its conversation within the model's context window (see
:mod:`._compact`): between two Turns, when the last response's total tokens
reached the auto-compact limit, it compacts the History and goes on; when the
model answers "context length exceeded", it compacts once and sends the Turn
again. When neither helps it ends with :class:`ContextWindowExceeded`.
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
    ModelError,
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
    TokenUsage,
    TurnComplete,
    TurnDiff,
    WarningEvent,
)
from ..protocol._value import Value
from ._approvals import CallInterrupted, TaskAborted
from ._compact import Compactor, ContextWindowExceeded, is_context_window_exceeded
from ._config import SessionConfig
from ._history import History, Item
from ._instructions import ContextTracker
from ._models import BUILTIN_CATALOG, ModelCatalog
from ._requests import (
    aborted_output,
    build_request,
    call_output,
    is_call,
    is_refusal,
    message_text,
    reasoning_text,
    user_message_event,
)
from ._session import TokenTotals
from ._turn_diff import TurnDiffTracker

if TYPE_CHECKING:
    from ..model import ModelClient  # httpx: loaded on first use, not with the engine
    from ._tools import ToolRouter

Emit = Callable[[EventMsg], Awaitable[None]]


@attrs.define
class TurnSettings:
    """Where a Task reads its per-turn settings before each request.

    ``config`` gives the Session's settings now (``override_turn_context``
    changes them while a Task runs); ``tools_for`` makes the tool router for a
    configuration; ``context`` tracks what the model was told of its
    environment; ``totals`` counts the Session's tokens.
    """

    config: Callable[[], SessionConfig]
    tools_for: Callable[[SessionConfig], ToolRouter]
    context: ContextTracker | None = None
    catalog: ModelCatalog = BUILTIN_CATALOG
    totals: TokenTotals = attrs.field(factory=TokenTotals)


@attrs.frozen(repr=False, eq=False)
class TurnResult(Value):
    response_id: str | None
    called_tools: bool
    last_message: str | None
    total_tokens: int | None = None  # the response's usage: how full the context is


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
        settings: TurnSettings | None = None,
        auto_compact_limit: int | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> None:
        """``take_context`` gives items for the next request that, unlike injected
        input, never make the Task send another request (user shell records).
        ``settings``, when given, is read before each request, so a change of the
        per-turn settings applies from the next request on; without it the Task
        runs under ``config`` and ``tools`` throughout. ``auto_compact_limit`` is
        the total tokens at which the History is compacted between two Turns
        (None: never). ``output_schema`` constrains every request's answer to that
        JSON Schema (structured output): the Task's final answer is its JSON."""
        self._session_id = session_id
        self._config = config
        self._history = history
        self._client = client
        self._tools = tools
        self._emit = emit
        self._take_injected = take_injected
        self._stop_requested = stop_requested
        self._take_context = take_context
        self._settings = settings or TurnSettings(lambda: config, lambda _: tools)
        self._limit = auto_compact_limit
        self._output_schema = output_schema
        self._compacted = False  # since the last Turn that was under the limit

    async def run(self, first_input: list[Item]) -> TaskComplete:
        """Turns until one calls no tool and no input was injected, or until a
        ``stop`` or ``checkpoint`` is pending as a Turn ends. A pending stop leaves
        injected input where it is, for the next Task."""
        new_items = first_input
        last_message: str | None = None
        # A conversation a previous Task left above the limit is compacted first.
        await self._compact_if_full(self._history.context_tokens)
        while True:
            # Injected input is prepended: it was given before this Task's own input.
            user_input = [*self._take_injected(), *new_items]
            await self._announce_input(user_input)
            turn = await self._fitting_turn([*user_input, *self._take_context()])
            last_message = turn.last_message or last_message
            if (stopped_by := self._stop_requested()) is not None:
                return TaskComplete(last_message, turn.response_id, stopped_by)
            new_items = self._take_injected()
            if not (turn.called_tools or new_items):
                return TaskComplete(last_message, turn.response_id)
            await self._compact_if_full(turn.total_tokens)

    @property
    def _compactor(self) -> Compactor:
        """A compactor under the settings as they are now (an override may have
        changed the model), counting its tokens with the Session's."""
        return Compactor(
            self._session_id, self._config, self._history, self._client, self._emit, self._count
        )

    async def compact(self) -> TaskComplete:
        """The ``compact`` op's Task: one compaction and no Turn, unless input was
        injected meanwhile: the Task then goes on with it, as any Task would (a
        pending ``stop`` leaves it for the next Task)."""
        await self._compactor.compact("manual")
        self._compacted = True
        if self._stop_requested() is None and (injected := self._take_injected()):
            return await self.run(injected)
        return TaskComplete(stopped_by=self._stop_requested())

    async def _compact_if_full(self, total_tokens: int | None) -> None:
        """Compact when the context holds ``total_tokens`` at or above the limit; a
        conversation still above it right after compacting cannot be helped."""
        if self._limit is None or total_tokens is None or total_tokens < self._limit:
            self._compacted = False
            return
        if self._compacted:
            raise ContextWindowExceeded(
                f"the conversation is still above the auto-compact limit ({total_tokens} "
                f"of {self._limit} tokens) after compacting it: start a new session, "
                "or send less at once"
            )
        self._compacted = True
        await self._compactor.compact("auto")

    async def _fitting_turn(self, new_items: list[Item]) -> TurnResult:
        """A Turn; if the model says it does not fit the context window, compact
        (``new_items`` with the rest) and send the Turn once more."""
        try:
            return await self._turn(new_items)
        except ModelError as exc:
            if not is_context_window_exceeded(exc):
                raise
        await self._compactor.compact("context_window_exceeded", new_items)
        self._compacted = True
        try:
            return await self._turn([])
        except ModelError as exc:
            if is_context_window_exceeded(exc):
                raise ContextWindowExceeded(
                    f"the conversation does not fit the model's context window even "
                    f"compacted: {exc.message}"
                ) from exc
            raise

    async def _settle(self) -> list[Item]:
        """Take up the per-turn settings as they are now; the contextual items
        (initial context, or an update) the next request must carry."""
        config = self._settings.config()
        if config != self._config:
            self._config = config
            self._tools = self._settings.tools_for(config)
        context = self._settings.context
        if context is None:
            return []
        if context.initial_due:
            items, warnings = await asyncio.to_thread(context.pending, config)
        else:
            items, warnings = context.pending(config)
        for warning in warnings:
            await self._emit(WarningEvent(warning))
        return items

    async def _announce_input(self, items: list[Item]) -> None:
        """A ``user_message`` for each of the user's inputs this request carries: the
        input enters the conversation here (the first input, and injected ones)."""
        for item in items:
            if (event := user_message_event(item)) is not None:
                await self._emit(event)

    async def _turn(self, new_items: list[Item]) -> TurnResult:
        contextual = await self._settle()
        # The contextual items go first, as in Codex: before the user's words.
        new_items = [*contextual, *new_items]
        tools = await self._tools.specs()
        body = build_request(
            self._config,
            self._history,
            new_items,
            tools,
            session_id=self._session_id,
            catalog=self._settings.catalog,
            output_schema=self._output_schema,
        )
        started = datetime.now(UTC)
        clock = time.monotonic()
        response_id, output, total_tokens = await self._stream(body)
        latency_ms = round((time.monotonic() - clock) * 1000)
        self._history.record([*new_items, *output], response_id)
        if self._settings.context is not None:
            self._settings.context.sent(self._config)
        self._history.context_tokens = total_tokens
        # Every call is answered, the ones no tool runs with an error: an
        # unanswered call makes the next request malformed.
        calls = [item for item in output if is_call(item)]
        if calls:
            diff = TurnDiffTracker(self._config.cwd)
            await self._run_calls(calls, response_id, diff)
            await self._report_diff(diff)
        await self._emit(TurnComplete(response_id, body.get("model"), _iso(started), latency_ms))
        messages = [message_text(i) for i in output if i.get("type") == "message"]
        last = messages[-1] if messages else None
        return TurnResult(response_id, bool(calls), last, total_tokens)

    async def _stream(self, body: dict[str, Any]) -> tuple[str | None, list[Item], int | None]:
        """Stream one response; returns its id, its completed output items and its
        total tokens (None when it reported no usage)."""
        output: list[Item] = []
        response_id = None
        total_tokens = None
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
                    total_tokens = event.usage.total_tokens
                    await self._count(TokenUsage(**attrs.asdict(event.usage)))
            elif isinstance(event, RetryScheduled):
                output.clear()  # the retried response starts over
                await self._emit(StreamError(event.reason, event.attempt, event.max_attempts))
        return response_id, output, total_tokens

    async def _count(self, last: TokenUsage) -> None:
        window = self._settings.catalog.details(self._config.model).context_window
        info = self._settings.totals.add(last, window)
        await self._emit(TokenCount(**attrs.asdict(last), info=info))

    async def _announce(self, item: Item) -> None:
        kind = item.get("type")
        if kind == "message":
            await self._emit(AgentMessage(message_text(item), is_refusal(item)))
        elif kind == "reasoning" and (text := reasoning_text(item)):
            await self._emit(AgentReasoning(text))

    async def _report_diff(self, diff: TurnDiffTracker) -> None:
        if diff.touched and (text := await asyncio.to_thread(diff.diff)):
            for warning in diff.warnings:
                await self._emit(WarningEvent(warning))
            await self._emit(TurnDiff(text))

    async def _run_calls(
        self, calls: list[Item], response_id: str | None, diff: TurnDiffTracker
    ) -> None:
        """Run the calls in order; their outputs go into the History either way.

        Interrupted mid-way, the call that was running is answered with what it did
        until then (a command's output so far, that the user interrupted it, its
        exit code), the calls that never ran as aborted, so the next request is a
        valid conversation, and the stop goes on.
        """
        outputs: list[Item] = []
        try:
            for call in calls:
                outputs.append(await self._tools.call(call, diff))
        except CallInterrupted as exc:  # it ran until stopped: the model learns how far
            outputs.append(call_output(calls[len(outputs)], exc.output))
            raise
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
