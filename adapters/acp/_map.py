"""The ACP mapping tables: engine Events -> ``session/update``s, prompts -> input, modes.

Everything here is synchronous and does no I/O except reading a changed file
to show its diff (``ToolCallMapper`` is given the reader). The agent
(:mod:`._agent`) does the talking.

Event -> update, one row each (``ToolCallMapper.updates``):

================================  ===================================================
``agent_message_delta``           ``agent_message_chunk``
``agent_message``                 ``agent_message_chunk`` (only if no delta streamed it)
``agent_reasoning_delta``         ``agent_thought_chunk``
``agent_reasoning``               ``agent_thought_chunk`` (only if no delta streamed it)
``user_message`` (replay only)    ``user_message_chunk``: the text, each ``<context>``
                                  block as an embedded resource, each image
                                  (:func:`user_message_parts`); a live prompt is
                                  the client's own and is not echoed
``exec_approval_request``         ``tool_call`` kind execute, status pending
``exec_command_begin``            ``tool_call`` in_progress (or an update of the pending one)
``exec_command_output_delta``     ``tool_call_update``: the output so far as its content
``exec_command_end``              ``tool_call_update`` completed / failed, exit code
``apply_patch_approval_request``  ``tool_call`` kind edit, pending, ``diff`` content, locations
``patch_apply_begin``             ``tool_call`` edit in_progress (or an update)
``patch_apply_end``               ``tool_call_update`` completed / failed
``exec_approval_request`` of MCP  ``tool_call`` kind other, title ``server.tool``, pending
                                  (its command is ``["mcp", server, tool, args]``)
``mcp_tool_call_begin``           ``tool_call`` other in_progress (or an update)
``mcp_tool_call_end``             ``tool_call_update`` completed / failed, the result's
                                  content (text, images) and the result as raw output
``token_count``                   ``usage_update`` (and the prompt's ``usage``)
``warning``, ``stream_error``     ``agent_thought_chunk`` naming it
``plan_update``                   ``plan``: one ``PlanEntry`` per step, status as is,
                                  priority ``medium`` (see :func:`plan_entries`); the
                                  explanation, if any, as an ``agent_thought_chunk``
================================  ===================================================

An approval request is an MCP call's only when its command names one of the
session's MCP servers (``mcp_servers``): a shell command that happens to be
called ``mcp`` stays a command.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import shlex
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    ImageContentBlock,
    PlanEntry,
    ResourceContentBlock,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    UsageUpdate,
    UserMessageChunk,
)

from codexcore.protocol import (
    TERMINAL_EVENT_TYPES,
    AddChange,
    DeleteChange,
    EventMsg,
    FileChange,
    UpdateChange,
)

from ._diff import DiffMismatch, old_and_new

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | UsageUpdate
    | AgentPlanUpdate
)

UserContent = (
    TextContentBlock | ImageContentBlock | ResourceContentBlock | EmbeddedResourceContentBlock
)

OUTPUT_SHOWN = 64 * 1024
"""How much of a command's output (its tail) a tool call shows while it runs and after.

ACP replaces a tool call's content with every update, so each one resends it:
the tail keeps that bounded. The model gets the engine's own output limit."""


# --- text blocks --------------------------------------------------------------------


def text(value: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=value)


def message_chunk(value: str) -> AgentMessageChunk:
    return AgentMessageChunk(session_update="agent_message_chunk", content=text(value))


def thought_chunk(value: str) -> AgentThoughtChunk:
    return AgentThoughtChunk(session_update="agent_thought_chunk", content=text(value))


def _fenced(output: str) -> str:
    fence = "```"
    while fence in output:
        fence += "`"
    return f"{fence}\n{output}{'' if output.endswith(chr(10)) or not output else chr(10)}{fence}"


def _tail(output: str) -> str:
    if len(output) <= OUTPUT_SHOWN:
        return output
    return "[… earlier output not shown …]\n" + output[-OUTPUT_SHOWN:]


# --- tool calls ---------------------------------------------------------------------


@attrs.define
class ToolCallState:
    """What the editor has been told of one call (keyed by the engine's call_id)."""

    kind: ToolKind
    title: str
    output: str = ""
    finished: bool = False
    began: bool = False  # it ran (or runs): not only asked about
    terminal_id: str | None = None  # the editor terminal it runs in, if any
    shown: ToolCallStart | None = None  # how it was announced
    # Chunks may split a UTF-8 sequence: decode across them.
    decoder: codecs.IncrementalDecoder = attrs.field(
        factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )


