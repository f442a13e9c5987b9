"""Seed 000's ``agent.event``: the engine's EventMsgs as Codelia's ``AgentEvent``s.

One table, :data:`MAPPING`, says what each EventMsg type becomes; every other
type the engine can emit is in :data:`NOT_SENT`, with the reason (a test
checks that the two cover the protocol's union, and that nothing built falls
outside :data:`AGENT_EVENT_TYPES`). A builder takes the run's
:class:`RunView` and the EventMsg, and returns the AgentEvents to send, in
order (often none, sometimes two).

What the Codelia TUI needs, read from its sources (``crates/tui/src/app/
runtime/parser.rs`` and its ``parser/`` helpers), and why the builders look
as they do:

- ``tool_call`` lines are replaced by their ``tool_result`` by
  ``tool_call_id``; a ``shell`` call needs ``args.command`` as one string.
- a ``shell`` result is rendered from a JSON text ``{state, command,
  exit_code, duration_ms, stdout, stderr}`` (what Codelia's own shell tool
  returns): "Shell: CMD (N ms)" and the output's first lines.
- an ``apply_patch`` result is rendered from a JSON text ``{summary, diff}``;
  its diff is drawn once when it equals the ``permission.preview`` diff.
- ``step_start``/``step_complete`` are drawn as nothing; ``final`` equal to
  the last ``text`` is drawn once.
- ``compaction_start`` is drawn "Compaction: running", and the next
  ``compaction_complete {compacted}`` updates that line: a compaction that
  failed or was interrupted gets ``compacted: false`` before the step closes.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from codexcore.protocol import (
    AddChange,
    AgentMessage,
    AgentReasoning,
    ApplyPatchApprovalRequest,
    ContextCompacted,
    ContextCompactionStarted,
    DeleteChange,
    ErrorEvent,
    EventMsg,
    ExecApprovalRequest,
    ExecCommandBegin,
    ExecCommandEnd,
    FileChange,
    McpToolCallBegin,
    McpToolCallEnd,
    PatchApplyBegin,
    PatchApplyEnd,
    StreamError,
    TaskComplete,
    TaskStarted,
    TurnAborted,
    TurnComplete,
    UpdateChange,
)

from ._plan import image_events, plan_events

AgentEvent = dict[str, Any]

AGENT_EVENT_TYPES = frozenset(
    {
        "text",
        "reasoning",
        "llm.retry",
        "step_start",
        "step_complete",
        "tool_call",
        "tool_result",
        "permission.preview",
        "permission.ready",
        "compaction_start",
        "compaction_complete",
        "hidden_user_message",
        "final",
    }
)
"""Codelia's ``AgentEvent`` union (``packages/shared-types/src/events.ts``): all a Codelia UI
is ever sent as ``agent.event``'s ``event``."""

RESULT_LIMIT = 16 * 1024
"""Bytes of a command's stdout (and of its stderr) kept in its ``tool_result``: head and tail."""

SHELL = "shell"
APPLY_PATCH = "apply_patch"


@attrs.define
class RunView:
    """What the builders keep of one run: its Turns and its open tool calls."""

    run_id: str
    preflight: bool = False  # the UI declared supports_permission_preflight_events
    turn: int = 0
    step_open: bool = False
    step_started: float = 0.0
    open_calls: dict[str, str] = attrs.field(factory=dict)  # call_id -> tool
    commands: dict[str, str] = attrs.field(factory=dict)  # shell calls' command lines
    changes: dict[str, dict[str, FileChange]] = attrs.field(factory=dict)  # patches, by call
    last_message: str | None = None
    compacting: bool = False  # a compaction_start not yet completed
    compacted: bool = False  # the run compacted the conversation
    turns_done: int = 0  # model responses completed (a compaction's is not one)
    plans: int = 0  # plan updates shown, for their tool_call ids

    def step_id(self) -> str:
        return f"{self.run_id}:turn-{self.turn}"


