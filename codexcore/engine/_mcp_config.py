"""An MCP server as configured (``[mcp_servers.NAME]``), apart from the manager that runs it.

Every Session's configuration holds these, so they load with the engine; the
manager (:mod:`._mcp`), with its processes and the SDK's client, loads only
for a Session that has servers to start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import attrs

from ..protocol._value import Value

DEFAULT_STARTUP_TIMEOUT = 10.0
DEFAULT_TOOL_TIMEOUT = 60.0


@attrs.frozen(repr=False, eq=False)
class McpServerConfig(Value):
    """One ``[mcp_servers.NAME]`` table: a stdio server (``command``, ``args``,
    ``env``, ``cwd``) or a streamable-HTTP one (``url``, the *name* of the
    variable holding its bearer token, ``http_headers``).

    ``enabled_tools`` (None: all) and ``disabled_tools`` choose what the model
    is offered. ``env`` and ``http_headers`` are never shown in a repr.
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict, repr=False, hash=False)
    cwd: str | None = None
    url: str | None = None
    bearer_token_env_var: str | None = None
    http_headers: Mapping[str, str] = attrs.field(factory=dict, repr=False, hash=False)
    enabled: bool = True
    startup_timeout_sec: float = DEFAULT_STARTUP_TIMEOUT
    tool_timeout_sec: float = DEFAULT_TOOL_TIMEOUT
    enabled_tools: tuple[str, ...] | None = None
    disabled_tools: tuple[str, ...] = ()

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url is not None else "stdio"

    def allows(self, tool: str) -> bool:
        """Whether ``tool`` is offered: listed in ``enabled_tools`` (when set), not disabled."""
        if self.enabled_tools is not None and tool not in self.enabled_tools:
            return False
        return tool not in self.disabled_tools