FileReader = Callable[[str], "str | None"]
"""Reads a file's current text from disk (None when it cannot be read)."""


@attrs.define
class ToolCallMapper:
    """Turns one session's events into ACP updates, remembering its tool calls.

    ``replaying`` marks a recorded session being replayed: the user's prompts are
    sent back (live, the client has them already), and approval requests are
    shown as pending calls but never asked again.
    """

    cwd: str
    read_file: FileReader
    context_window: int
    mcp_servers: frozenset[str] = frozenset()
    replaying: bool = False
    calls: dict[str, ToolCallState] = attrs.field(factory=dict)
    streamed_message: bool = False
    streamed_reasoning: bool = False
    refused: bool = False

    def updates(self, msg: EventMsg) -> list[Update]:
        """The updates ``msg`` becomes (often none)."""
        handler = _ROWS.get(msg.TYPE)
        answered = self._answered(msg) if self.replaying else []
        return answered + (handler(self, msg) if handler is not None else [])

    def _answered(self, msg: EventMsg) -> list[Update]:
        """Replaying: a call still waiting for its approval when the Task went on was
        rejected. Calls run one at a time, and an approved one begins before anything
        else happens, so any later progress of the Task means the user said no."""
        if msg.TYPE in TERMINAL_EVENT_TYPES or msg.TYPE in _NOT_PROGRESS:
            return []
        call_id = getattr(msg, "call_id", None)
        waiting = [
            cid
            for cid, state in self.calls.items()
            if not state.finished and not state.began and cid != call_id
        ]
        return [self.refused_call(cid, "rejected by the user: not run") for cid in waiting]

    def finish_task(self, terminal_type: str | None) -> list[Update]:
        """The calls the Task's end (``terminal_type``; None: the recording stops
        before it) left open, ended saying what became of them."""
        updates: list[Update] = []
        for call_id, state in self.calls.items():
            if not state.finished:
                ran = _OUTCOME_RUNNING if state.began else _OUTCOME_WAITING
                updates.append(self.refused_call(call_id, ran[terminal_type]))
        return updates

    # --- messages

    def _message_delta(self, msg: Any) -> list[Update]:
        self.streamed_message = True
        return [message_chunk(msg.delta)]

    def _message(self, msg: Any) -> list[Update]:
        self.refused = self.refused or bool(msg.refusal)
        streamed, self.streamed_message = self.streamed_message, False
        return [] if streamed or not msg.message else [message_chunk(msg.message)]

    def _reasoning_delta(self, msg: Any) -> list[Update]:
        self.streamed_reasoning = True
        return [thought_chunk(msg.delta)]

    def _reasoning(self, msg: Any) -> list[Update]:
        streamed, self.streamed_reasoning = self.streamed_reasoning, False
        return [] if streamed or not msg.text else [thought_chunk(msg.text)]

    def _user_message(self, msg: Any) -> list[Update]:
        # Live, the prompt is the client's own: echoing it shows it twice (Toad) or
        # appends it to the user's message (Zed). Only a replay sends it back.
        if not self.replaying:
            return []
        message = getattr(msg, "message", None)
        images = getattr(msg, "images", None) or ()
        parts = user_message_parts(message if isinstance(message, str) else "", images)
        return [UserMessageChunk(session_update="user_message_chunk", content=p) for p in parts]

    def _notice(self, msg: Any) -> list[Update]:
        return [thought_chunk(f"[{msg.TYPE}] {msg.message}\n")]

    def _usage(self, msg: Any) -> list[Update]:
        used = msg.input_tokens + msg.output_tokens
        return [UsageUpdate(session_update="usage_update", used=used, size=self.context_window)]

    def _plan(self, msg: Any) -> list[Update]:
        updates: list[Update] = []
        if msg.explanation:
            updates.append(thought_chunk(f"[plan] {msg.explanation}\n"))
        updates.append(AgentPlanUpdate(session_update="plan", entries=plan_entries(msg.plan)))
        return updates

    # --- commands

    def _exec_request(self, msg: Any) -> list[Update]:
        called = self.mcp_call_of(msg.command)
        if called is not None:
            return [self._mcp_start(msg.call_id, *called, "pending")]
        return [self._start(msg.call_id, "execute", shlex.join(msg.command), "pending", msg)]

    def mcp_call_of(self, command: Iterable[str]) -> tuple[str, str, Any] | None:
        """``(server, tool, arguments)`` when ``command`` is how the engine asks about a
        call of a tool of one of this session's MCP servers, else None."""
        argv = list(command)
        if len(argv) != 4 or argv[0] != "mcp" or argv[1] not in self.mcp_servers:
            return None
        try:
            arguments = json.loads(argv[3])
        except ValueError:
            return None
        return argv[1], argv[2], arguments

    def _exec_begin(self, msg: Any) -> list[Update]:
        if msg.source != "agent":
            return []  # the user's own shell commands: not the model's tool calls
        if msg.call_id in self.calls:
            self.calls[msg.call_id].began = True
            return [self.progress(msg.call_id, status="in_progress")]
        return [self._start(msg.call_id, "execute", shlex.join(msg.command), "in_progress", msg)]

    def _exec_delta(self, msg: Any) -> list[Update]:
        state = self.calls.get(msg.call_id)
        if state is None or msg.source != "agent":
            return []
        state.output += state.decoder.decode(msg.chunk)
        return [self.progress(msg.call_id, content=[_content(_fenced(_tail(state.output)))])]

    def _exec_end(self, msg: Any) -> list[Update]:
        state = self.calls.get(msg.call_id)
        if state is None or msg.source != "agent":
            return []
        state.finished = True
        state.output = msg.aggregated_output or state.output
        ok = msg.status == "completed" and msg.exit_code == 0
        said = "timed out" if msg.status == "timed_out" else f"exit code {msg.exit_code}"
        raw = {"exit_code": msg.exit_code, "status": msg.status, "duration_ms": msg.duration_ms}
        content: list[Any]
        if state.terminal_id is not None:  # the output stays in the editor's terminal
            content = [terminal(state.terminal_id), _content(said)]
        else:
            content = [_content(_fenced(_tail(state.output)) + f"\n\n{said}")]
        status: ToolCallStatus = "completed" if ok else "failed"
        return [self.progress(msg.call_id, status=status, content=content, raw_output=raw)]

    # --- MCP tool calls

    def _mcp_begin(self, msg: Any) -> list[Update]:
        state = self.calls.get(msg.call_id)
        if state is not None:
            # Refused already (the engine still reports the denied call): it stays failed.
            state.began = state.began or not state.finished
            return [] if state.finished else [self.progress(msg.call_id, status="in_progress")]
        called = msg.invocation
        return [self._mcp_start(msg.call_id, called.server, called.tool, called.arguments)]

    def _mcp_end(self, msg: Any) -> list[Update]:
        state = self.calls.get(msg.call_id)
        if state is None or state.finished:
            return []
        state.finished = True
        result = msg.result if isinstance(msg.result, dict) else {}
        ok = result.get("Ok")
        if not isinstance(ok, dict):
            why = str(result.get("Err") or "the call failed")
            return [self.refused_call(msg.call_id, why)]
        status: ToolCallStatus = "failed" if ok.get("isError") else "completed"
        content = _mcp_content(ok)
        return [self.progress(msg.call_id, status=status, content=content, raw_output=ok)]

    def _mcp_start(
        self,
        call_id: str,
        server: str,
        tool: str,
        arguments: Any,
        status: ToolCallStatus = "in_progress",
    ) -> ToolCallStart:
        shown = json.dumps(arguments, indent=2, ensure_ascii=False)
        return self._announce(
            ToolCallStart(
                session_update="tool_call",
                tool_call_id=call_id,
                title=f"{server}.{tool}",
                kind="other",
                status=status,
                content=[_content(_fenced(shown))] if arguments else None,
                raw_input={"server": server, "tool": tool, "arguments": arguments},
            )
        )

    # --- patches

    def _patch_request(self, msg: Any) -> list[Update]:
        return [self._edit(msg.call_id, msg.changes, "pending")]

    def _patch_begin(self, msg: Any) -> list[Update]:
        if msg.call_id in self.calls:
            self.calls[msg.call_id].began = True
            return [self.progress(msg.call_id, status="in_progress")]
        return [self._edit(msg.call_id, msg.changes, "in_progress")]

    def _patch_end(self, msg: Any) -> list[Update]:
        if msg.call_id not in self.calls:
            return []
        self.calls[msg.call_id].finished = True
        said = (msg.stdout if msg.success else msg.stderr).strip()
        status = "completed" if msg.success else "failed"
        raw = {"success": msg.success, "stdout": msg.stdout, "stderr": msg.stderr}
        extra = {"content": [_content(said)]} if not msg.success and said else {}
        return [self.progress(msg.call_id, status=status, raw_output=raw, **extra)]

    def _edit(
        self, call_id: str, changes: dict[str, FileChange], status: ToolCallStatus
    ) -> ToolCallStart:
        paths = [self.absolute(path) for path in changes]
        title = "Edit " + ", ".join(os.path.relpath(p, self.cwd) for p in paths)
        content: list[Any] = [self.diff(path, change) for path, change in changes.items()]
        return self._announce(
            ToolCallStart(
                session_update="tool_call",
                tool_call_id=call_id,
                title=title,
                kind="edit",
                status=status,
                content=content,
                locations=[ToolCallLocation(path=p) for p in paths],
                raw_input={"changes": sorted(changes)},
            )
        )

    def diff(
        self, path: str, change: FileChange
    ) -> FileEditToolCallContent | ContentToolCallContent:
        """One file's ``diff`` content: whole old and new texts."""
        where = self.absolute(path)
        if isinstance(change, AddChange):
            return _diff(where, None, change.content)
        if isinstance(change, DeleteChange):
            return _diff(where, change.content, "")
        assert isinstance(change, UpdateChange)
        target = self.absolute(change.move_path) if change.move_path else where
        current = self.read_file(where) or self.read_file(target) or ""
        try:
            old, new = old_and_new(current, change.unified_diff)
        except DiffMismatch:  # changed meanwhile: show the diff itself
            return _content(f"{where}\n{_fenced(change.unified_diff)}")
        return _diff(target, old, new)

    def absolute(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.cwd, path))

    # --- shared

    def _start(
        self, call_id: str, kind: ToolKind, title: str, status: ToolCallStatus, msg: Any
    ) -> ToolCallStart:
        return self._announce(
            ToolCallStart(
                session_update="tool_call",
                tool_call_id=call_id,
                title=title,
                kind=kind,
                status=status,
                locations=[ToolCallLocation(path=msg.cwd)],
                raw_input={"command": list(msg.command), "cwd": msg.cwd},
            )
        )

    def _announce(self, start: ToolCallStart) -> ToolCallStart:
        self.calls[start.tool_call_id] = ToolCallState(
            start.kind or "other", start.title, began=start.status != "pending", shown=start
        )
        return start

    def permission_view(self, call_id: str) -> ToolCallUpdate:
        """The call as a permission request shows it: title, kind, and its content
        (an edit's diffs) and locations, so the editor can preview what it allows."""
        state = self.calls[call_id]
        shown = state.shown
        return ToolCallUpdate(
            tool_call_id=call_id,
            title=state.title,
            kind=state.kind,
            status="pending",
            content=shown.content if shown else None,
            locations=shown.locations if shown else None,
            raw_input=shown.raw_input if shown else None,
        )

    def progress(self, call_id: str, **fields: Any) -> ToolCallProgress:
        """A ``tool_call_update`` of ``call_id`` with ``fields`` (status, content …)."""
        return ToolCallProgress(session_update="tool_call_update", tool_call_id=call_id, **fields)

    def refused_call(self, call_id: str, why: str) -> ToolCallProgress:
        """The call was not allowed (or not asked): it ends ``failed``, saying why."""
        if call_id in self.calls:
            self.calls[call_id].finished = True
        return self.progress(call_id, status="failed", content=[_content(why)])

    def unfinished(self) -> Iterable[str]:
        """Calls that never got a final status (the Task was cancelled under them)."""
        return [cid for cid, state in self.calls.items() if not state.finished]


