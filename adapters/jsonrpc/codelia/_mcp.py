"""Seed 000's ``mcp.list`` on the JSON-RPC dialect: the engine's ``list_mcp_tools``.

``mcp.list {scope?}`` -> ``{servers: [{id, transport, source, enabled, state,
tools, last_error?, last_connected_at?}]}``. It never waits for a server's
startup and runs beside a run. The engine's states map onto the seed's:
``starting`` -> ``connecting``, ``failed`` and ``cancelled`` -> ``error``, the
rest by name (``disabled``, ``ready``, ``auth_required``). ``scope: "loaded"``
(the default) lists the servers the session runs (enabled ones);
``"configured"`` every server config.toml names. The first call on a fresh
connection starts the session, and with it the servers (``connecting``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import attrs

from codexcore.adapters.jsonrpc._errors import SERVER_ERROR
from codexcore.adapters.jsonrpc._machine import RpcError
from codexcore.protocol import ErrorEvent, ListMcpTools, McpListToolsResponse

if TYPE_CHECKING:
    from codexcore.adapters.jsonrpc._methods import MethodTable
    from codexcore.adapters.jsonrpc._server import RpcContext

_STATES = {
    "disabled": "disabled",
    "starting": "connecting",
    "ready": "ready",
    "auth_required": "auth_required",
    "failed": "error",
    "cancelled": "error",
}


@attrs.frozen
class McpList:
    scope: Literal["loaded", "configured"] | None = None


async def mcp_list(ctx: RpcContext, params: McpList) -> dict[str, Any]:
    from ._runs import state_of

    state = state_of(ctx)
    answer = await state.ask_engine(ListMcpTools(), McpListToolsResponse)
    if isinstance(answer.msg, ErrorEvent):
        raise RpcError(SERVER_ERROR, answer.msg.message, {"code": answer.msg.code})
    assert isinstance(answer.msg, McpListToolsResponse)
    loaded_only = (params.scope or "loaded") == "loaded"
    servers = []
    for server in answer.msg.servers:
        if loaded_only and not server.enabled:
            continue
        entry: dict[str, Any] = {
            "id": server.name,
            "transport": server.transport,
            "source": "global",  # config.toml in CODEXCORE_HOME: there is no project config
            "enabled": server.enabled,
            "state": _STATES[server.state],
            "tools": server.tools,
        }
        if server.last_error is not None:
            entry["last_error"] = server.last_error
        if server.last_connected_at is not None:
            entry["last_connected_at"] = server.last_connected_at
        servers.append(entry)
    return {"servers": servers}


_SERVER = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "transport": {"enum": ["http", "stdio"]},
        "source": {"enum": ["project", "global"]},
        "enabled": {"type": "boolean"},
        "state": {"enum": ["disabled", "connecting", "auth_required", "ready", "error"]},
        "tools": {"type": "integer"},
        "last_error": {"type": "string"},
        "last_connected_at": {"type": "string"},
    },
    "required": ["id", "transport", "enabled", "state"],
}
MCP_LIST_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"servers": {"type": "array", "items": _SERVER}},
    "required": ["servers"],
}


def add_mcp_methods(table: MethodTable) -> None:
    """Register ``mcp.list`` (which makes ``supports_mcp_list`` true)."""
    table.add(
        "mcp.list",
        mcp_list,
        McpList,
        summary="The MCP servers' states and tool counts, now (never waits for a startup)",
        result=MCP_LIST_RESULT,
        errors=(SERVER_ERROR,),
    )
