"""MCP servers on the wire: startup, tool calls and the tool list, in Codex's shapes.

Codex's ``McpStartupUpdateEvent``, ``McpStartupCompleteEvent``,
``McpToolCallBeginEvent``/``McpToolCallEndEvent`` (with ``McpInvocation``) and
``Op::ListMcpTools`` -> ``McpListToolsResponseEvent``, field for field. What an
MCP server says (a tool's arguments, its result, its definition) is carried
as the JSON the server sent, in MCP's own camelCase.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import attrs

from ._value import Value
from ._wire import EVENT_MSGS, JSON, OPS, Tagged

JsonValue = Annotated[Any, JSON]
"""Any JSON value (a field whose shape a peer's own schema describes)."""

McpStartupState = Literal["starting", "ready", "failed", "cancelled"]
McpServerState = Literal["disabled", "starting", "ready", "auth_required", "failed", "cancelled"]
"""Where a configured server is: ``disabled`` (``enabled = false``), ``starting``,
``ready``, ``auth_required`` (its HTTP endpoint answered 401 or 403), ``failed``
(it did not start, or it exited or broke since) or ``cancelled`` (the session
ended while it started)."""
McpTransport = Literal["stdio", "http"]
McpAuthStatus = Literal["unsupported", "not_logged_in", "bearer_token", "o_auth"]


@attrs.frozen(repr=False, eq=False)
class McpStartupStatus(Value):
    """Codex's ``McpStartupStatus``: ``{state}``, with ``error`` when ``failed``."""

    state: McpStartupState
    error: str | None = None


@EVENT_MSGS.register("mcp_startup_update")
@attrs.frozen(repr=False, eq=False)
class McpStartupUpdate(Tagged):
    """One MCP server's startup moved on (``starting``, then ``ready`` or ``failed``).

    Sent under the id of the submission that created the Session, as the
    servers start beside whatever runs; a server that fails never stops the
    Session.
    """

    server: str
    status: McpStartupStatus


@attrs.frozen(repr=False, eq=False)
class McpStartupFailure(Value):
    server: str
    error: str


@EVENT_MSGS.register("mcp_startup_complete")
@attrs.frozen(repr=False, eq=False)
class McpStartupComplete(Tagged):
    """Every enabled MCP server is ready or failed: the Session's tools are settled."""

    ready: tuple[str, ...] = ()
    failed: tuple[McpStartupFailure, ...] = ()
    cancelled: tuple[str, ...] = ()


@attrs.frozen(repr=False, eq=False)
class McpInvocation(Value):
    """Which tool of which server, with the model's arguments (a JSON object, or null).

    ``server`` is ``codexcore`` for a function tool: a Python function of the program
    that embeds codexcore, whose calls are shown (and approved) as MCP tool calls.
    """

    server: str
    tool: str
    arguments: JsonValue = None


@attrs.frozen(repr=False, eq=False)
class Duration(Value):
    """A span of time as Codex (Rust's ``Duration``) writes it."""

    secs: int
    nanos: int


@EVENT_MSGS.register("mcp_tool_call_begin")
@attrs.frozen(repr=False, eq=False)
class McpToolCallBegin(Tagged):
    """The model's call of an MCP tool was approved (or needed no approval) and is sent."""

    call_id: str
    invocation: McpInvocation


@EVENT_MSGS.register("mcp_tool_call_end")
@attrs.frozen(repr=False, eq=False)
class McpToolCallEnd(Tagged):
    """An MCP tool call ended.

    ``result`` is Codex's ``Result<CallToolResult, String>``: ``{"Ok": {content,
    structuredContent?, isError?}}`` with MCP's result as the server sent it
    (``isError`` true: the tool itself reports failure), or ``{"Err": "..."}``
    when there is no result (the server crashed, broke the protocol, timed out,
    or the call was denied).
    """

    call_id: str
    invocation: McpInvocation
    duration: Duration
    result: JsonValue


@attrs.frozen(repr=False, eq=False)
class McpServerStatus(Value):
    """One configured server, as ``mcp_list_tools_response`` reports it.

    ``tools`` counts the tools offered to the model (after ``enabled_tools`` and
    ``disabled_tools``); ``last_error`` is why it failed, or the last call's
    transport error; ``last_connected_at`` (ISO 8601, UTC) when it became ready.
    """

    name: str
    transport: McpTransport
    enabled: bool
    state: McpServerState
    tools: int = 0
    last_error: str | None = None
    last_connected_at: str | None = None


@EVENT_MSGS.register("mcp_list_tools_response")
@attrs.frozen(repr=False, eq=False)
class McpListToolsResponse(Tagged):
    """The answer to ``list_mcp_tools``.

    ``tools`` maps each qualified name the model sees (``server__tool``) to the
    tool's definition as its server sent it (``name``, ``description``,
    ``inputSchema``, ``annotations`` …); ``auth_statuses`` how each server is
    authenticated. Beyond Codex's event: ``servers``, every configured server's
    state, in name order.
    """

    tools: dict[str, JsonValue] = attrs.field(factory=dict)
    auth_statuses: dict[str, McpAuthStatus] = attrs.field(factory=dict)
    servers: tuple[McpServerStatus, ...] = ()


@OPS.register("list_mcp_tools")
@attrs.frozen(repr=False, eq=False)
class ListMcpTools(Tagged):
    """List the MCP servers' tools and states now, without waiting for startup or
    disturbing a running Task. Answered by ``mcp_list_tools_response``."""