_CONTEXT = re.compile(r'<context ref="([^"]*)">\n(.*?)\n</context>', re.DOTALL)


def user_message_parts(message: str, images: Iterable[str]) -> list[UserContent]:
    """A recorded prompt as the content blocks the user sent: its text, each file it
    attached (the ``<context ref>`` blocks :mod:`._prompt` made) as an embedded
    resource, each image as an image (a web address as a link). The engine records
    the prompt's text parts joined; the context blocks mark where they were."""
    parts: list[UserContent] = []
    at = 0
    for found in _CONTEXT.finditer(message):
        if message[at : found.start()]:
            parts.append(text(message[at : found.start()]))
        resource = TextResourceContents(uri=found.group(1), text=found.group(2))
        parts.append(EmbeddedResourceContentBlock(type="resource", resource=resource))
        at = found.end()
    if message[at:]:
        parts.append(text(message[at:]))
    for url in images:
        parts.append(_image(url))
    return parts


def _image(url: str) -> ImageContentBlock | ResourceContentBlock:
    head, comma, data = url.partition(",")
    if url.startswith("data:") and comma and head.endswith(";base64"):
        mime = head[len("data:") : -len(";base64")] or "application/octet-stream"
        return ImageContentBlock(type="image", mime_type=mime, data=data)
    name = url.rsplit("/", 1)[-1] or url
    return ResourceContentBlock(type="resource_link", uri=url, name=name)