UI_CONTEXT_OPEN, UI_CONTEXT_CLOSE = "<ui_context>\n", "\n</ui_context>"
"""How ``run.start``'s UI context is wrapped as the first text part of the run's input."""


def strip_ui_context(text: str) -> str:
    """A run's input text without the ``<ui_context>`` block ``run.start`` put first:
    what the user typed, as a replay or a session's summary shows it."""
    if not text.startswith(UI_CONTEXT_OPEN):
        return text
    end = text.find(UI_CONTEXT_CLOSE)
    return text if end < 0 else text[end + len(UI_CONTEXT_CLOSE) :]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _step_start(run: RunView) -> list[AgentEvent]:
    if run.step_open:
        return []
    run.turn += 1
    run.step_open = True
    run.step_started = time.monotonic()
    title = f"Turn {run.turn}"
    return [
        {"type": "step_start", "step_id": run.step_id(), "title": title, "step_number": run.turn}
    ]


def _step_complete(run: RunView, status: str) -> list[AgentEvent]:
    if not run.step_open:
        return []
    run.step_open = False
    duration = int((time.monotonic() - run.step_started) * 1000)
    return [
        {
            "type": "step_complete",
            "step_id": run.step_id(),
            "status": status,
            "duration_ms": duration,
        }
    ]


def in_step(build: Callable[[RunView, Any], list[AgentEvent]]) -> Builder:
    """A builder for an event that belongs to a Turn: opens the Turn's step first."""

    def builder(run: RunView, msg: Any) -> list[AgentEvent]:
        return _step_start(run) + build(run, msg)

    return builder


def close_open_calls(run: RunView, why: str) -> list[AgentEvent]:
    """A ``tool_result`` for every call shown but not answered (withdrawn, aborted)."""
    events = [
        {
            "type": "tool_result",
            "tool": tool,
            "result": why,
            "tool_call_id": call_id,
            "is_error": True,
        }
        for call_id, tool in run.open_calls.items()
    ]
    run.open_calls.clear()
    return events


# --- the builders ---------------------------------------------------------------------------


def _text(run: RunView, msg: AgentMessage) -> list[AgentEvent]:
    run.last_message = msg.message
    return [{"type": "text", "content": msg.message, "timestamp": _now_ms()}]


def _reasoning(run: RunView, msg: AgentReasoning) -> list[AgentEvent]:
    return [{"type": "reasoning", "content": msg.text, "timestamp": _now_ms()}]


def _shell_call(run: RunView, call_id: str, argv: tuple[str, ...], cwd: str) -> list[AgentEvent]:
    if call_id in run.open_calls:
        return []  # shown when its approval was asked
    run.open_calls[call_id] = SHELL
    run.commands[call_id] = shlex.join(argv)
    args = {"command": run.commands[call_id], "cwd": cwd}
    return [{"type": "tool_call", "tool": SHELL, "args": args, "tool_call_id": call_id}]


def _ready(run: RunView, tool: str, call_id: str) -> list[AgentEvent]:
    if not run.preflight:
        return []
    return [{"type": "permission.ready", "tool": tool, "tool_call_id": call_id}]


def _exec_request(run: RunView, msg: ExecApprovalRequest) -> list[AgentEvent]:
    return _shell_call(run, msg.call_id, msg.command, msg.cwd) + _ready(run, SHELL, msg.call_id)


def _exec_begin(run: RunView, msg: ExecCommandBegin) -> list[AgentEvent]:
    return _shell_call(run, msg.call_id, msg.command, msg.cwd)


def _bounded(text: str) -> str:
    data = text.encode()
    if len(data) <= RESULT_LIMIT:
        return text
    half = RESULT_LIMIT // 2
    omitted = len(data) - 2 * half
    head = data[:half].decode(errors="ignore")
    tail = data[-half:].decode(errors="ignore")
    return f"{head}\n... ({omitted} bytes omitted) ...\n{tail}"


