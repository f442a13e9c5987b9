"""Seed 000's context methods and ``tool.call`` on the JSON-RPC dialect.

* ``ui.context.update`` (a notification in the seed and in Codelia's runtime; a
  request is answered ``null``): the UI's cwd, workspace root, active file and
  selection, kept on the connection. Each update replaces the fields it carries.
* ``run.start``'s own ``ui_context`` is merged over the kept one (its fields
  win, and are kept), and the merged snapshot reaches the model as the first
  text part of the run's input: an ``<ui_context>`` block holding it as JSON.
* ``context.inspect`` -> ``{runtime_working_dir, runtime_sandbox_root,
  ui_context {cwd, workspace_root, active_file_path}}`` in Codelia's shape. The
  working dir and the sandbox root are both the session's cwd (the root the
  engine holds commands' cwd inside). With ``include_agents``, ``agents`` is the
  AGENTS.md the engine sends the model for that cwd (``{root, max_bytes,
  truncated, files: [{path, scope, size_bytes, sent_bytes}], text}``: global
  first, then the project root down to the cwd). ``include_skills`` adds
  ``skills`` (:func:`._skills.inspect_skills`).
* ``tool.call`` is registered here; :mod:`._tools` serves it.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.jsonrpc._errors import RUNTIME_BUSY, SERVER_ERROR, USER_CANCELLED
from codexcore.adapters.jsonrpc._methods import decode_params
from codexcore.protocol import InputItem, TextInput

from ._events import UI_CONTEXT_CLOSE, UI_CONTEXT_OPEN
from ._skills import INSPECT_SKILLS, inspect_skills

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._methods import MethodTable
    from codexcore.adapters.jsonrpc._server import RpcContext

MAX_SELECTED_TEXT = 16 * 1024
"""Characters of a selection's text given to the model; the rest is cut, and says so."""


@attrs.frozen
class Position:
    line: int
    column: int


@attrs.frozen
class Range:
    start: Position
    end: Position


@attrs.frozen
class ActiveFile:
    path: str
    language_id: str | None = None


@attrs.frozen
class Selection:
    path: str
    range: Range
    selected_text: str | None = None


@attrs.frozen
class UiContext:
    """Seed 000's ``UiContextUpdateParams`` (= ``UiContextSnapshot``)."""

    cwd: str | None = None
    workspace_root: str | None = None
    active_file: ActiveFile | None = None
    selection: Selection | None = None
    extensions: dict[str, Any] | None = None


@attrs.frozen
class ContextInspect:
    include_agents: bool | None = None
    include_skills: bool | None = None


_KEPT: weakref.WeakKeyDictionary[RpcContext, dict[str, Any]] = weakref.WeakKeyDictionary()


def _kept(ctx: RpcContext) -> dict[str, Any]:
    kept = _KEPT.get(ctx)
    if kept is None:
        kept = _KEPT[ctx] = {}
    return kept


def _wire(context: UiContext) -> dict[str, Any]:
    """The fields the UI sent (None ones are fields it did not send)."""
    return attrs.asdict(context, filter=lambda _, value: value is not None)


def keep_ui_context(ctx: RpcContext, value: dict[str, Any] | None, path: str) -> dict[str, Any]:
    """Merge ``value`` (a ``UiContextSnapshot``, checked: -32602 naming ``path``'s
    bad field) over the connection's kept context; the merged context."""
    kept = _kept(ctx)
    if value is not None:
        kept.update(_wire(decode_params(UiContext, value, path)))
    return kept


def ui_context_part(context: dict[str, Any]) -> tuple[InputItem, ...]:
    """The kept context as the run's first input part (none when nothing is kept)."""
    if not context:
        return ()
    shown = dict(context)
    selection: dict[str, Any] = shown.get("selection") or {}
    text = selection.get("selected_text")
    if isinstance(text, str) and len(text) > MAX_SELECTED_TEXT:
        cut = len(text) - MAX_SELECTED_TEXT
        selection = {**selection, "selected_text": f"{text[:MAX_SELECTED_TEXT]}...[{cut} more]"}
        shown["selection"] = selection
    block = json.dumps(shown, ensure_ascii=False)
    return (TextInput(f"{UI_CONTEXT_OPEN}{block}{UI_CONTEXT_CLOSE}"),)