def plan_entries(plan: Iterable[Any]) -> list[PlanEntry]:
    """The model's plan steps as ACP plan entries, in order.

    ``update_plan`` has no priorities, so every entry is ``medium``: the plan's
    order is the model's sequence, and ``high`` or ``low`` would claim a
    ranking it never made (``medium`` is the neutral middle, as Codex's own ACP
    agent writes it). The three statuses are the same in both protocols."""
    return [PlanEntry(content=item.step, priority="medium", status=item.status) for item in plan]


def _mcp_content(result: dict[str, Any]) -> list[Any]:
    """A ``CallToolResult``'s content as a tool call shows it: text and images as
    they are (MCP's content blocks are ACP's), anything else as its JSON; the
    structured content when there is no content."""
    shown: list[Any] = []
    for block in result.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            shown.append(_content(str(block.get("text", ""))))
        elif isinstance(block, dict) and block.get("type") == "image":
            image = ImageContentBlock(
                type="image", data=str(block.get("data", "")), mime_type=str(block.get("mimeType"))
            )
            shown.append(ContentToolCallContent(type="content", content=image))
        else:
            shown.append(_content(_fenced(json.dumps(block, ensure_ascii=False))))
    if not shown and result.get("structuredContent") is not None:
        shown.append(_content(_fenced(json.dumps(result["structuredContent"], indent=2))))
    return shown


