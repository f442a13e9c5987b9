"""The model's call of an MCP tool: approval, ``mcp_tool_call_begin``/``end``, and
what the model is told.

The approval is asked with an ``exec_approval_request`` whose ``command`` is
``["mcp", SERVER, TOOL, ARGUMENTS_JSON]`` (answered by ``exec_approval`` with
the call's id): codexcore has no request type of its own for MCP calls, and
every UI already answers this one. ``approved_for_session`` covers that tool of
that server from then on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..protocol import (
    ApprovalPolicy,
    EventMsg,
    ExecApprovalRequest,
    McpInvocation,
    McpToolCallBegin,
    McpToolCallEnd,
)
from ..tools.output import truncate_middle
from ._approvals import Answer, Approvals, mcp_call_needs_approval
from ._mcp import McpCallError, McpManager, McpTool, duration_since, invocation

Emit = Callable[[EventMsg], Awaitable[None]]
Ask = Callable[[str, EventMsg], Awaitable[Answer]]


async def call_mcp_tool(
    call_id: str,
    tool: McpTool,
    raw_arguments: Any,
    *,
    manager: McpManager,
    policy: ApprovalPolicy,
    approvals: Approvals,
    ask: Ask,
    emit: Emit,
    cwd: str,
    limit_bytes: int,
) -> str:
    """Run one call of ``tool``; the text the model is given as the call's output."""
    try:
        arguments = _arguments(raw_arguments)
    except ValueError as exc:
        return f"error: {exc}"
    called = invocation(tool, arguments)
    if mcp_call_needs_approval(policy, tool.annotations) and not approvals.is_mcp_tool_approved(
        tool.server, tool.name
    ):
        answer = await ask(call_id, _approval_request(call_id, tool, arguments, cwd))
        if answer.decision == "approved_for_session":
            approvals.approve_mcp_tool_for_session(tool.server, tool.name)
        elif answer.decision == "denied":
            return await denied_call(call_id, called, answer, emit)
    await emit(McpToolCallBegin(call_id, called))
    started = time.monotonic()
    try:
        result = await manager.call(tool, arguments)
    except McpCallError as exc:
        await emit(McpToolCallEnd(call_id, called, duration_since(started), {"Err": str(exc)}))
        return f"error: {exc}"
    await emit(McpToolCallEnd(call_id, called, duration_since(started), {"Ok": result}))
    return truncate_middle(model_text(result), limit_bytes)


def _arguments(raw: Any) -> dict[str, Any] | None:
    if raw is None or (isinstance(raw, str | bytes) and not raw.strip()):
        return None
    try:
        value = orjson.loads(raw) if isinstance(raw, str | bytes) else raw
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("arguments must be a JSON object")
    return value


def _approval_request(
    call_id: str, tool: McpTool, arguments: dict[str, Any] | None, cwd: str
) -> ExecApprovalRequest:
    shown = orjson.dumps(arguments).decode() if arguments is not None else "{}"
    title = tool.annotations.get("title") or tool.definition.get("title") or tool.name
    reason = f"call tool {title!r} of MCP server {tool.server!r} (an MCP tool, not a command)"
    return ExecApprovalRequest(call_id, ("mcp", tool.server, tool.name, shown), cwd, reason)


def model_text(result: dict[str, Any]) -> str:
    """What the model reads of a ``CallToolResult``: the text parts joined, else the
    structured content or the content as JSON; a tool's own failure says so."""
    content = result.get("content") or []
    if content and all(isinstance(c, dict) and c.get("type") == "text" for c in content):
        text = "\n".join(str(c.get("text", "")) for c in content)
    elif result.get("structuredContent") is not None:
        text = orjson.dumps(result["structuredContent"]).decode()
    else:
        text = orjson.dumps(content).decode()
    return f"error: the tool reported a failure: {text}" if result.get("isError") else text


async def denied_call(call_id: str, called: McpInvocation, answer: Answer, emit: Emit) -> str:
    """A call the user denied: shown as begun and failed (with their reason), and the
    text the model is given instead of a result."""
    why = (answer.reason or "").strip()
    message = f"the user denied this call{': ' + why if why else ''}"
    await emit(McpToolCallBegin(call_id, called))
    await emit(McpToolCallEnd(call_id, called, duration_since(time.monotonic()), {"Err": message}))
    return f"error: {message}; do not try it again the same way"