async def ui_context_update(ctx: RpcContext, params: UiContext) -> None:
    _kept(ctx).update(_wire(params))


async def context_inspect(ctx: RpcContext, params: ContextInspect) -> dict[str, Any]:
    from ._runs import state_of

    state = state_of(ctx)
    await state.attachment()
    cwd = state.cwd or ctx.host.engine_config.session.cwd
    kept = _kept(ctx)
    active = kept.get("active_file") or {}
    ui = {
        "cwd": kept.get("cwd"),
        "workspace_root": kept.get("workspace_root"),
        "active_file_path": active.get("path"),
    }
    result: dict[str, Any] = {
        "runtime_working_dir": cwd,
        "runtime_sandbox_root": cwd,
        "ui_context": {key: value for key, value in ui.items() if value is not None},
    }
    if params.include_agents:
        result["agents"] = await _agents(ctx, cwd)
    if params.include_skills:
        result["skills"] = await inspect_skills(ctx, cwd)
    return result


async def _agents(ctx: RpcContext, cwd: str) -> dict[str, Any]:
    """The AGENTS.md files and text the engine sends the model for ``cwd``."""
    from codexcore.engine import default_home, read_project_docs

    config = ctx.host.engine_config
    home = config.home or str(default_home())
    docs = await asyncio.to_thread(read_project_docs, cwd, home, config.project_doc_max_bytes)
    files = [
        {"path": d.path, "scope": d.scope, "size_bytes": d.size, "sent_bytes": d.sent_bytes}
        for d in docs.files
    ]
    return {
        "root": docs.root,
        "max_bytes": docs.max_bytes,
        "truncated": docs.truncated,
        "files": files,
        "text": docs.text,
    }


_UI_CONTEXT_SHAPE = {
    "type": "object",
    "properties": {
        name: {"type": "string"} for name in ("cwd", "workspace_root", "active_file_path")
    },
}
_AGENTS_SHAPE = {
    "type": "object",
    "properties": {
        "root": {"type": "string"},
        "max_bytes": {"type": "integer"},
        "truncated": {"type": "boolean"},
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "scope": {"enum": ["global", "project"]},
                    "size_bytes": {"type": "integer"},
                    "sent_bytes": {"type": "integer"},
                },
                "required": ["path", "scope", "size_bytes", "sent_bytes"],
            },
        },
        "text": {"type": "string"},
    },
    "required": ["root", "max_bytes", "truncated", "files", "text"],
}
CONTEXT_INSPECT_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "runtime_working_dir": {"type": "string"},
        "runtime_sandbox_root": {"type": "string"},
        "ui_context": _UI_CONTEXT_SHAPE,
        "agents": _AGENTS_SHAPE,
        "skills": INSPECT_SKILLS,
    },
    "required": ["runtime_working_dir", "runtime_sandbox_root", "ui_context"],
}


def add_context_methods(table: MethodTable) -> None:
    """Register ``context.inspect``, ``ui.context.update`` and ``tool.call``
    (which make ``supports_context_inspect`` and ``supports_tool_call`` true)."""
    table.add(
        "context.inspect",
        context_inspect,
        ContextInspect,
        summary="The runtime's working dir and sandbox root, the UI context it keeps, "
        "and (include_agents) the AGENTS.md it sends the model",
        result=CONTEXT_INSPECT_RESULT,
        errors=(SERVER_ERROR,),
    )
    table.add(
        "ui.context.update",
        ui_context_update,
        UiContext,
        inline=True,  # kept for the next run.start, which may follow at once
        summary="Keep the UI's context (cwd, active file, selection) for the next run",
        result={"type": "null"},
    )
    from ._tools import TOOL_CALL_RESULT, ToolCall, ToolCallDocumented, tool_call

    table.add(
        "tool.call",
        tool_call,
        ToolCall,
        summary="Run a built-in tool (shell, read_file) directly, under the session's sandbox",
        result=TOOL_CALL_RESULT,
        shapes=(ToolCallDocumented,),
        errors=(SERVER_ERROR, RUNTIME_BUSY, USER_CANCELLED),
    )
