"""A WebSocket client as a browser UI writes one (the ``websockets`` client), speaking
codexcore's lines as messages; and ``codexcore serve --ws`` in a subprocess."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from .server_helpers import LINE_LIMIT, LineLink, ServerProcess, server_env


class WsClient(LineLink):
    """NDJSON lines as WebSocket text messages; ``close_code`` once the server closed."""

    def __init__(self, connection: ClientConnection) -> None:
        super().__init__()
        self.connection = connection
        self.name = "websocket client"
        self._outgoing: list[bytes] = []
        self.server: ServerProcess | None = None

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        token: str | None = None,
        origin: str | None = None,
        max_queue: int | None = 16,
    ) -> WsClient:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        connection = await connect(
            url,
            additional_headers=headers,
            origin=None if origin is None else Origin(origin),
            max_size=LINE_LIMIT,
            max_queue=max_queue,
            compression=None,
            open_timeout=10,
        )
        return cls(connection)

    @property
    def close_code(self) -> int | None:
        return self.connection.close_code

    async def _readline(self) -> bytes:
        try:
            message = await self.connection.recv()
        except ConnectionClosed:
            return b""
        return message.encode() if isinstance(message, str) else message

    def _write(self, data: bytes) -> None:
        self._outgoing.extend(line for line in data.split(b"\n") if line)

    async def _drain(self) -> None:
        lines, self._outgoing = self._outgoing, []
        for line in lines:
            await self.connection.send(line.decode())

    def context(self) -> str:
        return self.server.context() if self.server is not None else ""

    def kill(self) -> None:
        """Drop the connection at once (no close frame), as a crash or a dead network does."""
        self.connection.transport.abort()

    async def close(self) -> None:
        await self.connection.close()


async def start_ws_server(
    base_url: str | None,
    cwd: Path,
    *args: str,
    listen: str = "127.0.0.1:0",
    env: dict[str, Any] | None = None,
) -> tuple[ServerProcess, str]:
    """``codexcore serve --ws LISTEN ARGS`` and the URL it says it listens on."""
    server = await ServerProcess.start(
        base_url, cwd, "--ws", listen, *args, tcp=False, env=server_env(base_url, **(env or {}))
    )
    match = await server.wait_stderr(r"listening on (ws://\S+)")
    return server, match[1]