def _exec_end(run: RunView, msg: ExecCommandEnd) -> list[AgentEvent]:
    run.open_calls.pop(msg.call_id, None)
    failed = msg.exit_code != 0 or msg.status != "completed"
    payload: dict[str, Any] = {
        "state": "failed" if failed else "completed",
        "command": run.commands.pop(msg.call_id, ""),
        "exit_code": msg.exit_code,
        "duration_ms": msg.duration_ms,
    }
    if msg.stdout.strip():
        payload["stdout"] = _bounded(msg.stdout.rstrip())
    if msg.stderr.strip():
        payload["stderr"] = _bounded(msg.stderr.rstrip())
    if msg.status == "timed_out":
        payload["failure_message"] = "timed out"
    result = json.dumps(payload, ensure_ascii=False)
    return [
        {
            "type": "tool_result",
            "tool": SHELL,
            "result": result,
            "tool_call_id": msg.call_id,
            "is_error": failed,
        }
    ]


def _mcp_begin(run: RunView, msg: McpToolCallBegin) -> list[AgentEvent]:
    if msg.call_id in run.open_calls:
        return []  # shown when its approval was asked
    tool = f"{msg.invocation.server}__{msg.invocation.tool}"
    run.open_calls[msg.call_id] = tool
    args = msg.invocation.arguments if isinstance(msg.invocation.arguments, dict) else {}
    return [{"type": "tool_call", "tool": tool, "args": args, "tool_call_id": msg.call_id}]


def _mcp_end(run: RunView, msg: McpToolCallEnd) -> list[AgentEvent]:
    name = f"{msg.invocation.server}__{msg.invocation.tool}"
    tool = run.open_calls.pop(msg.call_id, name)
    result = msg.result if isinstance(msg.result, dict) else {}
    ok = result.get("Ok")
    failed = not isinstance(ok, dict) or ok.get("isError") is True
    text = json.dumps(ok if isinstance(ok, dict) else result.get("Err"), ensure_ascii=False)
    return [
        {
            "type": "tool_result",
            "tool": tool,
            "result": _bounded(text),
            "tool_call_id": msg.call_id,
            "is_error": failed,
        }
    ]


def change_diff(path: str, change: FileChange) -> str:
    """One file's change as a unified diff (what the TUI draws with colours)."""
    if isinstance(change, UpdateChange):
        target = change.move_path or path
        body = change.unified_diff
        if body.startswith("--- "):
            return body
        return f"--- a/{path}\n+++ b/{target}\n{body}"
    assert isinstance(change, AddChange | DeleteChange)
    lines = change.content.splitlines()
    if isinstance(change, AddChange):
        head = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n"
        return head + "".join(f"+{line}\n" for line in lines)
    head = f"--- a/{path}\n+++ /dev/null\n@@ -1,{len(lines)} +0,0 @@\n"
    return head + "".join(f"-{line}\n" for line in lines)


def patch_diff(changes: Mapping[str, FileChange]) -> str:
    return "".join(change_diff(path, change) for path, change in changes.items()).rstrip("\n")


_HEADER = {"add": "Add", "delete": "Delete", "update": "Update"}


def patch_headers(changes: Mapping[str, FileChange]) -> str:
    """The patch's outline in apply_patch's own grammar: one file header a change."""
    lines = [
        f"*** {_HEADER.get(change.TYPE, 'Update')} File: {path}" for path, change in changes.items()
    ]
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


def _patch_call(run: RunView, call_id: str, changes: dict[str, FileChange]) -> list[AgentEvent]:
    run.changes[call_id] = changes
    if call_id in run.open_calls:
        return []
    run.open_calls[call_id] = APPLY_PATCH
    # Codelia's TUI counts a patch's files from its "*** ... File:" headers.
    args = {"files": sorted(changes), "patch": patch_headers(changes)}
    return [{"type": "tool_call", "tool": APPLY_PATCH, "args": args, "tool_call_id": call_id}]


