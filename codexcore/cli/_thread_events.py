"""The engine's events as the Codex CLI's ``exec --json`` thread events.

``codex exec --experimental-json`` (what OpenAI's TypeScript SDK, ``@openai/codex-sdk``,
runs) prints one JSON object a line: ``thread.started``, ``turn.started``,
``item.started`` / ``item.updated`` / ``item.completed``, ``turn.completed``,
``turn.failed`` and ``error``. The names and fields here are those of Codex's
``codex-rs/exec/src/exec_events.rs`` (and the SDK's ``ThreadEvent`` type), checked
against what ``codex exec`` 0.169.0 prints: an item's ``id`` is ``item_N`` counted
from 0 over the run; a command's ``exit_code`` is ``null`` until it ends.

:class:`ThreadEvents` is pure: it keeps the items under way and the Task's token
usage, and turns each engine event into the thread events it means (often none).
"""

from __future__ import annotations

import shlex
from typing import Any

from ..protocol import (
    AgentMessage,
    AgentReasoning,
    ErrorEvent,
    EventMsg,
    ExecCommandBegin,
    ExecCommandEnd,
    McpInvocation,
    McpToolCallBegin,
    McpToolCallEnd,
    PatchApplyBegin,
    PatchApplyEnd,
    PlanUpdate,
    SessionConfigured,
    StreamError,
    TaskComplete,
    TaskStarted,
    TokenCount,
    TurnAborted,
    WarningEvent,
)

ThreadEvent = dict[str, Any]

_USAGE_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


class ThreadEvents:
    """One ``exec`` run's mapping: call :meth:`map` with each engine event in order."""

    def __init__(self) -> None:
        self._items = 0
        self._open: dict[str, ThreadEvent] = {}  # call_id -> the item under way
        self._todo: ThreadEvent | None = None
        self._usage = dict.fromkeys(_USAGE_FIELDS, 0)
        self._thread_started = False

    def map(self, msg: EventMsg) -> list[ThreadEvent]:
        """The thread events ``msg`` means, in the order they are printed."""
        handler = _HANDLERS.get(type(msg))
        return handler(self, msg) if handler is not None else []

    # --- the thread and its turn ---------------------------------------------------------

    def _session(self, msg: SessionConfigured) -> list[ThreadEvent]:
        if self._thread_started:  # a reconfiguration is the same thread
            return []
        self._thread_started = True
        return [{"type": "thread.started", "thread_id": msg.session_id}]

    def _task_started(self, msg: TaskStarted) -> list[ThreadEvent]:
        self._usage = dict.fromkeys(_USAGE_FIELDS, 0)
        return [{"type": "turn.started"}]

    def _token_count(self, msg: TokenCount) -> list[ThreadEvent]:
        for field in _USAGE_FIELDS:  # one count per model response: the Task's is the sum
            self._usage[field] += getattr(msg, field)
        return []

    def _task_complete(self, msg: TaskComplete) -> list[ThreadEvent]:
        usage = self._usage
        return [
            *self._close_todo(),
            {
                "type": "turn.completed",
                "usage": {
                    "input_tokens": usage["input_tokens"],
                    "cached_input_tokens": usage["cached_input_tokens"],
                    "cache_write_input_tokens": 0,  # the Responses API reports none
                    "output_tokens": usage["output_tokens"],
                    "reasoning_output_tokens": usage["reasoning_output_tokens"],
                },
            },
        ]

    def _error(self, msg: ErrorEvent) -> list[ThreadEvent]:
        # The Task ended on it: the stream's error, then the turn's failure (the SDK's
        # run() throws with turn.failed's message).
        return [
            *self._close_todo(),
            {"type": "error", "message": msg.message},
            {"type": "turn.failed", "error": {"message": msg.message}},
        ]

    def _aborted(self, msg: TurnAborted) -> list[ThreadEvent]:
        message = f"the turn was aborted ({msg.reason})"
        return [*self._close_todo(), {"type": "turn.failed", "error": {"message": message}}]

    def _stream_error(self, msg: StreamError) -> list[ThreadEvent]:
        # A retry under way: Codex prints it as a (non-fatal) error event too.
        message = f"Reconnecting... {msg.attempt}/{msg.max_attempts} ({msg.message})"
        return [{"type": "error", "message": message}]

    def _warning(self, msg: WarningEvent) -> list[ThreadEvent]:
        return [self._completed({"type": "error", "message": msg.message})]

    # --- items ---------------------------------------------------------------------------

    def _new_item(self, fields: ThreadEvent) -> ThreadEvent:
        item = {"id": f"item_{self._items}", **fields}
        self._items += 1
        return item

    def _completed(self, fields: ThreadEvent) -> ThreadEvent:
        return {"type": "item.completed", "item": self._new_item(fields)}

    def _agent_message(self, msg: AgentMessage) -> list[ThreadEvent]:
        return [self._completed({"type": "agent_message", "text": msg.message})]

    def _reasoning(self, msg: AgentReasoning) -> list[ThreadEvent]:
        return [self._completed({"type": "reasoning", "text": msg.text})]

    def _exec_begin(self, msg: ExecCommandBegin) -> list[ThreadEvent]:
        item = self._new_item(
            {
                "type": "command_execution",
                "command": shlex.join(msg.command),
                "aggregated_output": "",
                "exit_code": None,
                "status": "in_progress",
            }
        )
        self._open[msg.call_id] = item
        return [{"type": "item.started", "item": item}]

    def _exec_end(self, msg: ExecCommandEnd) -> list[ThreadEvent]:
        begun = self._open.pop(msg.call_id, None)
        item = begun or self._new_item({"type": "command_execution", "command": ""})
        status = "completed" if msg.status == "completed" and msg.exit_code == 0 else "failed"
        done = {
            **item,
            "aggregated_output": msg.aggregated_output,
            "exit_code": msg.exit_code,
            "status": status,
        }
        return [{"type": "item.completed", "item": done}]

    def _patch_begin(self, msg: PatchApplyBegin) -> list[ThreadEvent]:
        changes = [{"path": path, "kind": change.TYPE} for path, change in msg.changes.items()]
        item = self._new_item({"type": "file_change", "changes": changes, "status": "in_progress"})
        self._open[msg.call_id] = item
        return [{"type": "item.started", "item": item}]

    def _patch_end(self, msg: PatchApplyEnd) -> list[ThreadEvent]:
        item = self._open.pop(msg.call_id, None)
        if item is None:  # no begin seen: the changes are unknown
            item = self._new_item({"type": "file_change", "changes": []})
        status = "completed" if msg.success else "failed"
        return [{"type": "item.completed", "item": {**item, "status": status}}]

    def _mcp_item(self, call: McpInvocation) -> ThreadEvent:
        return self._new_item(
            {
                "type": "mcp_tool_call",
                "server": call.server,
                "tool": call.tool,
                "arguments": call.arguments,
                "result": None,
                "error": None,
                "status": "in_progress",
            }
        )

    def _mcp_begin(self, msg: McpToolCallBegin) -> list[ThreadEvent]:
        item = self._open[msg.call_id] = self._mcp_item(msg.invocation)
        return [{"type": "item.started", "item": item}]

    def _mcp_end(self, msg: McpToolCallEnd) -> list[ThreadEvent]:
        item = self._open.pop(msg.call_id, None) or self._mcp_item(msg.invocation)
        return [{"type": "item.completed", "item": {**item, **mcp_outcome(msg.result)}}]

    def _plan(self, msg: PlanUpdate) -> list[ThreadEvent]:
        items = [{"text": step.step, "completed": step.status == "completed"} for step in msg.plan]
        if self._todo is None:
            self._todo = self._new_item({"type": "todo_list", "items": items})
            return [{"type": "item.started", "item": self._todo}]
        self._todo = {**self._todo, "items": items}
        return [{"type": "item.updated", "item": self._todo}]

    def _close_todo(self) -> list[ThreadEvent]:
        """The plan's item completes when the turn ends (as Codex's does)."""
        todo, self._todo = self._todo, None
        return [] if todo is None else [{"type": "item.completed", "item": todo}]


