"""``config.toml``'s ``[mcp_servers.NAME]`` tables, checked (``docs/mcp.md``).

Loaded by :func:`codexcore.config.load_settings` only for a file that has
such tables. Each server becomes its ``McpServerConfig`` fields by name
(:meth:`~codexcore.config.Settings.engine_config` builds the objects); an
error never shows the values of ``env`` or ``http_headers``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final

from ._config_settings import (
    _HEADER_NAME,
    _LOOKS_LIKE_A_KEY,
    ConfigError,
    _bool,
    _Check,
    _Context,
    _env_name,
    _expand_user,
    _Invalid,
    _number,
    _show,
    _string,
    _url,
)

_MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]+")
_MCP_STDIO_KEYS: Final = ("command", "args", "env", "cwd")
_MCP_HTTP_KEYS: Final = ("url", "bearer_token_env_var", "http_headers")
_MCP_COMMON_KEYS: Final = (
    "enabled",
    "startup_timeout_sec",
    "tool_timeout_sec",
    "enabled_tools",
    "disabled_tools",
)


def _strings(value: Any, ctx: _Context) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise _Invalid("a list of strings")
    return tuple(value)


def _string_table(value: Any, ctx: _Context) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _Invalid('a table of names to strings, e.g. { "LOG_LEVEL" = "info" }')
    return dict(value)


def _mcp_headers(value: Any, ctx: _Context) -> dict[str, str]:
    headers = _string_table(value, ctx)
    for name, text in headers.items():
        if not _HEADER_NAME.fullmatch(name) or "\r" in text or "\n" in text:
            raise _Invalid(f"header names and one-line values (not {name!r})")
        if name.lower() == "authorization" or _LOOKS_LIKE_A_KEY.search(text):
            raise _Invalid(
                "no credentials in configuration: name the environment variable holding "
                "the bearer token with bearer_token_env_var"
            )
    return headers


def _mcp_cwd(value: Any, ctx: _Context) -> str:
    path = _expand_user(_string(value, ctx), ctx.user_home)
    if not os.path.isabs(path):
        raise _Invalid(f"an absolute path (not {value!r})")
    return os.path.normpath(path)


_MCP_CHECKS: Final[Mapping[str, _Check]] = {
    "command": _string,
    "args": _strings,
    "env": _string_table,
    "cwd": _mcp_cwd,
    "url": _url,
    "bearer_token_env_var": _env_name,
    "http_headers": _mcp_headers,
    "enabled": _bool,
    "startup_timeout_sec": _number(positive=True),
    "tool_timeout_sec": _number(positive=True),
    "enabled_tools": _strings,
    "disabled_tools": _strings,
}
_MCP_SECRET: Final = frozenset({"env", "http_headers"})


def read_mcp_servers(
    value: Any, where: str, ctx: _Context, warnings: list[str]
) -> dict[str, dict[str, Any]]:
    """The ``[mcp_servers.NAME]`` tables, checked: each server's fields by name."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: mcp_servers: expected tables such as [mcp_servers.docs]")
    servers: dict[str, dict[str, Any]] = {}
    for name, table in value.items():
        shown = f"mcp_servers.{name}"
        if not _MCP_SERVER_NAME.fullmatch(name):
            raise ConfigError(
                f"{where}: [{shown}]: a server's name is letters, digits, _ and - "
                "(it becomes part of its tools' names)"
            )
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: {shown} = {_show(table)}: expected a table ([{shown}])")
        servers[name] = _mcp_server(table, f"{where}: {shown}", ctx, warnings)
    return servers


def _mcp_server(
    table: Mapping[str, Any], where: str, ctx: _Context, warnings: list[str]
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in table.items():
        check = _MCP_CHECKS.get(key)
        if check is None:
            warnings.append(f"unknown key {key!r} in {where}")
            continue
        try:
            fields[key] = check(value, ctx)
        except _Invalid as exc:
            shown = key if key in _MCP_SECRET else f"{key} = {_show(value)}"
            raise ConfigError(f"{where}.{shown}: expected {exc.expected}") from None
    stdio = "command" in fields
    if stdio == ("url" in fields):
        raise ConfigError(
            f"{where}: expected either command (a stdio server) or url (a streamable-HTTP "
            "server), and not both"
        )
    wrong = [k for k in (_MCP_HTTP_KEYS if stdio else _MCP_STDIO_KEYS) if k in fields]
    if wrong:
        kind = "a stdio server (command)" if stdio else "an HTTP server (url)"
        raise ConfigError(f"{where}: {', '.join(wrong)} does not apply to {kind}")
    for key in ("args", "enabled_tools", "disabled_tools"):
        if key in fields:
            fields[key] = tuple(fields[key])
    return fields