def _patch_request(run: RunView, msg: ApplyPatchApprovalRequest) -> list[AgentEvent]:
    events = _patch_call(run, msg.call_id, msg.changes)
    if run.preflight:
        preview: AgentEvent = {
            "type": "permission.preview",
            "tool": APPLY_PATCH,
            "tool_call_id": msg.call_id,
            "diff": patch_diff(msg.changes),
        }
        if len(msg.changes) == 1:
            preview["file_path"] = next(iter(msg.changes))
        if msg.reason:
            preview["summary"] = msg.reason
        events.append(preview)
    return events + _ready(run, APPLY_PATCH, msg.call_id)


def _patch_begin(run: RunView, msg: PatchApplyBegin) -> list[AgentEvent]:
    return _patch_call(run, msg.call_id, msg.changes)


def _patch_end(run: RunView, msg: PatchApplyEnd) -> list[AgentEvent]:
    run.open_calls.pop(msg.call_id, None)
    changes = run.changes.pop(msg.call_id, {})
    if msg.success:
        payload: dict[str, Any] = {
            "summary": f"Applied patch to {len(changes)} file(s)",
            "diff": patch_diff(changes),
        }
        if len(changes) == 1:
            payload["file_path"] = next(iter(changes))
        result = json.dumps(payload, ensure_ascii=False)
    else:
        result = f"error: patch not applied: {msg.stderr}"
    return [
        {
            "type": "tool_result",
            "tool": APPLY_PATCH,
            "result": result,
            "tool_call_id": msg.call_id,
            "is_error": not msg.success,
        }
    ]


def failure_kind(message: str) -> str:
    """Codelia's ``failure_kind`` of a stream error, from the engine's message."""
    lowered = message.lower()
    for needle, kind in (
        ("429", "rate_limit"),
        ("rate", "rate_limit"),
        ("overload", "overloaded"),
        ("503", "overloaded"),
        ("idle", "timeout"),
        ("timed out", "timeout"),
        ("timeout", "timeout"),
        ("connect", "network"),
        ("closed", "network"),
    ):
        if needle in lowered:
            return kind
    return "provider"


def _retry(run: RunView, msg: StreamError) -> list[AgentEvent]:
    return [
        {
            "type": "llm.retry",
            "provider": "openai",
            "failure_kind": failure_kind(msg.message),
            "next_attempt": msg.attempt + 1,
            "max_attempts": msg.max_attempts,
            "delay_ms": 0,
            "delay_source": "backoff",
        }
    ]


def _turn_complete(run: RunView, msg: TurnComplete) -> list[AgentEvent]:
    return close_open_calls(run, "not run") + _step_complete(run, "completed")


def _response_complete(run: RunView, msg: TurnComplete) -> list[AgentEvent]:
    run.turns_done += 1
    return _turn_complete(run, msg)


COMPACTION_DONE = "Compaction run completed."
"""The ``final`` of a run that only compacted (``force_compaction``): Codelia's own words."""


def _task_complete(run: RunView, msg: TaskComplete) -> list[AgentEvent]:
    content = msg.last_agent_message
    if content is None:
        only_compacted = run.compacted and not run.turns_done
        content = COMPACTION_DONE if only_compacted else ""
    return [*_turn_complete(run, TurnComplete()), {"type": "final", "content": content}]


def _compaction_start(run: RunView, msg: ContextCompactionStarted) -> list[AgentEvent]:
    run.compacting = True
    return [{"type": "compaction_start", "timestamp": _now_ms()}]


def _compaction_end(run: RunView, compacted: bool) -> list[AgentEvent]:
    if not run.compacting:
        return []
    run.compacting = False
    run.compacted = run.compacted or compacted
    return [{"type": "compaction_complete", "timestamp": _now_ms(), "compacted": compacted}]


def _compacted(run: RunView, msg: ContextCompacted) -> list[AgentEvent]:
    return _compaction_end(run, True)


