"""The function tools an engine offers the model: ``Codex(tools=[...])`` and ``codex.tools``.

An engine runs one Session at a time (a session host gives each session an engine
of its own), so the registry is the Session's too. Tools may be added and removed
from any thread at any time; a Task offers (and runs) the tools registered when it
started, so a change applies from the next Task on.

A name is refused at registration, never shadowed later: a built-in tool's name,
a name another function tool has, a name of the form ``SERVER__...`` for a
configured MCP server (the names its tools take: :func:`._mcp.qualified_names`),
or the name of a tool a client declared (:mod:`._dynamic_tools`).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..tools.functions import FunctionTool
from ._mcp import DELIMITER


class ToolNameTaken(ValueError):
    """A function tool whose name is taken: the message says by what."""


class ToolRegistry:
    """The function tools of one engine (see the module). Safe to use from any thread."""

    def __init__(
        self,
        builtin: Iterable[str],
        mcp_servers: Iterable[str],
        client_tools: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        """``client_tools`` names the tools a client declared (dynamic tools) now."""
        self._builtin = frozenset(builtin)
        self._servers = tuple(mcp_servers)
        self._client_tools = client_tools
        self._lock = threading.Lock()
        # Replaced, never changed in place: a snapshot handed to a Task stays as it was.
        self._tools: Mapping[str, FunctionTool] = {}

    def add(
        self,
        tool: FunctionTool | Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: bool | None = None,
        executor: concurrent.futures.Executor | None = None,
    ) -> FunctionTool:
        """Register ``tool`` (a :class:`FunctionTool`, or a function made one here, with
        the options of :func:`~codexcore.function_tool`); returns it.

        Raises :class:`ToolNameTaken` when its name is a built-in tool's, an MCP
        server's tools', or another function tool's.
        """
        if not isinstance(tool, FunctionTool):
            tool = FunctionTool.of(
                tool,
                name=name,
                description=description,
                needs_approval=bool(needs_approval),
                executor=executor,
            )
        elif name is not None or description is not None or executor is not None:
            raise TypeError("options are for a plain function; this is a FunctionTool already")
        with self._lock:
            self._check_name(tool.name)
            self._tools = {**self._tools, tool.name: tool}
        return tool

    def remove(self, name: str) -> FunctionTool:
        """Unregister the tool ``name``; returns it. Raises KeyError naming the tools."""
        with self._lock:
            if name not in self._tools:
                known = ", ".join(self._tools) or "none"
                raise KeyError(f"no function tool named {name!r} (registered: {known})")
            tools = dict(self._tools)
            removed = tools.pop(name)
            self._tools = tools
        return removed

    def snapshot(self) -> Mapping[str, FunctionTool]:
        """The tools now, as a Task keeps them (later changes do not touch it)."""
        return self._tools

    def get(self, name: str) -> FunctionTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[FunctionTool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({', '.join(self._tools)})"

    def _check_name(self, name: str) -> None:
        if name in self._builtin:
            raise ToolNameTaken(
                f"cannot register tool {name!r}: it is a built-in tool "
                f"({', '.join(sorted(self._builtin))}); give the function another name "
                "(function_tool(name=...))"
            )
        for server in self._servers:
            if name.startswith(f"{server}{DELIMITER}"):
                raise ToolNameTaken(
                    f"cannot register tool {name!r}: names starting with "
                    f"'{server}{DELIMITER}' are the tools of the MCP server {server!r}"
                )
        if name in self._client_tools():
            raise ToolNameTaken(
                f"cannot register tool {name!r}: a client of the session declared a tool "
                "of that name (dynamic_tools)"
            )
        if name in self._tools:
            raise ToolNameTaken(
                f"cannot register tool {name!r}: a function tool of that name is "
                f"registered already (remove it first: tools.remove({name!r}))"
            )