def mcp_outcome(result: Any) -> ThreadEvent:
    """An MCP call's end as Codex's item fields: ``result {content, structured_content}``
    and status ``completed``, or ``error {message}`` and status ``failed``."""
    if isinstance(result, dict) and isinstance(result.get("Ok"), dict):
        ok = result["Ok"]
        failed = bool(ok.get("isError"))
        payload = {
            "content": ok.get("content") or [],
            "structured_content": ok.get("structuredContent"),
        }
        return {"result": payload, "error": None, "status": "failed" if failed else "completed"}
    message = result.get("Err") if isinstance(result, dict) else None
    return {"result": None, "error": {"message": str(message or result)}, "status": "failed"}


_HANDLERS: dict[type, Any] = {
    SessionConfigured: ThreadEvents._session,
    TaskStarted: ThreadEvents._task_started,
    TokenCount: ThreadEvents._token_count,
    TaskComplete: ThreadEvents._task_complete,
    ErrorEvent: ThreadEvents._error,
    TurnAborted: ThreadEvents._aborted,
    StreamError: ThreadEvents._stream_error,
    WarningEvent: ThreadEvents._warning,
    AgentMessage: ThreadEvents._agent_message,
    AgentReasoning: ThreadEvents._reasoning,
    ExecCommandBegin: ThreadEvents._exec_begin,
    ExecCommandEnd: ThreadEvents._exec_end,
    PatchApplyBegin: ThreadEvents._patch_begin,
    PatchApplyEnd: ThreadEvents._patch_end,
    McpToolCallBegin: ThreadEvents._mcp_begin,
    McpToolCallEnd: ThreadEvents._mcp_end,
    PlanUpdate: ThreadEvents._plan,
}
