"""The Codelia runtime protocol's ``tool.call {name, arguments?}`` -> ``{ok, result}``.

A built-in tool run directly, outside a Task, for the UI's own user (section 5.10).
What runs outside a Task is served; every other built-in tool is answered -32602
saying why it cannot run here:

* ``shell``: ``arguments`` are ``shell.exec``'s params, ``result`` its result
  (the engine's ``run_user_shell_command``, ``record=False``, under the session's
  sandbox); ``ok`` is true when the command exited 0.
* ``read_file {path, max_bytes = 65536}``: a regular file inside the session's
  cwd (the sandbox root; symlinks resolved), its first ``max_bytes`` bytes (at
  most 1 MiB) as UTF-8 text: ``{path, content, size_bytes, truncated}``.
* ``tool_output_cache {ref_id, offset = 0, limit = 2000}``: lines of a long
  ``shell.exec`` output kept whole (:mod:`._output_cache`), ``{ref_id, content,
  offset, total_lines, next_offset}``.
* ``apply_patch {patch}``: under the engine's approval rules for a patch
  (:mod:`._patch`); a denial is -32003 (user cancelled).
* ``view_image``, ``update_plan``, ``request_user_input``: they belong to a Task
  (an image is attached to the model's next request; a plan is the Task's; a
  question is the model's), so none of them runs here.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

import attrs

from codexcore.adapters.jsonrpc._machine import INVALID_PARAMS, RpcError
from codexcore.adapters.jsonrpc._methods import decode_params

from ._output_cache import CACHE_READ_RESULT, CacheRead, read_cached
from ._shell import SHELL_EXEC_RESULT, ShellExecParams, shell_exec

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._server import RpcContext

TOOLS = ("shell", "read_file", "tool_output_cache", "apply_patch")
"""The built-in tools ``tool.call`` serves."""

READ_DEFAULT = 64 * 1024
READ_MAX = 1024 * 1024

NOT_HERE = {
    "view_image": "view_image attaches an image to the model's next request, and only a "
    "Task makes one; send the image as an image_url part of run.start's input",
    "update_plan": "the plan is the running Task's own, updated by the model",
    "request_user_input": "it is the model's question to the user: the UI is asked with "
    "ui.pick.request / ui.prompt.request when the model calls it",
}
"""The built-in tools that cannot run outside a Task, and why: ``tool.call``'s answer."""

_SHELL_ARGUMENTS = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "timeout_seconds": {"type": "number"},
        "cwd": {"type": "string"},
    },
    "required": ["command"],
}
_CACHE_ARGUMENTS = {
    "type": "object",
    "properties": {
        "ref_id": {"type": "string"},
        "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["ref_id"],
}
_READ_ARGUMENTS = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "max_bytes": {"type": "integer", "minimum": 1}},
    "required": ["path"],
}

_PATCH_ARGUMENTS = {
    "type": "object",
    "properties": {"patch": {"type": "string"}},
    "required": ["patch"],
}
_ARGUMENTS = {"oneOf": [_SHELL_ARGUMENTS, _READ_ARGUMENTS, _CACHE_ARGUMENTS, _PATCH_ARGUMENTS]}


@attrs.frozen
class ToolCall:
    """``arguments`` is optional, as in the protocol; a tool that needs some says which."""

    name: str = attrs.field(metadata={"schema": {"enum": list(TOOLS)}})
    arguments: dict[str, Any] | None = attrs.field(default=None, metadata={"schema": _ARGUMENTS})


@attrs.frozen
class ToolCallDocumented:
    """What ``tool.call``'s params are documented as: every tool served takes arguments
    (``arguments`` left out is taken, and the tool says which of its fields it misses)."""

    name: str = attrs.field(metadata={"schema": {"enum": list(TOOLS)}})
    arguments: dict[str, Any] = attrs.field(metadata={"schema": _ARGUMENTS})


@attrs.frozen
class ReadFile:
    path: str
    max_bytes: int = READ_DEFAULT


async def tool_call(ctx: RpcContext, params: ToolCall) -> dict[str, Any]:
    if params.name in NOT_HERE:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: params.name: {params.name!r} cannot run outside a Task: "
            f"{NOT_HERE[params.name]}",
        )
    if params.name not in TOOLS:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: params.name: unknown tool {params.name!r} "
            f"(tool.call serves: {', '.join(TOOLS)})",
        )
    arguments = params.arguments or {}
    if params.name == "read_file":
        return await _read_file(ctx, decode_params(ReadFile, arguments, "params.arguments"))
    if params.name == "apply_patch":
        from ._patch import PatchArguments, apply_patch

        return await apply_patch(ctx, decode_params(PatchArguments, arguments, "params.arguments"))
    if params.name == "tool_output_cache":
        read = decode_params(CacheRead, arguments, "params.arguments")
        return {"ok": True, "result": read_cached(ctx, read)}
    shell = decode_params(ShellExecParams, arguments, "params.arguments")
    try:
        result = await shell_exec(ctx, shell)
    except RpcError as exc:
        # shell.exec names its own params; here they are tool.call's arguments.
        raise RpcError(
            exc.code, exc.message.replace("params.", "params.arguments."), exc.data
        ) from None
    return {"ok": result["exit_code"] == 0, "result": result}


async def _read_file(ctx: RpcContext, params: ReadFile) -> dict[str, Any]:
    from ._runs import state_of

    if not 0 < params.max_bytes <= READ_MAX:
        raise RpcError(
            INVALID_PARAMS, f"Invalid params: params.arguments.max_bytes: 1 to {READ_MAX}"
        )
    state = state_of(ctx)
    await state.attachment()
    root = state.cwd or ctx.host.engine_config.session.cwd
    try:
        path, data, size = await asyncio.to_thread(_read, root, params.path, params.max_bytes)
    except OSError as exc:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: params.arguments.path: {params.path!r}: {exc.strerror} "
            f"(read_file reads regular files inside {root})",
        ) from None
    return {
        "ok": True,
        "result": {
            "path": path,
            "content": data.decode("utf-8", errors="replace"),
            "size_bytes": size,
            "truncated": size > len(data),
        },
    }


def _read(root: str, relative: str, limit: int) -> tuple[str, bytes, int]:
    """The file ``relative`` names (from ``root``, which it must stay inside): its path,
    its first ``limit`` bytes and its size."""
    from codexcore.tools._safe_read import read_head

    path = os.path.normpath(os.path.join(root, relative))
    data, size = read_head(path, limit, within=[root])
    return path, data, size


READ_FILE_RESULT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "size_bytes": {"type": "integer"},
        "truncated": {"type": "boolean"},
    },
    "required": ["path", "content", "size_bytes", "truncated"],
}
PATCH_RESULT = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "files": {"type": "array"}},
    "required": ["summary", "files"],
}
TOOL_CALL_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "result": {"oneOf": [SHELL_EXEC_RESULT, READ_FILE_RESULT, CACHE_READ_RESULT, PATCH_RESULT]},
    },
    "required": ["ok", "result"],
}
