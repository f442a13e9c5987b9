"""The engine's events as the app-server protocol's turns, items and notifications.

A thread's :class:`TurnMapper` is fed every event of its session in order and
returns the notifications they make (``turn/started``, ``item/started``,
``item/agentMessage/delta``, ...), keeping each turn's items as it goes, so the
same mapper fed a recorded session's events builds the ``turns`` of
``thread/read`` and ``thread/resume``. A turn is a Task: its id is the id of the
submission that started it, and only events under that id belong to it.
"""

from __future__ import annotations

import shlex
import time
from typing import Any

import attrs

from codexcore.protocol import (
    AddChange,
    AgentMessage,
    AgentMessageDelta,
    AgentReasoning,
    AgentReasoningDelta,
    ApplyPatchApprovalRequest,
    DeleteChange,
    ErrorEvent,
    Event,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    ExecCommandOutputDelta,
    FileChange,
    McpToolCallBegin,
    McpToolCallEnd,
    PatchApplyBegin,
    PatchApplyEnd,
    PlanUpdate,
    StreamError,
    TaskComplete,
    TaskStarted,
    TokenCount,
    TurnAborted,
    TurnDiff,
    UserMessage,
)

Note = tuple[str, dict[str, Any]]
"""A notification to send: its method and params."""

CLIENT_TOOLS = "client"
"""The MCP server name the engine shows a client tool's (dynamic tool's) call under."""

_PLAN_STATUS = {"pending": "pending", "in_progress": "inProgress", "completed": "completed"}


def now_ms() -> int:
    return int(time.time() * 1000)


