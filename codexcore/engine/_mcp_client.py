"""The MCP SDK's side of a server's connection: a ``ClientSession`` over a spawned
process's pipes (stdio) or over streamable HTTP.

Imported only by :mod:`._mcp`, off the loop, when a Session has MCP servers:
the SDK and what it loads (pydantic, starlette's types, httpx2) take ~0.6 s.
The stdio transport is codexcore's own (the SDK's spawns the process itself):
the process is spawned before the SDK is even loaded, in a group of its own
that :mod:`._mcp` kills when the Session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from .. import __version__
from ._mcp import McpCallError

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

    from ._mcp import _Server

Ready = Callable[["_Server", "Connection", list[Any]], Awaitable[None]]

_RESULT_KEYS = ("content", "structuredContent", "isError", "_meta")
_MAX_PAGES = 100


class Connection:
    """A ready server's session, for calls from any task on the loop."""

    def __init__(
        self,
        session: ClientSession,
        process: asyncio.subprocess.Process | None,
        closed: anyio.Event | None = None,
    ) -> None:
        self.session = session
        self.process = process
        self._closed = closed

    def closed(self) -> bool:
        """Whether a stdio server's output has ended (it exited, or is exiting)."""
        return self._closed is not None and self._closed.is_set()

    async def call_tool(self, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """MCP's ``CallToolResult`` as JSON, as the server sent it."""
        result = await self.session.call_tool(name, arguments)
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {key: data[key] for key in _RESULT_KEYS if key in data}


async def serve(server: _Server, process: asyncio.subprocess.Process | None, ready: Ready) -> None:
    """Connect, initialize and list the tools within the startup timeout, report
    ``ready``, then hold the connection until the Session ends (``server.stop``) or
    the process's output ends. Raises what kept the server from starting."""
    config = server.config
    closed = anyio.Event()
    async with contextlib.AsyncExitStack() as stack:
        # Entered outside the timeout's scope: they outlive it (anyio's scopes nest).
        if process is not None:
            read, write = await stack.enter_async_context(_pipes(process, closed))
        else:
            read, write = await _http(stack, server)
        client_info = types.Implementation(name="codexcore", version=__version__)
        session = ClientSession(read, write, client_info=client_info)
        await stack.enter_async_context(session)
        try:
            with anyio.fail_after(config.startup_timeout_sec):
                await session.initialize()
                tools = await _list_tools(session)
        except TimeoutError:
            raise McpCallError(
                f"did not start within {config.startup_timeout_sec:g} s "
                "(startup_timeout_sec): no answer to initialize or tools/list"
            ) from None
        await ready(server, Connection(session, process, closed), tools)
        await _until_closed(server, closed if process is not None else None)


async def _until_closed(server: _Server, closed: anyio.Event | None) -> None:
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(server.stop.wait())]
    if closed is not None:
        waits.append(asyncio.ensure_future(closed.wait()))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def _list_tools(session: ClientSession) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(
            t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
        )
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def _http(stack: contextlib.AsyncExitStack, server: _Server) -> TransportStreams:
    config = server.config
    assert config.url is not None, "an HTTP server has a url (config checks)"
    headers = dict(config.http_headers)
    if (variable := config.bearer_token_env_var) is not None:
        token = os.environ.get(variable)
        if not token:
            raise McpCallError(f"${variable} (its bearer_token_env_var) is not set")
        headers["Authorization"] = f"Bearer {token}"
    refused: list[int] = []

    async def note_refusal(response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            refused.append(response.status_code)

    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(30.0, read=300.0),
        event_hooks={"response": [note_refusal]},
    )
    await stack.enter_async_context(http)
    stack.push_async_exit(_refusal_as_error(refused))
    streams: TransportStreams = await stack.enter_async_context(
        streamable_http_client(config.url, http_client=http)
    )
    return streams


def _refusal_as_error(refused: list[int]) -> Callable[..., Awaitable[bool]]:
    """An exit callback that turns a failure after a 401/403 into one that says so."""

    async def exit_(exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is not None and refused and not isinstance(exc, asyncio.CancelledError):
            raise McpCallError(
                f"HTTP {refused[-1]}: the server refused the credentials (authorization required)"
            ) from None
        return False

    return exit_


@contextlib.asynccontextmanager
async def _pipes(
    process: asyncio.subprocess.Process, closed: anyio.Event
) -> AsyncIterator[TransportStreams]:
    """The (read, write) stream pair over a process's stdout and stdin: one JSON-RPC
    message per line. ``closed`` is set when its stdout ends (it exited)."""
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    stdout, stdin = process.stdout, process.stdin
    assert stdout is not None, "spawned with pipes"
    assert stdin is not None, "spawned with pipes"

    async def read() -> None:
        try:
            async with read_in:
                while line := await stdout.readline():
                    if line.strip():
                        await read_in.send(_parse(line))
        except (ValueError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # a line beyond the limit, or the session gone: the connection ends
        finally:
            closed.set()

    async def write() -> None:
        with contextlib.suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with write_out:
                async for message in write_out:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    stdin.write(data.encode() + b"\n")
                    await stdin.drain()

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        group.start_soon(write)
        try:
            yield read_out, write_in
        finally:
            group.cancel_scope.cancel()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc
