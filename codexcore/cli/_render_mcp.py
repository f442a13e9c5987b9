"""How ``codexcore exec`` shows MCP servers and their tool calls: lines and their styles."""

from __future__ import annotations

import json
from typing import Any

from ..protocol import EventMsg, McpStartupUpdate, McpToolCallBegin, McpToolCallEnd

FOLD_LINES = 12
Line = tuple[str, str]  # text, and the name of its style: "bold", "dim", "red" or "green"


def mcp_lines(msg: EventMsg) -> list[Line] | None:
    """The lines ``msg`` shows as; None when it is not an MCP event."""
    if isinstance(msg, McpToolCallBegin):
        invocation = msg.invocation
        arguments = json.dumps(invocation.arguments or {}, ensure_ascii=False)
        return [(f"⚙ {invocation.server}.{invocation.tool}({arguments})", "bold")]
    if isinstance(msg, McpToolCallEnd):
        return _end(msg)
    if isinstance(msg, McpStartupUpdate):
        status = msg.status
        if status.state == "failed":
            return [(f"MCP server {msg.server} failed to start: {status.error}", "red")]
        if status.state == "ready":
            return [(f"MCP server {msg.server} ready", "dim")]
        return []
    return None


def _end(msg: McpToolCallEnd) -> list[Line]:
    took = msg.duration.secs * 1000 + msg.duration.nanos // 1_000_000
    result: Any = msg.result if isinstance(msg.result, dict) else {}
    ok = result.get("Ok")
    if not isinstance(ok, dict):
        return [(f"  failed in {took} ms: {result.get('Err')}", "red")]
    lines = _text(ok).splitlines() or [""]
    shown = [(f"  {line}", "") for line in lines[:FOLD_LINES]]
    if len(lines) > FOLD_LINES:
        shown.append((f"  … {len(lines) - FOLD_LINES} more lines", "dim"))
    if ok.get("isError"):
        return [*shown, (f"  tool error in {took} ms", "red")]
    return [*shown, (f"  ok in {took} ms", "green")]


def _text(result: dict[str, Any]) -> str:
    parts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict)]
    texts = [p for p in parts if isinstance(p, str) and p]
    if texts:
        return "\n".join(texts)
    return json.dumps(result.get("structuredContent", result.get("content")), ensure_ascii=False)


def approval_what(command: tuple[str, ...]) -> str | None:
    """An MCP call's approval request (``["mcp", SERVER, TOOL, ARGS]``) in words."""
    if len(command) == 4 and command[0] == "mcp":
        return f"Call MCP tool {command[1]}.{command[2]}({command[3]})"
    return None
