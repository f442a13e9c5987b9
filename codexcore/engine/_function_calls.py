"""The model's call of a function tool: approval, events, running it, and its answer.

A function tool's call is shown as an MCP tool call of the server ``codexcore``
(``mcp_tool_call_begin``/``end``, with the arguments, the result as MCP's
``CallToolResult`` and the duration), and asked about as one (an
``exec_approval_request`` whose command is ``["mcp", "codexcore", TOOL,
ARGUMENTS_JSON]``): a UI that renders and answers MCP calls renders and answers
these unchanged, and the wire protocol gains no event.

A tool a client answers over the wire (a dynamic tool) is shown the same way,
under the server ``client``; its call is asked of the client and awaited as an
approval is (:mod:`._dynamic_tools`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from .._logging import get_logger
from ..protocol import (
    ApprovalPolicy,
    EventMsg,
    ExecApprovalRequest,
    McpInvocation,
    McpToolCallBegin,
    McpToolCallEnd,
)
from ..tools.function_schema import ArgumentError
from ..tools.functions import FunctionTool, ToolImage, call_tool_result, error_result
from ..tools.output import truncate_middle
from ._approvals import Answer, Approvals
from ._history import Item
from ._images import MAX_IMAGE_BYTES
from ._mcp import duration_since
from ._mcp_calls import denied_call, model_text

log = get_logger(__name__)

Emit = Callable[[EventMsg], Awaitable[None]]
Ask = Callable[[str, EventMsg], Awaitable[Answer]]

SERVER = "codexcore"
"""The server name a function tool's call is shown under (see the module)."""

ABORTED = "aborted: the user interrupted the call"


async def call_function_tool(
    call_id: str,
    tool: FunctionTool,
    raw_arguments: Any,
    *,
    policy: ApprovalPolicy,
    approvals: Approvals,
    ask: Ask,
    emit: Emit,
    attach: Callable[[Item], None] | None,
    cwd: str,
    limit_bytes: int,
) -> str:
    """Run one call of ``tool``; the text the model is given as the call's output."""
    try:
        arguments = _arguments(raw_arguments)
        args, kwargs = tool.bind(arguments)
    except ArgumentError as exc:
        return f"error: {tool.name}: {exc}; it was not called"
    called = McpInvocation(SERVER, tool.name, arguments)
    if tool.needs_approval and not approvals.is_mcp_tool_approved(SERVER, tool.name):
        if policy == "never":
            return f"error: {tool.name} needs the user's approval, and this session never asks"
        answer = await ask(call_id, _approval_request(call_id, tool, arguments, cwd))
        if answer.decision == "approved_for_session":
            approvals.approve_mcp_tool_for_session(SERVER, tool.name)
        elif answer.decision == "denied":
            return await denied_call(call_id, called, answer, emit)
    await emit(McpToolCallBegin(call_id, called))
    started = time.monotonic()
    result, image = await _run(tool, args, kwargs, call_id, called, emit, started)
    await emit(McpToolCallEnd(call_id, called, duration_since(started), {"Ok": result}))
    if image is not None:
        return _attach(tool, image, attach)
    return truncate_middle(model_text(result), limit_bytes)


async def _run(
    tool: FunctionTool,
    args: list[Any],
    kwargs: dict[str, Any],
    call_id: str,
    called: McpInvocation,
    emit: Emit,
    started: float,
) -> tuple[dict[str, Any], ToolImage | None]:
    """The function's result (or its exception) as a ``CallToolResult``. Interrupted,
    the call's end event says it was aborted and the cancellation goes on."""
    try:
        return call_tool_result(await tool.invoke(args, kwargs))
    except asyncio.CancelledError:
        await emit(McpToolCallEnd(call_id, called, duration_since(started), {"Err": ABORTED}))
        raise
    except Exception as exc:  # the tool's failure is the model's to read, not the Task's
        log.warning("function tool raised", tool=tool.name, call_id=call_id, exc_info=True)
        return error_result(f"{type(exc).__name__}: {exc}"), None


def _attach(tool: FunctionTool, image: ToolImage, attach: Callable[[Item], None] | None) -> str:
    if attach is None:
        return f"error: {tool.name} returned an image, and images cannot be shown here"
    if len(image.data) > MAX_IMAGE_BYTES:
        return f"error: {tool.name} returned an image over {MAX_IMAGE_BYTES} bytes; not attached"
    attach(
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": f"<image from the tool {tool.name}>"},
                {"type": "input_image", "image_url": image.data_url, "detail": "auto"},
            ],
        }
    )
    return f"{tool.name} returned an image ({image.mime_type}, {len(image.data)} bytes); it follows"


def _arguments(raw: Any) -> dict[str, Any]:
    if raw is None or (isinstance(raw, str | bytes) and not raw.strip()):
        return {}
    try:
        value = orjson.loads(raw) if isinstance(raw, str | bytes) else raw
    except orjson.JSONDecodeError as exc:
        raise ArgumentError(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ArgumentError("arguments must be a JSON object")
    return value


def _approval_request(
    call_id: str, tool: FunctionTool, arguments: dict[str, Any], cwd: str
) -> ExecApprovalRequest:
    shown = orjson.dumps(arguments).decode()
    reason = f"call {tool.name!r}, a tool of the program codexcore runs in (not a command)"
    return ExecApprovalRequest(call_id, ("mcp", SERVER, tool.name, shown), cwd, reason)