def _task_started(run: RunView, msg: TaskStarted) -> list[AgentEvent]:
    return _step_start(run)


def _ended_early(run: RunView, msg: ErrorEvent | TurnAborted) -> list[AgentEvent]:
    why = "aborted" if isinstance(msg, TurnAborted) else f"error: {msg.message}"
    failed = _compaction_end(run, False)
    return failed + close_open_calls(run, why) + _step_complete(run, "error")


Builder = Callable[[RunView, Any], list[AgentEvent]]

MAPPING: Mapping[str, Builder] = {
    "task_started": _task_started,
    "agent_message": in_step(_text),
    "agent_reasoning": in_step(_reasoning),
    "exec_approval_request": in_step(_exec_request),
    "exec_command_begin": in_step(_exec_begin),
    "exec_command_end": in_step(_exec_end),
    "apply_patch_approval_request": in_step(_patch_request),
    "patch_apply_begin": in_step(_patch_begin),
    "patch_apply_end": in_step(_patch_end),
    "mcp_tool_call_begin": in_step(_mcp_begin),
    "mcp_tool_call_end": in_step(_mcp_end),
    "stream_error": in_step(_retry),
    "context_compaction_started": in_step(_compaction_start),
    "context_compacted": in_step(_compacted),
    "plan_update": in_step(plan_events),
    "view_image_tool_call": in_step(image_events),
    "turn_complete": _response_complete,
    "task_complete": _task_complete,
    "turn_aborted": _ended_early,
    "error": _ended_early,
}
"""EventMsg type -> the AgentEvents it becomes. ``run.status`` (the run's terminal status,
``awaiting_ui``) and ``run.context`` (from ``token_count``) are sent beside these."""

NOT_SENT: Mapping[str, str] = {
    "session_configured": "the session's model is kept for model.list and run.context",
    "user_message": "a live UI shows the prompt it sent; session.history replays it as "
    "hidden_user_message, as Codelia's runtime does",
    "agent_message_delta": "a UI renders each text as a block: the whole message is sent",
    "agent_reasoning_delta": "the whole reasoning summary is sent",
    "exec_command_output_delta": "the output is in the command's tool_result",
    "turn_diff": "each patch's tool_result carries its diff",
    "token_count": "sent as run.context",
    "warning": "no AgentEvent carries it: logged on stderr, a runtime log line in the TUI",
    "submission_ack": "the dialect's own bookkeeping",
    "session_list": "answers session.list's list_sessions: becomes that method's result",
    "session_history": "answers session.history's get_history: its events are replayed",
    "list_skills_response": "answers skills.list's list_skills: becomes that method's result",
    "shutdown_complete": "the session's end closes the connection",
    "mcp_startup_update": "the servers' states are mcp.list's answer",
    "mcp_startup_complete": "the servers' states are mcp.list's answer",
    "mcp_list_tools_response": "answers mcp.list's list_mcp_tools: becomes that method's result",
    "request_user_input": "asked of the UI as ui.pick.request or ui.prompt.request "
    "(codelia/_ask.py), with run.status awaiting_ui",
    "dynamic_tool_call_request": "never emitted here: Codelia's runtime protocol has no way "
    "for a UI to declare tools, so the session has none (docs/tools.md)",
}
"""EventMsg types no Codelia UI is sent (a client that asked for codexcore events gets them)."""


def build(run: RunView, msg: EventMsg) -> list[AgentEvent]:
    """The AgentEvents ``msg`` becomes for ``run`` (none for a type in :data:`NOT_SENT`)."""
    builder = MAPPING.get(msg.TYPE)
    return builder(run, msg) if builder is not None else []


def codexcore_event(wire_msg: Mapping[str, Any]) -> AgentEvent:
    """An EventMsg for a client that asked for every one: its type namespaced ``codexcore.``."""
    return {**wire_msg, "type": f"codexcore.{wire_msg['type']}"}