def terminal(terminal_id: str) -> TerminalToolCallContent:
    return TerminalToolCallContent(type="terminal", terminal_id=terminal_id)


def _content(value: str) -> ContentToolCallContent:
    return ContentToolCallContent(type="content", content=text(value))


def _diff(path: str, old: str | None, new: str) -> FileEditToolCallContent:
    return FileEditToolCallContent(type="diff", path=path, old_text=old, new_text=new)


_NOT_PROGRESS = frozenset({"warning", "stream_error", "turn_diff"})
"""Events that may come while a call waits for its approval without the Task going on."""

_OUTCOME_WAITING = {
    "turn_aborted": "cancelled before it was approved: not run",
    "error": "not run: the task failed first",
    "task_complete": "not run: the task was stopped before it was approved",
    None: "not run: the session ended while it waited for approval",
}
_OUTCOME_RUNNING = {
    "turn_aborted": "cancelled while it ran",
    "error": "failed: the task failed while it ran",
    "task_complete": "ended without a result",
    None: "the session ended while it ran; its outcome was not recorded",
}

_ROWS: dict[str, Callable[[ToolCallMapper, Any], list[Update]]] = {
    "agent_message_delta": ToolCallMapper._message_delta,
    "agent_message": ToolCallMapper._message,
    "agent_reasoning_delta": ToolCallMapper._reasoning_delta,
    "agent_reasoning": ToolCallMapper._reasoning,
    "user_message": ToolCallMapper._user_message,
    "exec_approval_request": ToolCallMapper._exec_request,
    "exec_command_begin": ToolCallMapper._exec_begin,
    "exec_command_output_delta": ToolCallMapper._exec_delta,
    "exec_command_end": ToolCallMapper._exec_end,
    "apply_patch_approval_request": ToolCallMapper._patch_request,
    "patch_apply_begin": ToolCallMapper._patch_begin,
    "patch_apply_end": ToolCallMapper._patch_end,
    "token_count": ToolCallMapper._usage,
    "warning": ToolCallMapper._notice,
    "stream_error": ToolCallMapper._notice,
    "mcp_tool_call_begin": ToolCallMapper._mcp_begin,
    "mcp_tool_call_end": ToolCallMapper._mcp_end,
    "plan_update": ToolCallMapper._plan,
}
