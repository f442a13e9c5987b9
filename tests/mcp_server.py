"""A real MCP server for the tests, written with the SDK's own server class.

    python tests/mcp_server.py [--name NAME] [--hang] [--http PORT] [--token TOKEN]

Over stdio by default, over streamable HTTP on 127.0.0.1:PORT with ``--http``
(``--token`` then requires ``Authorization: Bearer TOKEN``). ``--hang`` never
answers initialize: its lifespan never ends. Its tools:

- ``add`` (read-only): a + b;
- ``echo`` (no annotations): the text back;
- ``erase`` (destructive): says what it erased;
- ``nap`` (read-only): sleeps ``seconds``, then answers;
- ``crash`` (read-only): the process exits with code 3 in the middle of the call;
- ``spawn`` (read-only): starts a ``sleep`` in the server's process group, returns its pid;
- ``environment`` (read-only): the names of its environment variables;
- ``fail`` (read-only): the tool reports an error (``isError``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)


def build(name: str, *, hang: bool) -> MCPServer[Any]:
    @contextlib.asynccontextmanager
    async def never_ready(_: MCPServer[Any]) -> AsyncIterator[None]:
        await asyncio.Event().wait()
        yield

    server: MCPServer[Any] = MCPServer(name, lifespan=never_ready if hang else None)

    @server.tool(annotations=READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def erase(path: str) -> str:
        """Erase a file (pretends to)."""
        return f"erased {path}"

    @server.tool(annotations=READ_ONLY)
    async def nap(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return "rested"

    @server.tool(annotations=READ_ONLY)
    def crash() -> str:
        """Exit in the middle of the call."""
        os._exit(3)

    @server.tool(annotations=READ_ONLY)
    def spawn() -> int:
        """Start a long sleep in this server's process group; its pid."""
        child = subprocess.Popen(["sleep", "1000"])
        return child.pid

    @server.tool(annotations=READ_ONLY)
    def environment() -> list[str]:
        """The names of this server's environment variables."""
        return sorted(os.environ)

    @server.tool(annotations=READ_ONLY)
    def fail() -> str:
        """Report an error."""
        raise ValueError("the index is gone")

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="demo")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--http", type=int)
    parser.add_argument("--token")
    args = parser.parse_args()
    server = build(args.name, hang=args.hang)
    if args.http is None:
        server.run()
        return
    import uvicorn

    app = server.streamable_http_app()
    if args.token is not None:
        app = _require(app, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


def _require(app: Any, token: str) -> Any:
    """``app`` behind a bearer token: anything else gets 401."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    main()