def command_text(argv: tuple[str, ...]) -> str:
    """A command line as Codex shows it: the script of ``bash -lc SCRIPT``, else quoted."""
    if (
        len(argv) == 3
        and argv[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
        and argv[1]
        in (
            "-lc",
            "-c",
        )
    ):
        return argv[2]
    return shlex.join(argv)


def file_changes(changes: dict[str, FileChange]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path, change in changes.items():
        if isinstance(change, AddChange):
            out.append({"path": path, "kind": {"type": "add"}, "diff": change.content})
        elif isinstance(change, DeleteChange):
            out.append({"path": path, "kind": {"type": "delete"}, "diff": change.content})
        else:
            kind = {"type": "update", "move_path": change.move_path}
            out.append({"path": path, "kind": kind, "diff": change.unified_diff})
    return out


@attrs.define
class TurnRecord:
    id: str
    started_at: int
    items: list[dict[str, Any]] = attrs.field(factory=list)
    status: str = "inProgress"
    error: dict[str, Any] | None = None
    completed_at: int | None = None
    open: dict[str, dict[str, Any]] = attrs.field(factory=dict)  # item id -> started item
    message: str | None = None  # the agent message streaming now
    reasoning: str | None = None
    counter: int = 0

    def wire(self) -> dict[str, Any]:
        turn: dict[str, Any] = {
            "id": self.id,
            "items": list(self.items),
            "status": self.status,
            "error": self.error,
            "startedAt": self.started_at // 1000,
            "completedAt": None if self.completed_at is None else self.completed_at // 1000,
        }
        if self.completed_at is not None:
            turn["durationMs"] = self.completed_at - self.started_at
        return turn

    def next_id(self, kind: str) -> str:
        self.counter += 1
        return f"{self.id}-{kind}-{self.counter}"


class TurnMapper:
    """One thread's turns, built from its session's events (see the module)."""

    def __init__(self, thread_id: str, cwd: str) -> None:
        self.thread_id = thread_id
        self.cwd = cwd
        self.turns: dict[str, TurnRecord] = {}
        self.unfinished: dict[str, None] = {}  # the turns not completed, oldest first
        self.declined: set[str] = set()  # calls the client declined: no command runs

    def feed(self, event: Event) -> list[Note]:
        msg = event.msg
        if isinstance(msg, TaskStarted):
            record = self.turns[event.id] = TurnRecord(event.id, now_ms())
            self.unfinished[event.id] = None
            return [("turn/started", self._ids(record, turn=record.wire()))]
        turn = self.turns.get(event.id)
        if turn is None or turn.completed_at is not None:
            return []
        handler = _HANDLERS.get(type(msg))
        return handler(self, turn, msg) if handler is not None else []

    # --- helpers ---------------------------------------------------------------------------

    def _ids(self, record: TurnRecord, **params: Any) -> dict[str, Any]:
        if "turn" in params:  # turn/started and turn/completed carry the whole turn
            return {"threadId": self.thread_id, **params}
        return {"threadId": self.thread_id, "turnId": record.id, **params}

    def start(self, turn: TurnRecord, item: dict[str, Any]) -> Note:
        turn.open[item["id"]] = item
        return ("item/started", self._ids(turn, item=item, startedAtMs=now_ms()))

    def complete(self, turn: TurnRecord, item: dict[str, Any]) -> Note:
        turn.open.pop(item["id"], None)
        turn.items.append(item)
        return ("item/completed", self._ids(turn, item=item, completedAtMs=now_ms()))

    def decline(self, turn_id: str, call_id: str) -> list[Note]:
        """The client declined the call: its item completes as declined."""
        turn = self.turns.get(turn_id)
        if turn is None:
            return []
        item = turn.open.get(call_id)
        if item is None:
            return []
        self.declined.add(call_id)
        return [self.complete(turn, {**item, "status": "declined"})]

    # --- events ----------------------------------------------------------------------------

    def _user(self, turn: TurnRecord, msg: UserMessage) -> list[Note]:
        content: list[dict[str, Any]] = []
        if msg.message:
            content.append({"type": "text", "text": msg.message, "text_elements": []})
        content += [{"type": "image", "url": url} for url in msg.images or ()]
        item = {"type": "userMessage", "id": turn.next_id("user"), "content": content}
        return [self.start(turn, item), self.complete(turn, item)]

    def _delta(self, turn: TurnRecord, msg: AgentMessageDelta) -> list[Note]:
        notes: list[Note] = []
        if turn.message is None:
            turn.message = turn.next_id("msg")
            notes.append(self.start(turn, {"type": "agentMessage", "id": turn.message, "text": ""}))
        params = self._ids(turn, itemId=turn.message, delta=msg.delta)
        notes.append(("item/agentMessage/delta", params))
        return notes

    def _message(self, turn: TurnRecord, msg: AgentMessage) -> list[Note]:
        notes: list[Note] = []
        item_id, turn.message = turn.message, None
        if item_id is None:
            item_id = turn.next_id("msg")
            notes.append(self.start(turn, {"type": "agentMessage", "id": item_id, "text": ""}))
        notes.append(
            self.complete(turn, {"type": "agentMessage", "id": item_id, "text": msg.message})
        )
        return notes

    def _reasoning_delta(self, turn: TurnRecord, msg: AgentReasoningDelta) -> list[Note]:
        notes: list[Note] = []
        if turn.reasoning is None:
            turn.reasoning = turn.next_id("reasoning")
            item = {"type": "reasoning", "id": turn.reasoning, "summary": [], "content": []}
            notes.append(self.start(turn, item))
        params = self._ids(turn, itemId=turn.reasoning, delta=msg.delta, summaryIndex=0)
        notes.append(("item/reasoning/summaryTextDelta", params))
        return notes

    def _reasoning(self, turn: TurnRecord, msg: AgentReasoning) -> list[Note]:
        notes: list[Note] = []
        item_id, turn.reasoning = turn.reasoning, None
        if item_id is None:
            item_id = turn.next_id("reasoning")
            notes.append(self.start(turn, {"type": "reasoning", "id": item_id}))
        item = {"type": "reasoning", "id": item_id, "summary": [msg.text], "content": []}
        notes.append(self.complete(turn, item))
        return notes

    def _command_item(self, call_id: str, command: tuple[str, ...], cwd: str) -> dict[str, Any]:
        text = command_text(command)
        return {
            "type": "commandExecution",
            "id": call_id,
            "command": text,
            "cwd": cwd,
            "commandActions": [{"type": "unknown", "command": text}],
            "status": "inProgress",
            "aggregatedOutput": None,
            "exitCode": None,
            "durationMs": None,
        }

    def _exec_approval(self, turn: TurnRecord, msg: ExecApprovalRequest) -> list[Note]:
        return [self.start(turn, self._command_item(msg.call_id, msg.command, msg.cwd))]

    def _exec_begin(self, turn: TurnRecord, msg: ExecCommandBegin) -> list[Note]:
        if msg.call_id in turn.open:
            return []  # started when its approval was asked
        item = self._command_item(msg.call_id, msg.command, msg.cwd)
        if msg.source == "user_shell":
            item["source"] = "userShell"
        return [self.start(turn, item)]

    def _exec_output(self, turn: TurnRecord, msg: ExecCommandOutputDelta) -> list[Note]:
        delta = msg.chunk.decode("utf-8", "replace")
        return [
            ("item/commandExecution/outputDelta", self._ids(turn, itemId=msg.call_id, delta=delta))
        ]

    def _exec_end(self, turn: TurnRecord, msg: ExecCommandEnd) -> list[Note]:
        if msg.call_id in self.declined:
            return []
        item = turn.open.get(msg.call_id) or self._command_item(msg.call_id, (), self.cwd)
        done = {
            **item,
            "status": "completed" if msg.exit_code == 0 else "failed",
            "aggregatedOutput": msg.aggregated_output,
            "exitCode": msg.exit_code,
            "durationMs": msg.duration_ms,
        }
        return [self.complete(turn, done)]

    def _patch_item(self, call_id: str, changes: dict[str, FileChange]) -> dict[str, Any]:
        return {
            "type": "fileChange",
            "id": call_id,
            "changes": file_changes(changes),
            "status": "inProgress",
        }

    def _patch_approval(self, turn: TurnRecord, msg: ApplyPatchApprovalRequest) -> list[Note]:
        return [self.start(turn, self._patch_item(msg.call_id, msg.changes))]

    def _patch_begin(self, turn: TurnRecord, msg: PatchApplyBegin) -> list[Note]:
        notes: list[Note] = []
        item = self._patch_item(msg.call_id, msg.changes)
        if msg.call_id not in turn.open:
            notes.append(self.start(turn, item))
        params = self._ids(turn, itemId=msg.call_id, changes=item["changes"])
        notes.append(("item/fileChange/patchUpdated", params))
        return notes

    def _patch_end(self, turn: TurnRecord, msg: PatchApplyEnd) -> list[Note]:
        if msg.call_id in self.declined:
            return []
        item = turn.open.get(msg.call_id) or self._patch_item(msg.call_id, {})
        status = "completed" if msg.success else "failed"
        return [self.complete(turn, {**item, "status": status})]

    def _tool_begin(self, turn: TurnRecord, msg: McpToolCallBegin) -> list[Note]:
        """A call of a client tool is a ``dynamicToolCall`` item (other MCP calls are not
        sent); the ``item/tool/call`` request that asks the client follows it."""
        called = msg.invocation
        if called.server != CLIENT_TOOLS:
            return []
        item = {
            "type": "dynamicToolCall",
            "id": msg.call_id,
            "namespace": None,
            "tool": called.tool,
            "arguments": called.arguments,
            "status": "inProgress",
            "contentItems": None,
            "success": None,
            "durationMs": None,
        }
        return [self.start(turn, item)]

    def _tool_end(self, turn: TurnRecord, msg: McpToolCallEnd) -> list[Note]:
        if msg.invocation.server != CLIENT_TOOLS:
            return []
        item = turn.open.get(msg.call_id)
        if item is None:
            return []
        success, content = tool_output(msg.result)
        done = {
            **item,
            "status": "completed" if success else "failed",
            "contentItems": content,
            "success": success,
            "durationMs": msg.duration.secs * 1000 + msg.duration.nanos // 1_000_000,
        }
        return [self.complete(turn, done)]

    def _diff(self, turn: TurnRecord, msg: TurnDiff) -> list[Note]:
        return [("turn/diff/updated", self._ids(turn, diff=msg.unified_diff))]

    def _plan(self, turn: TurnRecord, msg: PlanUpdate) -> list[Note]:
        plan = [{"step": p.step, "status": _PLAN_STATUS.get(p.status, "pending")} for p in msg.plan]
        return [("turn/plan/updated", self._ids(turn, plan=plan, explanation=msg.explanation))]

    def _tokens(self, turn: TurnRecord, msg: TokenCount) -> list[Note]:
        info = msg.info
        last = _usage(msg)
        total = _usage(info.total_token_usage) if info is not None else last
        usage = {
            "total": total,
            "last": _usage(info.last_token_usage) if info is not None else last,
            "modelContextWindow": info.model_context_window if info is not None else None,
        }
        return [("thread/tokenUsage/updated", self._ids(turn, tokenUsage=usage))]

    def _stream_error(self, turn: TurnRecord, msg: StreamError) -> list[Note]:
        error = {"message": msg.message, "additionalDetails": None}
        return [("error", self._ids(turn, error=error, willRetry=True))]

    def _error(self, turn: TurnRecord, msg: ErrorEvent) -> list[Note]:
        turn.error = {"message": msg.message, "additionalDetails": None}
        note = ("error", self._ids(turn, error=turn.error, willRetry=False))
        return [note, *self._end(turn, "failed")]

    def _aborted(self, turn: TurnRecord, msg: TurnAborted) -> list[Note]:
        return self._end(turn, "interrupted")

    def _complete(self, turn: TurnRecord, msg: TaskComplete) -> list[Note]:
        return self._end(turn, "completed")

    def _end(self, turn: TurnRecord, status: str) -> list[Note]:
        """The turn is over: items still open end with it, then ``turn/completed``."""
        notes: list[Note] = []
        for item in list(turn.open.values()):
            if item.get("status") == "inProgress":
                failed = status == "failed" or item["type"] == "dynamicToolCall"
                item = {**item, "status": "failed" if failed else "declined"}
            notes.append(self.complete(turn, item))
        turn.message = turn.reasoning = None
        turn.status, turn.completed_at = status, now_ms()
        self.unfinished.pop(turn.id, None)
        notes.append(("turn/completed", self._ids(turn, turn=turn.wire())))
        return notes


def tool_output(result: Any) -> tuple[bool, list[dict[str, Any]]]:
    """A client tool's end (MCP's ``CallToolResult``, or ``{"Err": why}``) as Codex's
    ``success`` and ``contentItems``: texts ``inputText``, images ``inputImage``."""
    ok = result.get("Ok") if isinstance(result, dict) else None
    if not isinstance(ok, dict):
        why = result.get("Err") if isinstance(result, dict) else None
        return False, [{"type": "inputText", "text": str(why or "the call failed")}]
    items: list[dict[str, Any]] = []
    for part in ok.get("content") or []:
        if part.get("type") == "image":
            url = f"data:{part.get('mimeType', 'image/png')};base64,{part.get('data', '')}"
            items.append({"type": "inputImage", "imageUrl": url})
        elif part.get("text"):
            items.append({"type": "inputText", "text": part["text"]})
    return not ok.get("isError", False), items


def _usage(source: Any) -> dict[str, int]:
    return {
        "inputTokens": source.input_tokens,
        "cachedInputTokens": source.cached_input_tokens,
        "outputTokens": source.output_tokens,
        "reasoningOutputTokens": source.reasoning_output_tokens,
        "totalTokens": source.total_tokens,
    }


_HANDLERS: dict[type, Any] = {
    UserMessage: TurnMapper._user,
    AgentMessageDelta: TurnMapper._delta,
    AgentMessage: TurnMapper._message,
    AgentReasoningDelta: TurnMapper._reasoning_delta,
    AgentReasoning: TurnMapper._reasoning,
    ExecApprovalRequest: TurnMapper._exec_approval,
    ExecCommandBegin: TurnMapper._exec_begin,
    ExecCommandOutputDelta: TurnMapper._exec_output,
    ExecCommandEnd: TurnMapper._exec_end,
    ApplyPatchApprovalRequest: TurnMapper._patch_approval,
    PatchApplyBegin: TurnMapper._patch_begin,
    PatchApplyEnd: TurnMapper._patch_end,
    McpToolCallBegin: TurnMapper._tool_begin,
    McpToolCallEnd: TurnMapper._tool_end,
    TurnDiff: TurnMapper._diff,
    PlanUpdate: TurnMapper._plan,
    TokenCount: TurnMapper._tokens,
    StreamError: TurnMapper._stream_error,
    ErrorEvent: TurnMapper._error,
    TurnAborted: TurnMapper._aborted,
    TaskComplete: TurnMapper._complete,
}
